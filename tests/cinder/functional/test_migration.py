"""Moving volumes between two lvol stores of a real target.

The data is read back byte for byte after the move, the new lvol holds
the clusters the volume had allocated and no more (it stayed thin), and
the old store gets every cluster of the volume back.
"""

from cinder import exception
import fixtures

from cinder_spdk_vhost import lvols
from testbed import spdk_dd
from tests.cinder import base
from tests.cinder.functional import imaging
from tests.cinder.functional import test_driver

MIB = 1024 * 1024
LVS1 = 'lvs1'
DEST = {'host': base.HOST + '#' + LVS1}
# Regions written: at the start and far into the volume.
FAR = 700 * MIB
LENGTH = 2 * MIB


class MigrationTestCase(test_driver.DriverTestCase):
    """A driver on two lvol stores, and data access to lvols."""

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.target.aio_lvstore(LVS1, size_mib=1024)
        self.driver = self.make_driver(spdk_lvstores=[base.LVS, LVS1])
        self.dd = spdk_dd.NvmfDd(self.target, self.tmp)

    def write(self, alias, offset, data):
        try:
            self.dd.write(alias, offset, data)
        finally:
            self.dd.unexport(alias)

    def read(self, alias, offset=0, length=LENGTH):
        try:
            return self.dd.read(alias, offset, length)
        finally:
            self.dd.unexport(alias)

    def contents(self, alias):
        return [self.read(alias, 0), self.read(alias, FAR)]

    def allocated(self, alias):
        return self.lvol_info(alias)['num_allocated_clusters']

    def free(self, lvs):
        return self.rpc('bdev_lvol_get_lvstores',
                        {'lvs_name': lvs})[0]['free_clusters']

    def names(self, lvs):
        return sorted(item['name'] for item in self.rpc(
            'bdev_lvol_get_lvols', {'lvs_name': lvs}))

    def moved(self, volume):
        return lvols.alias(LVS1, volume.name)


class MigrationTest(MigrationTestCase):

    def test_thin_volume_moves_with_its_data_and_qos(self):
        empty = self.free(base.LVS), self.free(LVS1)
        vtype = self.make_type({'total_iops_sec': '3000'})
        volume = self.created(size=1, vtype=vtype)
        self.write(self.alias(volume), 0, imaging.pattern('start', LENGTH))
        self.write(self.alias(volume), FAR, imaging.pattern('far', LENGTH))
        before = self.contents(self.alias(volume))
        used = self.allocated(self.alias(volume))
        self.assertEqual(4, used)
        self.assertEqual((True, None), self.driver.migrate_volume(
            self.ctxt, volume, DEST))
        self.assertEqual([], self.names(base.LVS))
        self.assertEqual([volume.name], self.names(LVS1))
        alias = self.moved(volume)
        self.assertEqual(before, self.contents(alias))
        self.assertEqual(used, self.allocated(alias))
        self.assertEqual(1024, self.size_mib(alias))
        self.assertTrue(self.lvol_info(alias)['thin_provision'])
        self.assertEqual(3000, self.limits(alias)['rw_ios_per_sec'])
        self.assertEqual((empty[0], empty[1] - used),
                         (self.free(base.LVS), self.free(LVS1)))
        self.assertEqual([], self.subsystems())
        volume.host = DEST['host']
        self.driver.delete_volume(volume)
        self.assertEqual(empty, (self.free(base.LVS), self.free(LVS1)))

    def test_volume_from_a_snapshot_takes_the_data_it_reads(self):
        """Its parent's clusters are copied too; the parent stays."""
        origin = self.created(size=1)
        self.write(self.alias(origin), 0, imaging.pattern('old', 2 * LENGTH))
        self.write(self.alias(origin), FAR, imaging.pattern('far', LENGTH))
        snapshot = self.make_snapshot(origin)
        self.driver.create_snapshot(snapshot)
        volume = self.make_volume(size=1)
        self.driver.create_volume_from_snapshot(volume, snapshot)
        # Over one of the parent's clusters, and one it never wrote.
        self.write(self.alias(volume), LENGTH, imaging.pattern('new', LENGTH))
        self.write(self.alias(volume), 500 * MIB,
                   imaging.pattern('own', LENGTH))
        before = self.contents(self.alias(volume)) + [
            self.read(self.alias(volume), LENGTH),
            self.read(self.alias(volume), 500 * MIB)]
        origin_data = self.contents(self.alias(origin))
        self.driver.migrate_volume(self.ctxt, volume, DEST)
        alias = self.moved(volume)
        self.assertEqual(before, self.contents(alias) + [
            self.read(alias, LENGTH), self.read(alias, 500 * MIB)])
        self.assertIsNone(self.lvol_info(alias).get('base_snapshot'))
        # The union: 4 + 2 clusters of the snapshot, 2 of its own not
        # over them.
        self.assertEqual(8, self.allocated(alias))
        self.assertEqual(origin_data, self.contents(self.alias(origin)))
        self.assertEqual(sorted([origin.name, snapshot.name]),
                         self.names(base.LVS))
        volume.host = DEST['host']
        self.driver.delete_volume(volume)
        self.driver.delete_snapshot(snapshot)
        self.driver.delete_volume(origin)
        self.assertEqual(([], []), (self.names(base.LVS), self.names(LVS1)))

    def test_retype_to_the_other_pool_moves_the_volume(self):
        volume = self.created(size=1, vtype=self.make_type(
            {'total_iops_sec': '1000'}))
        self.write(self.alias(volume), 0, imaging.pattern('retype', LENGTH))
        new = self.make_type({'total_iops_sec': '5000'})
        self.assertEqual((True, None), self.driver.retype(
            self.ctxt, volume, new, {}, DEST))
        alias = self.moved(volume)
        self.assertEqual(imaging.pattern('retype', LENGTH), self.read(alias))
        self.assertEqual(5000, self.limits(alias)['rw_ios_per_sec'])
        self.assertEqual([], self.names(base.LVS))

    def test_failed_copy_leaves_the_volume_and_no_scratch(self):
        """The destination store runs out of clusters in the middle."""
        volume = self.created(size=1)
        self.write(self.alias(volume), 0, imaging.pattern('keep', 4 * MIB))
        self.rpc('bdev_lvol_create', {
            'lvol_name': 'filler', 'size_in_mib': self.free(LVS1) - 2,
            'lvs_name': LVS1, 'thin_provision': False})
        self.assertRaises(exception.VolumeBackendAPIException,
                          self.driver.migrate_volume, self.ctxt, volume, DEST)
        self.assertEqual([volume.name], self.names(base.LVS))
        self.assertEqual(['filler'], self.names(LVS1))
        self.assertIsNone(
            self.lvol_info(self.alias(volume)).get('base_snapshot'))
        self.assertEqual(4, self.allocated(self.alias(volume)))
        self.assertEqual(imaging.pattern('keep', 4 * MIB),
                         self.read(self.alias(volume), 0, 4 * MIB))


class InterruptedMigrationTest(MigrationTestCase):
    """The target restarts once the copy is made, before it is adopted."""

    def interrupted(self):
        volume = self.created(size=1)
        self.write(self.alias(volume), 0, imaging.pattern('crash', LENGTH))
        real = self.driver.client.call

        def call(client, name, params=None):
            if name == 'bdev_lvol_rename':
                self.target.stop()
            return real(name, params)
        with fixtures.MonkeyPatch(
                'spdk_vhost_core.spdk_rpc.SpdkClient.call', call):
            self.assertRaises(exception.VolumeBackendAPIException,
                              self.driver.migrate_volume, self.ctxt, volume,
                              DEST)
        self.target.start()
        for lvs in (base.LVS, LVS1):
            self.rpc('bdev_aio_create', {
                'name': '%s_base' % lvs, 'block_size': 4096,
                'filename': '%s/%s.img' % (self.target.workdir, lvs)})
        # The restart took the NVMe/TCP transport spdk_dd reads through.
        self.dd = spdk_dd.NvmfDd(self.target, self.tmp)
        self.assertEqual(['tmp-migrate-dst-' + volume.id], self.names(LVS1))
        return volume

    def test_retry_completes_the_move(self):
        volume = self.interrupted()
        self.assertEqual((True, None), self.driver.migrate_volume(
            self.ctxt, volume, DEST))
        self.assertEqual(([], [volume.name]),
                         (self.names(base.LVS), self.names(LVS1)))
        self.assertEqual(imaging.pattern('crash', LENGTH),
                         self.read(self.moved(volume)))
        self.assertEqual(2, self.allocated(self.moved(volume)))

    def test_start_sweeps_the_copy_and_keeps_the_volume(self):
        volume = self.interrupted()
        self.make_driver(spdk_lvstores=[base.LVS, LVS1])
        self.assertEqual(([volume.name], []),
                         (self.names(base.LVS), self.names(LVS1)))
        self.assertIsNone(
            self.lvol_info(self.alias(volume)).get('base_snapshot'))
        self.assertEqual(imaging.pattern('crash', LENGTH),
                         self.read(self.alias(volume)))
        self.assertEqual(2, self.allocated(self.alias(volume)))
