"""The Cinder driver on the SPDK application an operator runs per role.

A storage-only host runs ``nvmf_tgt``, a hyperconverged one may run
``vhost`` (local attachments only, ``spdk_nvmf_transport = none``), both
in interrupt mode, where an idle target sleeps. What each refuses is
said at once, naming the application that would serve it.
"""

from cinder import exception

from spdk_vhost_core import properties
from spdk_vhost_core import volume_bdev
from testbed import cpu
from testbed.guest import qemu
from testbed import spdk_target
from tests.cinder import base
from tests.cinder.functional import test_driver

# Measured at 0.2-0.5% of a core; a polling reactor shows 100%.
IDLE_SHARE = 0.05
LOCAL = {'host': 'storage', 'spdk_target_id': 'storage-target'}


class _Role(object):
    """What every role's test class checks; mixed into a TestCase."""

    INTERRUPT_MODE = True

    def lifecycle(self, connector):
        """Volume, snapshot, clone; the clone's connection data."""
        volume = self.created()
        snapshot = self.make_snapshot(volume)
        self.driver.create_snapshot(snapshot)
        clone = self.make_volume()
        self.driver.create_volume_from_snapshot(clone, snapshot)
        data = self.driver.initialize_connection(clone, connector)['data']
        return volume, snapshot, clone, data

    def delete_all(self, connector, volume, snapshot, clone):
        self.driver.terminate_connection(clone, connector)
        self.driver.delete_volume(clone)
        self.driver.delete_snapshot(snapshot)
        self.driver.delete_volume(volume)
        self.assertEqual([], self.lvol_names())

    def test_idle_target_sleeps(self):
        self.created()
        self.assertLess(cpu.share(self.target.pid, 3.0), IDLE_SHARE)


class StorageOnNvmfTgtTest(_Role, test_driver.DriverTestCase):
    """Storage-only: nvmf_tgt exports; a polling vhost attaches."""

    APP = 'nvmf_tgt'

    def test_lifecycle_and_remote_attach(self):
        remote = test_driver.REMOTE
        volume, snapshot, clone, data = self.lifecycle(remote)
        self.assertEqual('tcp', data['transport'])
        compute = self.useFixture(spdk_target.SpdkTarget(
            app='vhost', name='compute'))
        bdev, = compute.rpc('bdev_nvme_attach_controller', {
            'name': 'vol', 'trtype': data['transport'],
            'traddr': data['traddr'], 'trsvcid': data['trsvcid'],
            'adrfam': data['adrfam'], 'subnqn': data['nqn'],
            'hostnqn': data['host_nqn']})
        info = compute.rpc('bdev_get_bdevs', {'name': bdev})[0]
        self.assertEqual(1024 ** 3, info['num_blocks'] * info['block_size'])
        compute.rpc('bdev_nvme_detach_controller', {'name': 'vol'})
        self.delete_all(remote, volume, snapshot, clone)
        self.assertEqual([], self.subsystems())


class HyperconvergedOnVhostTest(_Role, test_driver.DriverTestCase):
    """Hyperconverged on vhost: local attachments, no NVMe-oF at all."""

    APP = 'vhost'

    def make_driver(self, **overrides):
        overrides.setdefault('spdk_nvmf_transport', 'none')
        return super().make_driver(**overrides)

    def test_lifecycle_and_local_attach_with_guest_io(self):
        volume, snapshot, clone, data = self.lifecycle(LOCAL)
        self.assertEqual(('local', self.alias(clone)),
                         (data['transport'], data['bdev']))
        # What the connector does on this host: a controller on a layer
        # named after the volume, over the lvol.
        client = self.driver.client
        layer = volume_bdev.name(clone.id)
        volume_bdev.create(client, layer, data['lvol_uuid'])
        ctrlr = properties.controller_name(clone.id)
        self.rpc('vhost_create_blk_controller',
                 {'ctrlr': ctrlr, 'dev_name': layer})
        sock = self.rpc('vhost_get_controllers', {'name': ctrlr})[0]
        with qemu.GuestFixture([sock['socket']]) as fixture:
            guest = fixture.guest
            guest.execute(qemu.write_pattern('vda', 0, 65536, 'hci'))
            guest.execute(qemu.check_pattern('vda', 0, 65536, 'hci'))
        # Attached, it is busy; detached, it goes.
        self.assertRaises(exception.VolumeIsBusy,
                          self.driver.delete_volume, clone)
        self.rpc('vhost_delete_controller', {'ctrlr': ctrlr})
        volume_bdev.delete(client, layer)
        self.delete_all(LOCAL, volume, snapshot, clone)

    def test_exporting_backend_refused_at_start(self):
        err = self.assertRaises(exception.VolumeDriverException,
                                self.make_driver, spdk_nvmf_transport='tcp')
        self.assertIn('run nvmf_tgt', str(err))
        self.assertIn('spdk_nvmf_transport = none', str(err))

    def test_remote_attach_refused_clearly(self):
        volume = self.created()
        err = self.assertRaises(exception.VolumeBackendAPIException,
                                self.driver.initialize_connection, volume,
                                test_driver.REMOTE)
        self.assertIn('spdk_nvmf_transport = none', str(err))

    def test_qos_change_of_an_idle_volume_refused_clearly(self):
        """SPDK needs an open channel; no NVMe-oF here to open one."""
        old = self.make_type({'total_iops_sec': '4000'})
        volume = self.created(vtype=old)
        new = self.make_type({'total_iops_sec': '8000'})
        host = {'host': base.HOST + '#' + base.LVS}
        err = self.assertRaises(exception.VolumeBackendAPIException,
                                self.driver.retype, self.ctxt, volume, new,
                                {}, host)
        self.assertIn('no guest has open', str(err))
        self.assertEqual(4000, self.limits(self.alias(volume))[
            'rw_ios_per_sec'])
