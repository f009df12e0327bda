"""Deleting a snapshot that volumes were made from, on a real target.

The snapshot is marked deleted at once (SPDK cannot rename it) and
deleted with its second-last dependent; the clones read its data all
along, across a target restart and a new driver (a cinder-volume
restart), and nothing is left after.
"""

import fixtures

from cinder_spdk_vhost import lvols
from testbed import spdk_dd
from tests.cinder import base
from tests.cinder.functional import imaging
from tests.cinder.functional import test_driver

MIB = 1024 * 1024
LENGTH = 2 * MIB


class SnapshotDeleteTest(test_driver.DriverTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def write(self, volume, data):
        dd = spdk_dd.NvmfDd(self.target, self.tmp)
        try:
            dd.write(self.alias(volume), 0, data)
        finally:
            dd.unexport(self.alias(volume))

    def read(self, volume):
        return spdk_dd.read_once(self.target, self.alias(volume), LENGTH,
                                 self.tmp)

    def free_clusters(self):
        return self.rpc('bdev_lvol_get_lvstores',
                        {'lvs_name': base.LVS})[0]['free_clusters']

    def provisioned(self, driver):
        return driver.get_volume_stats(
            refresh=True)['pools'][0]['provisioned_capacity_gb']

    def test_deleted_at_once_then_with_its_dependents(self):
        empty = self.free_clusters()
        volume = self.created(size=4)
        old = imaging.pattern('old', LENGTH)
        self.write(volume, old)
        snapshot = self.make_snapshot(volume)
        self.driver.create_snapshot(snapshot)
        clones = [self.make_volume(size=4), self.make_volume(size=4)]
        for clone in clones:
            self.driver.create_volume_from_snapshot(clone, snapshot)
        self.write(volume, imaging.pattern('new', LENGTH))
        uuid = self.bdev(self.alias(snapshot))['name']
        marker = lvols.retired_marker_name(uuid)
        free = self.free_clusters()

        self.driver.delete_snapshot(snapshot)
        self.driver.delete_snapshot(snapshot)
        names = sorted([volume.name, snapshot.name, marker] +
                       [c.name for c in clones])
        self.assertEqual(names, self.lvol_names())
        # Marked, not copied: no cluster taken or freed.
        self.assertEqual(free, self.free_clusters())
        for clone in clones:
            self.assertEqual(old, self.read(clone))
        # 3 x 4 GiB volumes and the 2 MiB only the snapshot holds.
        self.assertEqual(12.0, self.provisioned(self.driver))
        self.assertEqual(0, self.lvol_info(
            '%s/%s' % (base.LVS, marker))['num_allocated_clusters'])

        # The name is in the lvol's metadata: a crash and a new driver
        # (cinder-volume restarting sweeps) keep it for its clones.
        self.target.restart(crash=True)
        self.add_base()
        self.driver = self.make_driver()
        self.assertEqual(names, self.lvol_names())
        self.assertEqual(old, self.read(clones[0]))

        self.driver.delete_volume(volume)
        self.assertIn(marker, self.lvol_names())
        self.driver.delete_volume(clones[0])
        # Folded into the last clone, which still reads the data.
        self.assertEqual([clones[1].name], self.lvol_names())
        self.assertEqual(old, self.read(clones[1]))
        self.driver.delete_volume(clones[1])
        self.assertEqual([], self.lvol_names())
        self.assertEqual(empty, self.free_clusters())
        self.assertEqual(0, self.provisioned(self.driver))

    def test_sweep_at_start_after_dependents_went_behind_its_back(self):
        volume = self.created()
        snapshot = self.make_snapshot(volume)
        self.driver.create_snapshot(snapshot)
        clone = self.make_volume()
        self.driver.create_volume_from_snapshot(clone, snapshot)
        self.driver.delete_snapshot(snapshot)
        for gone in (clone, volume):
            self.rpc('bdev_lvol_delete', {'name': self.alias(gone)})
        # SPDK no longer calls a snapshot without clones a snapshot.
        self.assertEqual(2, len(self.lvol_names()))
        self.make_driver()
        self.assertEqual([], self.lvol_names())
