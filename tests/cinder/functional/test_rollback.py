"""A failure between two steps leaves nothing behind on the target.

The real client talks to a real SPDK target; only the one call named is made
to fail (an SPDK error or a timeout) before it reaches the target.
"""

from cinder import exception
import fixtures

from spdk_vhost_core import exception as rpc_exc
from tests.cinder.functional import test_driver

FAILURES = (
    rpc_exc.SpdkRpcError('x', code=-32603, message='injected'),
    rpc_exc.Timeout('x', message='injected timeout'),
)


class RollbackTest(test_driver.DriverTestCase):

    def failing(self, method, error, occurrence=1):
        """A fixture making the ``occurrence``-th ``method`` call raise."""
        real = self.driver.client.call
        seen = []

        def call(client, name, params=None):
            if name == method:
                seen.append(name)
                if len(seen) == occurrence:
                    raise error
            return real(name, params)
        return fixtures.MonkeyPatch(
            'spdk_vhost_core.spdk_rpc.SpdkClient.call', call)

    def check(self, method, action, expected_lvols, occurrence=1):
        for error in FAILURES:
            with self.subTest(method=method, error=type(error).__name__):
                with self.failing(method, error, occurrence):
                    self.assertRaises(exception.VolumeBackendAPIException,
                                      action)
                self.assertEqual(sorted(expected_lvols), self.lvol_names())
                self.assertEqual([], self.subsystems())

    def test_create_fails_at_qos(self):
        vtype = self.make_type({'total_iops_sec': '1000'})
        volume = self.make_volume(vtype=vtype)
        self.check('bdev_set_qos_limit',
                   lambda: self.driver.create_volume(volume), [])

    def test_clone_fails_after_hidden_snapshot(self):
        source = self.created()
        clone = self.make_volume()
        self.check('bdev_lvol_clone',
                   lambda: self.driver.create_cloned_volume(clone, source),
                   [source.name])

    def test_clone_fails_at_resize(self):
        source = self.created()
        clone = self.make_volume(size=2)
        self.check('bdev_lvol_resize',
                   lambda: self.driver.create_cloned_volume(clone, source),
                   [source.name])

    def test_from_snapshot_fails_at_qos(self):
        volume = self.created()
        snapshot = self.make_snapshot(volume)
        self.driver.create_snapshot(snapshot)
        vtype = self.make_type({'total_iops_sec': '1000'})
        clone = self.make_volume(vtype=vtype)
        self.check('bdev_set_qos_limit',
                   lambda: self.driver.create_volume_from_snapshot(
                       clone, snapshot), [volume.name, snapshot.name])

    def test_attach_fails_at_add_host(self):
        volume = self.created()
        self.check('nvmf_subsystem_add_host',
                   lambda: self.driver.initialize_connection(
                       volume, test_driver.REMOTE), [volume.name])

    def test_attach_fails_at_listener(self):
        volume = self.created()
        self.check('nvmf_subsystem_add_listener',
                   lambda: self.driver.initialize_connection(
                       volume, test_driver.REMOTE), [volume.name])

    def test_extend_fails_at_qos_shrinks_back(self):
        vtype = self.make_type({'total_iops_sec_per_gb': '1000'})
        volume = self.created(vtype=vtype)
        self.check('bdev_set_qos_limit',
                   lambda: self.driver.extend_volume(volume, 4),
                   [volume.name])
        self.assertEqual(1024, self.size_mib(self.alias(volume)))
        self.assertEqual(1000, self.limits(self.alias(volume))[
            'rw_ios_per_sec'])

    def test_revert_fails_at_last_step(self):
        volume = self.created()
        snapshot = self.make_snapshot(volume)
        self.driver.create_snapshot(snapshot)
        uuid = self.bdev(self.alias(volume))['name']
        self.check('bdev_lvol_delete',
                   lambda: self.driver.revert_to_snapshot(
                       self.ctxt, volume, snapshot),
                   [volume.name, snapshot.name])
        self.assertEqual(uuid, self.bdev(self.alias(volume))['name'])
