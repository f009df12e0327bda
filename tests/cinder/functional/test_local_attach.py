"""A hyperconverged attach meets the Cinder driver on one real target.

The real connector attaches a ``local`` volume (what Nova does on the
host whose SPDK target also holds the lvol); the driver then extends,
retypes and tries to delete it, as Cinder would while it is attached.
Front-end QoS is the connector's, on the bdev its vhost controller
exposes; back-end QoS is the driver's, on the lvol: neither may undo the
other, and the driver must still see that the volume is in use.
"""

from cinder import exception
from cinder.volume import volume_types
import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture

from os_brick_connector import connector
from os_brick_connector import options
from os_brick_connector import privileged
from tests.cinder import base
from tests.cinder.functional import test_driver

MIB = test_driver.MIB
LOCAL = {'host': 'storage', 'spdk_target_id': 'storage-target'}
FRONT = {'total_iops_sec': '3000', 'write_bytes_sec': str(20 * MIB)}


class LocalAttachTest(test_driver.DriverTestCase):

    def setUp(self):
        super().setUp()
        conf = cfg.ConfigOpts()
        options.register_opts(conf)
        self.useFixture(config_fixture.Config(conf))
        saved = self.useFixture(fixtures.TempDir()).path + '/compute.json'
        conf.set_override('spdk_rpc_socket', self.target.socket_path,
                          'spdk_vhost')
        conf.set_override('spdk_saved_config', saved, 'spdk_vhost')
        privileged.socket_access.set_client_mode(False)
        self.addCleanup(privileged.socket_access.set_client_mode, True)
        self.connector = connector.SpdkVhostConnector(
            None, conf=conf.spdk_vhost)
        self.addCleanup(self.connector.client.close)

    def attach(self, volume):
        """initialize_connection, then the compute host's connect.

        Cinder's volume manager adds the type's front-end QoS specs to
        the connection info, as it does for every driver.
        """
        props = self.driver.initialize_connection(volume, LOCAL)['data']
        self.assertEqual('local', props['transport'])
        qos = volume_types.get_volume_type_qos_specs(
            volume.volume_type_id)['qos_specs'] or {}
        if qos.get('consumer') in ('front-end', 'both'):
            props['qos_specs'] = dict(qos['specs'])
        info = self.connector.connect_volume(props)
        self.addCleanup(self.connector.disconnect_volume, props, info,
                        force=True)
        return props, info

    def exposed(self, info):
        """The bdev the guest's controller serves, as SPDK reports it."""
        ctrl = self.rpc('vhost_get_controllers',
                        {'name': info['controller']})[0]
        return self.bdev(ctrl['backend_specific']['block']['bdev'])

    def test_front_end_limits_survive_extend_and_retype(self):
        """Back-end QoS re-applied by the driver leaves front-end alone."""
        front = self.make_type(FRONT, consumer='front-end')
        volume = self.created(vtype=front)
        props, info = self.attach(volume)
        wanted = {'rw_ios_per_sec': 3000, 'rw_mbytes_per_sec': 0,
                  'r_mbytes_per_sec': 0, 'w_mbytes_per_sec': 20}
        self.assertEqual(wanted, self.exposed(info)['assigned_rate_limits'])

        self.driver.extend_volume(volume, 2)
        exposed = self.exposed(info)
        self.assertEqual(2048 * MIB,
                         exposed['num_blocks'] * exposed['block_size'])
        self.assertEqual(wanted, exposed['assigned_rate_limits'])

        back = self.make_type({'total_iops_sec': '5000'})
        host = {'host': base.HOST + '#' + base.LVS}
        self.assertEqual((True, None), self.driver.retype(
            self.ctxt, volume, back, {}, host))
        self.assertEqual(wanted, self.exposed(info)['assigned_rate_limits'])
        self.assertEqual(5000, self.limits(self.alias(volume))[
            'rw_ios_per_sec'])

    def test_back_end_qos_of_an_attached_idle_volume_converges(self):
        """No guest on the controller: no I/O channel on the lvol."""
        vtype = self.make_type({'total_iops_sec_per_gb': '1000'})
        volume = self.created(size=2, vtype=vtype)
        self.attach(volume)
        self.driver.extend_volume(volume, 5)
        self.assertEqual(5000, self.limits(self.alias(volume))[
            'rw_ios_per_sec'])
        host = {'host': base.HOST + '#' + base.LVS}
        self.driver.retype(self.ctxt, volume, self.make_type(
            {'total_bytes_sec': str(30 * MIB)}), {}, host)
        self.assertEqual({'rw_ios_per_sec': 0, 'rw_mbytes_per_sec': 30,
                          'r_mbytes_per_sec': 0, 'w_mbytes_per_sec': 0},
                         self.limits(self.alias(volume)))
        self.assertEqual([], self.subsystems())

    def test_delete_refused_while_attached(self):
        volume = self.created()
        props, info = self.attach(volume)
        self.assertRaises(exception.VolumeIsBusy,
                          self.driver.delete_volume, volume)
        self.assertEqual([volume.name], self.lvol_names())
        self.connector.disconnect_volume(props, info)
        self.driver.delete_volume(volume)
        self.assertEqual([], self.lvol_names())

    def test_export_to_another_host_refused_while_attached(self):
        """The lvol is held by the local layer: SPDK refuses the export.

        Documented; the attempt leaves no subsystem behind.
        """
        volume = self.created()
        self.attach(volume)
        self.assertRaises(exception.VolumeBackendAPIException,
                          self.driver.initialize_connection, volume,
                          test_driver.REMOTE)
        self.assertEqual([], self.subsystems())
