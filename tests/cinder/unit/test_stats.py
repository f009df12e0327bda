"""The pool stats' provisioned tally against a full count of every bdev."""

from cinder import exception

from cinder_spdk_vhost import stats
from cinder_spdk_vhost import tally
from spdk_vhost_core import exception as rpc_exc
from tests.cinder.unit import driver_base as dbase


class TallyTest(dbase.DriverTestCase):

    def pool_stats(self):
        return self.driver.pools.stats(dbase.TARGET_ID)

    def full_count(self):
        bdevs = self.fake.bdev_get_bdevs()
        return [stats.pool_stats(self.fake, self.driver.configuration,
                                 dbase.TARGET_ID, lvs, bdevs=bdevs)
                for lvs in self.driver.pools.lvstores]

    def assertCounted(self):
        self.assertEqual(self.full_count(), self.pool_stats())

    def provisioned(self):
        return self.pool_stats()[0]['provisioned_capacity_gb']

    def calls_of(self, func):
        before = len(self.fake.calls)
        func()
        return [method for method, _ in self.fake.calls[before:]]

    def test_each_operation_leaves_the_full_count(self):
        self.assertCounted()
        volume = self.volume(size=3)
        self.assertCounted()
        self.driver.extend_volume(volume, 5)
        self.assertCounted()
        vol = self.volume()
        # Written before the snapshot: the snapshot takes these clusters.
        self.fake.lvol(self.alias(vol))['allocated'] = 300
        snap = self.snapshot(vol)
        clones = [self.make_volume(), self.make_volume()]
        for clone in clones:
            self.driver.create_volume_from_snapshot(clone, snap)
        self.assertCounted()
        self.driver.delete_snapshot(snap)
        self.assertCounted()
        copy = self.make_volume(size=2)
        self.driver.create_cloned_volume(copy, volume)
        self.assertCounted()
        for gone in [vol, copy] + clones:
            self.driver.delete_volume(gone)
            self.assertCounted()
        self.assertEqual(5.0, self.provisioned())

    def test_one_call_per_store_when_nothing_changed(self):
        for _ in range(3):
            self.volume()
        self.pool_stats()
        self.assertEqual(['bdev_lvol_get_lvstores'],
                         self.calls_of(self.pool_stats))

    def test_a_change_reads_the_one_lvol(self):
        self.pool_stats()
        self.volume(size=2)
        self.assertEqual(['bdev_get_bdevs', 'bdev_lvol_get_lvstores'],
                         self.calls_of(self.pool_stats))
        named = [params for method, params in self.fake.calls[-2:]
                 if method == 'bdev_get_bdevs']
        self.assertEqual([True], ['name' in p for p in named])
        self.assertEqual(2.0, self.provisioned())

    def test_another_process_is_seen_at_the_next_full_count(self):
        self.pool_stats()
        # Another process: not through the driver's (observed) client.
        self.fake._dispatch('bdev_lvol_create', {
            'lvol_name': 'foreign', 'size_in_mib': 4096,
            'lvs_name': dbase.LVS, 'thin_provision': True})
        rounds = [self.provisioned() for _ in range(tally.RESYNC_EVERY)]
        self.assertEqual(0.0, rounds[0])
        self.assertEqual(4.0, rounds[-1])
        self.assertCounted()

    def test_a_restarted_driver_counts_everything(self):
        self.volume(size=3)
        self.driver = self.make_driver()
        self.assertEqual(3.0, self.provisioned())

    def test_an_unknown_lvol_call_forces_a_full_count(self):
        self.pool_stats()
        self.driver.pools.tally.note('bdev_lvol_grow_lvstore', {}, True)
        self.assertIn('bdev_get_bdevs', self.calls_of(self.pool_stats))
        self.assertEqual({}, self.fake.calls[-2][1])

    def test_too_many_changes_make_one_full_count(self):
        self.pool_stats()
        for n in range(tally.FULL_AT + 1):
            self.driver.pools.tally.note('bdev_lvol_delete',
                                         {'name': 'lvs/x%d' % n}, True)
        self.volume()
        self.assertEqual(['bdev_get_bdevs', 'bdev_lvol_get_lvstores'],
                         self.calls_of(self.pool_stats))
        self.assertCounted()

    def test_renamed_lvol_keeps_its_bytes_once(self):
        volume = self.volume(size=2)
        self.pool_stats()
        self.fake.bdev_lvol_rename(self.alias(volume), 'renamed')
        self.assertCounted()
        self.assertEqual(2.0, self.provisioned())

    def test_each_changed_lvol_is_read_once(self):
        volume = self.volume()
        snap = self.snapshot(volume)
        self.pool_stats()
        # The snapshot's clone list names the volume, deleted too.
        self.driver.delete_volume(volume)
        self.driver.delete_snapshot(snap)
        self.assertEqual(['bdev_get_bdevs'] * 2 + ['bdev_lvol_get_lvstores'],
                         self.calls_of(self.pool_stats))
        self.assertCounted()

    def test_a_failed_operation_and_its_undo(self):
        snap = self.snapshot(self.volume())
        self.pool_stats()
        self.fake.fail('bdev_lvol_resize', rpc_exc.NoSpace)
        self.assertRaises(exception.VolumeBackendAPIException,
                          self.driver.create_volume_from_snapshot,
                          self.make_volume(size=2), snap)
        self.assertCounted()
        self.assertEqual(1.0, self.provisioned())
