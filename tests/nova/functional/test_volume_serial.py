"""What a tenant sees of an attached volume: its id as the disk serial.

A guest finds a volume by ``/dev/disk/by-id/virtio-<serial>``, and SPDK's
vhost-blk controller answers with the first 20 bytes of its bdev's name:
the connector names that bdev after the volume (a raid0 layer over a
local lvol, the NVMe controller of a remote one). Checked from inside a
real QEMU (TCG) guest, whose busybox userland has no udev: the sysfs
``serial`` it reads is what udev builds the by-id link from. The same
guests see an online extend through the new names. The connector-level
cases check what it builds, reuses and removes on real SPDK targets,
including attachments made by a release that named things otherwise.
"""

import json
import os

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture

from os_brick_connector import connector
from os_brick_connector import connector_errors as errors
from os_brick_connector import options
from os_brick_connector import privileged
from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import saved_config
from spdk_vhost_core import spdk_rpc
from spdk_vhost_core import volume_bdev
from testbed import fault_proxy
from testbed.guest import qemu
from testbed import waiting
from tests import base
from tests.nova import fake_sysfs
from tests.nova.functional import targets
from tests.nova.functional import test_connector as connector_tests

GROUP = 'spdk_vhost'
HOST_NQN = connector_tests.HOST_NQN
VOLUME_A = connector_tests.VOLUME_A
VOLUME_B = connector_tests.VOLUME_B
MIB = 1024 * 1024
#: The NVMe controller name a release before this one would have chosen.
OLD_NAME = 'spdkvhost0123456789abcdef'


def serial_command(dev):
    """Reports dev.serial: the disk serial the guest kernel read, in []."""
    return ('gt_result %s.serial "[$(cat /sys/block/%s/serial)]"'
            % (dev, dev))


class SerialCase(base.TestCase):
    """One compute target and a connector that saves its config."""

    remote = False

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(400, gentle=True))
        if self.remote:
            self.target = targets.remote_compute(self)
            self.storage_target = targets.storage(self)
            self.storage = targets.client_of(self, self.storage_target)
        else:
            self.target = targets.local_compute(self, lcores=None)
        self.client = targets.client_of(self, self.target)
        self.useFixture(fake_sysfs.FakeSysfs({0: '0-1'}))
        conf = cfg.ConfigOpts()
        options.register_opts(conf)
        self.cfg = self.useFixture(config_fixture.Config(conf))
        self.saved_path = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'compute.json')
        self.cfg.config(group=GROUP, spdk_rpc_socket=self.target.socket_path,
                        spdk_saved_config=self.saved_path,
                        host_nqn=HOST_NQN,
                        disconnect_retry_interval=0.05)
        self.conf = conf[GROUP]
        privileged.socket_access.set_client_mode(False)
        self.addCleanup(privileged.socket_access.set_client_mode, True)
        self.connector = connector.SpdkVhostConnector(
            None, conf=self.conf, client=self.client)

    def connect(self, props, connector_=None):
        conn = connector_ or self.connector
        info = conn.connect_volume(props)
        self.addCleanup(self._disconnect_quietly, props, info)
        return info

    def _disconnect_quietly(self, props, info):
        self.connector.disconnect_volume(props, info, force=True)

    def props(self, volume_id=VOLUME_A, **extra):
        if self.remote:
            props = connector_tests.RemoteTestCase.export(self, volume_id)
            props.update(extra)
            return props
        return connector_tests.local_props(volume_id, self.client, **extra)

    def exposed(self, info):
        ctrl = self.client.vhost_get_controllers(name=info['controller'])[0]
        return ctrl['backend_specific']['block']['bdev']

    def raids(self):
        return sorted(r['name'] for r in self.client.bdev_raid_get_bdevs())

    def nvme_names(self):
        return sorted(c['name']
                      for c in self.client.bdev_nvme_get_controllers())

    def saved(self, method, key):
        """``params[key]`` of each ``method`` entry in the saved config."""
        with open(self.saved_path) as src:
            return saved_config.names(json.load(src), method, key)

    def boot(self, info):
        return self.useFixture(qemu.GuestFixture([info['path']])).guest

    def guest_size(self, guest):
        return int(guest.execute(qemu.disk_info('vda'))['vda.size'])

    def wait_guest_size(self, guest, size, timeout=60):
        waiting.wait_for('the guest to see %d bytes' % size,
                         lambda: self.guest_size(guest) == size, timeout)


class TestLocalLayer(SerialCase):
    """transport local: a raid0 named after the volume, on its lvol."""

    def test_attach_builds_and_detach_removes_the_layer(self):
        props = self.props(qos_specs={'total_iops_sec': '2000'})
        info = self.connect(props)
        self.assertEqual(VOLUME_A, self.exposed(info))
        self.assertEqual([props['lvol_uuid']],
                         volume_bdev.members(self.client, VOLUME_A))
        layer = self.client.bdev_get_bdevs(name=VOLUME_A)[0]
        lvol = self.client.bdev_get_bdevs(name=props['lvol_uuid'])[0]
        self.assertEqual(2000, layer['assigned_rate_limits']['rw_ios_per_sec'])
        self.assertEqual(0, lvol['assigned_rate_limits']['rw_ios_per_sec'])
        self.assertTrue(lvol['claimed'])
        self.assertEqual([VOLUME_A], self.saved('bdev_raid_create', 'name'))
        # The layer follows the lvol: what extend_volume reports.
        self.client.bdev_lvol_resize(props['bdev'], 16)
        self.assertEqual(16 * MIB, self.connector.extend_volume(props))
        self.assertEqual(info, self.connector.connect_volume(props))

        self.connector.disconnect_volume(props, info)
        self.assertEqual([], self.client.vhost_get_controllers())
        self.assertEqual([], self.raids())
        self.assertEqual([], self.saved('bdev_raid_create', 'name'))
        self.assertFalse(self.client.bdev_get_bdevs(
            name=props['lvol_uuid'])[0]['claimed'])

    def test_failed_attach_leaves_no_layer(self):
        self.cfg.config(group=GROUP, numa_policy='required')
        props = self.props(numa_node=3)
        self.assertRaises(errors.NumaPlacementError,
                          self.connector.connect_volume, props)
        self.assertEqual([], self.client.vhost_get_controllers())
        self.assertEqual([], self.raids())

    def test_lost_reply_of_the_layer_is_undone(self):
        proxy = self.useFixture(fault_proxy.FaultProxyFixture(
            self.target.socket_path)).proxy
        self.cfg.config(group=GROUP, spdk_rpc_socket=proxy.path,
                        spdk_rpc_timeout=1.0, spdk_rpc_connect_retries=0)
        faulty = connector.SpdkVhostConnector(
            None, conf=self.conf,
            client=spdk_rpc.SpdkClient.from_conf(self.conf))
        self.addCleanup(faulty.client.close)
        props = self.props()
        proxy.fail('bdev_raid_create', 'cut_after')
        err = self.assertRaises(errors.TargetError,
                                faulty.connect_volume, props)
        self.assertIsInstance(err.__cause__, spdk_exc.SpdkTransportError)
        self.assertEqual([], self.raids())
        self.assertEqual(VOLUME_A, self.exposed(self.connect(props)))

    def test_attachment_of_an_older_release_is_kept(self):
        """Its controller serves the lvol itself; a guest may be on it."""
        props = self.props()
        self.client.vhost_create_blk_controller('vhost-' + VOLUME_A,
                                                props['lvol_uuid'])
        info = self.connect(props)
        self.assertEqual(props['lvol_uuid'], self.exposed(info))
        self.assertEqual([], self.raids())
        self.connector.disconnect_volume(props, info)
        self.assertEqual([], self.client.vhost_get_controllers())

    def test_layer_left_by_a_broken_detach_is_reused(self):
        props = self.props()
        volume_bdev.create(self.client, VOLUME_A, props['lvol_uuid'])
        info = self.connect(props)
        self.assertEqual(VOLUME_A, self.exposed(info))
        self.connector.disconnect_volume(props, info)
        self.assertEqual([], self.raids())

    def test_lvol_held_by_another_module_is_refused(self):
        props = self.props()
        volume_bdev.create(self.client, 'someone-else', props['lvol_uuid'])
        self.addCleanup(volume_bdev.delete, self.client, 'someone-else')
        self.assertRaises(errors.VolumeClaimed,
                          self.connector.connect_volume, props)
        self.assertEqual(['someone-else'], self.raids())
        self.assertEqual([], self.client.vhost_get_controllers())

    def test_name_taken_by_another_bdev_is_refused(self):
        props = self.props()
        path = os.path.join(self.target.workdir, 'other.img')
        with open(path, 'wb') as image:
            image.truncate(MIB)
        self.client.bdev_aio_create(path, VOLUME_A, block_size=512)
        self.assertRaises(errors.BdevConflict,
                          self.connector.connect_volume, props)
        self.assertEqual([], self.raids())
        self.assertEqual([], self.client.vhost_get_controllers())
        self.assertEqual('AIO disk', self.client.bdev_get_bdevs(
            name=VOLUME_A)[0]['product_name'])


class TestRemoteName(SerialCase):
    """transport tcp: the NVMe controller is named after the volume."""

    remote = True

    def old_attachment(self, props, vhost_ctrlr=None):
        """What a release before this one left: another NVMe name."""
        self.client.bdev_nvme_attach_controller(
            name=OLD_NAME, trtype='tcp', traddr=props['traddr'],
            trsvcid=props['trsvcid'], adrfam='ipv4', subnqn=props['nqn'],
            hostnqn=HOST_NQN)
        if vhost_ctrlr:
            self.client.vhost_create_blk_controller(vhost_ctrlr,
                                                    OLD_NAME + 'n1')
            self.addCleanup(self._delete_controller, vhost_ctrlr)

    def _delete_controller(self, name):
        try:
            self.client.vhost_delete_controller(name)
        except spdk_exc.NotFound:
            pass  # the test detached it

    def test_namespace_bdev_carries_the_volume_id(self):
        props = self.props(qos_specs={'total_iops_sec': '2000'})
        info = self.connect(props)
        self.assertEqual(VOLUME_A + 'n1', self.exposed(info))
        self.assertEqual([VOLUME_A], self.nvme_names())
        self.assertEqual(2000, self.client.bdev_get_bdevs(
            name=VOLUME_A + 'n1')[0]['assigned_rate_limits'][
                'rw_ios_per_sec'])
        self.connector.disconnect_volume(props, info)
        self.assertEqual([], self.nvme_names())

    def test_attachment_of_an_older_release_is_kept_then_detached(self):
        props = self.props()
        self.old_attachment(props, vhost_ctrlr='vhost-' + VOLUME_A)
        info = self.connect(props)
        self.assertEqual(OLD_NAME + 'n1', self.exposed(info))
        self.assertEqual([OLD_NAME], self.nvme_names())
        self.connector.disconnect_volume(props, info)
        self.assertEqual([], self.client.vhost_get_controllers())
        self.assertEqual([], self.nvme_names())

    def test_unused_old_controller_is_replaced(self):
        props = self.props()
        self.old_attachment(props)
        info = self.connect(props)
        self.assertEqual(VOLUME_A + 'n1', self.exposed(info))
        self.assertEqual([VOLUME_A], self.nvme_names())

    def test_subsystem_in_use_under_another_name_is_refused(self):
        props = self.props()
        self.old_attachment(props, vhost_ctrlr='vhost-other')
        err = self.assertRaises(errors.NvmePathInUse,
                                self.connector.connect_volume, props)
        self.assertIn(OLD_NAME + 'n1', str(err))
        self.assertEqual([OLD_NAME], self.nvme_names())
        self.assertEqual(['vhost-other'], [
            c['ctrlr'] for c in self.client.vhost_get_controllers()])


class GuestTests(object):
    """A real guest reads the serial and sees an online extend."""

    def check_guest(self, props, resize):
        info = self.connect(props)
        guest = self.boot(info)
        got = guest.execute(serial_command('vda'))
        self.assertEqual('[%s]' % VOLUME_A[:20], got['vda.serial'])
        self.assertEqual(8 * MIB, self.guest_size(guest))
        resize(16)
        self.wait_guest_size(guest, 16 * MIB)
        guest.execute(qemu.check_pattern('vda', 16 * MIB - 65536, 65536,
                                         'tail'))


class TestLocalGuest(GuestTests, SerialCase):

    def test_serial_and_extend(self):
        props = self.props()
        self.check_guest(props, lambda mib: self.client.bdev_lvol_resize(
            props['bdev'], mib))


class TestRemoteGuest(GuestTests, SerialCase):

    remote = True

    def test_serial_and_extend(self):
        props = self.props()
        self.check_guest(props, lambda mib: self.storage.bdev_lvol_resize(
            props['lvol_uuid'], mib))
