"""The pools' provisioned tally against a full count, on a real target.

What SPDK does to a snapshot's clusters (the snapshot takes them from
its origin; a deleted snapshot's go to its one clone) is SPDK's, not
the fake's: the tally must follow it with reads by name only.
"""

import fixtures

from cinder_spdk_vhost import stats
from cinder_spdk_vhost import tally
from tests.cinder import base
from tests.cinder.functional import imaging
from tests.cinder.functional import test_driver
from tests.cinder.functional import test_snapshot_delete as snapshots

GIB = 1024 * test_driver.MIB
TARGET_ID = 'storage-target'


class TallyTest(test_driver.DriverTestCase):

    write = snapshots.SnapshotDeleteTest.write

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def counts(self):
        """(tally, full count): provisioned bytes after a stats call."""
        self.driver.pools.stats(TARGET_ID)
        store = self.rpc('bdev_lvol_get_lvstores', {'lvs_name': base.LVS})[0]
        return (self.driver.pools.tally.provisioned(store),
                stats.provisioned(store, self.rpc('bdev_get_bdevs')))

    def assertCounted(self, expected=None):
        held, counted = self.counts()
        self.assertEqual(counted, held)
        if expected is not None:
            self.assertEqual(expected, held)

    def clusters(self, obj):
        return self.lvol_info(self.alias(obj))['num_allocated_clusters']

    def test_snapshots_clones_and_a_chain(self):
        self.assertCounted(0)
        volume = self.created(size=4)
        # Twice what the clone writes below: the clusters the clone
        # does not hold move to its snapshot when the first one goes.
        self.write(volume, imaging.pattern('old', 2 * snapshots.LENGTH))
        snapshot = self.make_snapshot(volume)
        self.driver.create_snapshot(snapshot)
        self.assertGreater(self.clusters(snapshot), 0)
        clones = [self.make_volume(size=4), self.make_volume(size=4)]
        for clone in clones:
            self.driver.create_volume_from_snapshot(clone, snapshot)
        self.assertCounted()
        # A snapshot of a clone takes the clone's own clusters, and it,
        # not the clone, is now the first snapshot's child.
        self.write(clones[0], imaging.pattern('mine', snapshots.LENGTH))
        second = self.make_snapshot(clones[0])
        self.driver.create_snapshot(second)
        own = self.clusters(second)
        self.assertCounted()
        self.driver.delete_snapshot(snapshot)
        self.assertCounted()
        # The first snapshot goes with its second-last dependent; SPDK
        # moves its clusters into its one child, the second snapshot.
        self.driver.delete_volume(volume)
        self.driver.delete_volume(clones[1])
        self.assertNotIn(snapshot.name, self.lvol_names())
        self.assertGreater(self.clusters(second), own)
        self.assertCounted()
        self.driver.delete_snapshot(second)
        self.driver.delete_volume(clones[0])
        self.assertCounted(0)

    def test_another_process_and_a_restart(self):
        self.assertCounted(0)
        # Not through the driver's client: seen at the next full count.
        self.rpc('bdev_lvol_create', {'lvol_name': 'foreign',
                                      'size_in_mib': 2048,
                                      'lvs_name': base.LVS,
                                      'thin_provision': True})
        seen = [self.counts()[0] for _ in range(tally.RESYNC_EVERY)]
        self.assertEqual(0, seen[0])
        self.assertEqual(2 * GIB, seen[-1])
        self.created(size=3)
        self.driver = self.make_driver()
        self.assertCounted(5 * GIB)
