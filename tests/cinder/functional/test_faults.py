"""Faults on the wire between the driver and the target leave no orphan.

test_rollback injects errors inside our client; here a relay
(testbed.fault_proxy) breaks the real socket: the reply of a call that did
run is lost, the target answers garbage or too late, or its socket
vanishes between two steps. Each time the driver raises a Cinder
exception and the target holds exactly what it held before.
"""


from cinder import exception

from testbed import fault_proxy
from testbed import net
from tests.cinder.functional import test_driver


class FaultTest(test_driver.DriverTestCase):

    def setUp(self):
        super().setUp()
        self.proxy = self.useFixture(fault_proxy.FaultProxyFixture(
            self.target.socket_path)).proxy
        self.driver = self.make_driver(spdk_rpc_socket=self.proxy.path,
                                       spdk_rpc_timeout=1.0,
                                       spdk_nvmf_port=net.free_port())

    def broken(self, method, action, func, *args, **kwargs):
        self.proxy.fail(method, action, seconds=kwargs.pop('seconds', 0))
        err = self.assertRaises(exception.VolumeBackendAPIException,
                                func, *args)
        self.assertEqual([(method, action)], self.proxy.fired)
        return err

    def assert_clean(self, *volumes):
        self.assertEqual(sorted(v.name for v in volumes), self.lvol_names())
        self.assertEqual([], self.subsystems())

    def test_create_reply_lost(self):
        volume = self.make_volume()
        self.broken('bdev_lvol_create', 'cut_after',
                    self.driver.create_volume, volume)
        self.assert_clean()

    def test_create_reply_corrupt(self):
        volume = self.make_volume()
        err = self.broken('bdev_lvol_create', 'corrupt',
                          self.driver.create_volume, volume)
        self.assertIn('not JSON-RPC', str(err))
        self.assert_clean()

    def test_clone_reply_lost_after_hidden_snapshot(self):
        source = self.created()
        clone = self.make_volume()
        self.broken('bdev_lvol_clone', 'cut_after',
                    self.driver.create_cloned_volume, clone, source)
        self.assert_clean(source)

    def test_snapshot_reply_lost(self):
        source = self.created()
        clone = self.make_volume()
        self.broken('bdev_lvol_snapshot', 'cut_after',
                    self.driver.create_cloned_volume, clone, source)
        self.assert_clean(source)

    def test_subsystem_reply_lost(self):
        volume = self.created()
        self.broken('nvmf_create_subsystem', 'cut_after',
                    self.driver.initialize_connection, volume,
                    test_driver.REMOTE)
        self.assert_clean(volume)

    def test_listener_times_out(self):
        volume = self.created()
        err = self.broken('nvmf_subsystem_add_listener', 'delay',
                          self.driver.initialize_connection, volume,
                          test_driver.REMOTE, seconds=2.5)
        self.assertIn('no reply', str(err))
        self.assert_clean(volume)

    def test_socket_vanishes_between_steps_rollback_waits(self):
        """The target restarts after the snapshot: rollback reconnects."""
        self.driver = self.make_driver(spdk_rpc_socket=self.proxy.path,
                                       spdk_rpc_connect_retries=20,
                                       spdk_rpc_retry_interval=0.1)
        source = self.created()
        clone = self.make_volume()
        self.broken('bdev_lvol_clone', 'vanish',
                    self.driver.create_cloned_volume, clone, source,
                    seconds=0.5)
        self.assert_clean(source)

    def test_socket_gone_for_good_start_up_sweeps(self):
        """No rollback possible: the next service start removes the rest."""
        source = self.created()
        clone = self.make_volume()
        self.broken('bdev_lvol_clone', 'vanish',
                    self.driver.create_cloned_volume, clone, source,
                    seconds=1.0)
        self.assertIn('clonesnap-' + clone.id, self.lvol_names())
        # cinder-volume restarts once the target is back.
        restarted = self.make_driver()
        self.assert_clean(source)
        # Cinder marked the clone 'error'; deleting it succeeds.
        restarted.delete_volume(clone)

    def test_no_space_on_thick_create(self):
        self.driver = self.make_driver(spdk_rpc_socket=self.proxy.path,
                                       spdk_thin_provision=False)
        volume = self.make_volume(size=1)
        err = self.assertRaises(exception.VolumeBackendAPIException,
                                self.driver.create_volume, volume)
        self.assertIn('No space left', str(err))
        self.assert_clean()
        self.driver.delete_volume(volume)

    def test_invalid_input_sends_nothing(self):
        before = sum(self.proxy.calls.values())
        for size in (-1, 0, 2 ** 40):
            volume = self.make_volume(size=size)
            self.assertRaises(exception.InvalidInput,
                              self.driver.create_volume, volume)
        self.assertEqual(before, sum(self.proxy.calls.values()))
