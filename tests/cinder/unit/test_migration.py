"""migrate_volume and retype between the lvol stores of one target.

What the driver asks of FakeSpdk; tests/cinder/functional/test_migration.py
checks on a real target that the data arrives and stays thin.
"""

import uuid

from cinder import exception
from cinder import objects
import fixtures

from cinder_spdk_vhost import migration
from spdk_vhost_core import exception as rpc_exc
from tests.cinder import base
from tests.cinder.unit import driver_base as dbase

LVS, LVS1 = dbase.LVS, 'lvs1'
DEST = {'host': base.HOST + '#' + LVS1,
        'capabilities': {'location_info': 'spdk_vhost:%s:%s'
                         % (dbase.TARGET_ID, LVS1)}}
IOPS = {'total_iops_sec': '2000'}


class MigrationTestCase(dbase.DriverTestCase):

    lvstores = (LVS, LVS1)

    def copies(self):
        """(source, destination) of each shallow copy, in order."""
        return [(p['src_lvol_name'], p['dst_bdev_name'])
                for m, p in self.fake.calls
                if m == 'bdev_lvol_start_shallow_copy']

    def in_pool(self, lvs):
        return sorted(lvol['name'] for lvol in self.fake.lvols.values()
                      if lvol['lvs'] == lvs)


class MigrateVolumeTest(MigrationTestCase):

    def test_moves_with_name_qos_and_no_parent(self):
        volume = self.volume(size=2, vtype=self.make_type(IOPS))
        self.fake.lvol(self.alias(volume))['allocated'] = 3
        self.assertEqual((True, None), self.driver.migrate_volume(
            self.ctxt, volume, DEST))
        self.assertEqual([], self.in_pool(LVS))
        self.assertEqual([volume.name], self.in_pool(LVS1))
        moved = self.fake.lvol(self.alias(volume, LVS1))
        self.assertEqual((2048 * dbase.MIB, True, None, 2000),
                         (moved['size'], moved['thin'], moved['parent'],
                          moved['qos']['rw_ios_per_sec']))
        self.assertEqual(
            [('%s/%s' % (LVS, migration.snapshot_name(volume.id)),
              '%s/%s' % (LVS1, migration.copy_name(volume.id)))],
            self.copies())

    def test_volume_from_snapshot_copies_its_parents_oldest_first(self):
        origin = self.volume()
        first = self.snapshot(origin)
        middle = self.make_volume()
        self.driver.create_volume_from_snapshot(middle, first)
        second = self.snapshot(middle)
        volume = self.make_volume()
        self.driver.create_volume_from_snapshot(volume, second)
        self.driver.migrate_volume(self.ctxt, volume, DEST)
        self.assertEqual(
            [self.alias(first), self.alias(second),
             '%s/%s' % (LVS, migration.snapshot_name(volume.id))],
            [src for src, _dst in self.copies()])
        self.assertIsNone(self.fake.lvol(self.alias(volume, LVS1))['parent'])
        # The snapshots stay for their own volumes.
        self.assertEqual(sorted([origin.name, first.name, middle.name,
                                 second.name]), self.in_pool(LVS))

    def test_hidden_snapshot_of_a_moved_clone_folds_away(self):
        src = self.volume()
        clone = self.make_volume()
        self.driver.create_cloned_volume(clone, src)
        self.driver.migrate_volume(self.ctxt, clone, DEST)
        self.assertEqual([src.name], self.in_pool(LVS))
        self.assertEqual([clone.name], self.in_pool(LVS1))

    def test_deleted_snapshot_goes_when_its_second_last_clone_moves(self):
        volume, snap, clones = self.snapshot_with_clones()
        self.driver.delete_volume(clones[1])
        # Still read by its volume and one clone: kept, marked.
        self.driver.delete_snapshot(snap)
        self.assertIn(snap.name, self.in_pool(LVS))
        self.driver.migrate_volume(self.ctxt, clones[0], DEST)
        # Folded into its volume, the last lvol reading it; the marker
        # went with it.
        self.assertEqual([volume.name], self.in_pool(LVS))
        self.assertEqual([clones[0].name], self.in_pool(LVS1))

    def test_thick_backend_inflates_the_copy(self):
        self.driver = self.make_driver(spdk_thin_provision=False)
        volume = self.volume()
        self.driver.migrate_volume(self.ctxt, volume, DEST)
        self.assertFalse(self.fake.lvol(self.alias(volume, LVS1))['thin'])

    def test_retry_after_the_move_is_success_without_copy(self):
        volume = self.volume()
        self.driver.migrate_volume(self.ctxt, volume, DEST)
        del self.fake.calls[:]
        # The manager did not record the new host: the same call again.
        self.assertEqual((True, None), self.driver.migrate_volume(
            self.ctxt, volume, DEST))
        self.assertEqual([], self.copies())

    def test_leftovers_of_an_interrupted_move_are_replaced(self):
        volume = self.volume()
        for name, lvs in ((volume.name, LVS1),
                          (migration.copy_name(volume.id), LVS1)):
            self.fake.bdev_lvol_create(name, 4, lvs_name=lvs)
        self.fake.bdev_lvol_snapshot(self.alias(volume),
                                     migration.snapshot_name(volume.id))
        self.driver.migrate_volume(self.ctxt, volume, DEST)
        self.assertEqual([], self.in_pool(LVS))
        self.assertEqual([volume.name], self.in_pool(LVS1))
        self.assertEqual(1024 * dbase.MIB,
                         self.fake.lvol(self.alias(volume, LVS1))['size'])

    def test_other_backends_and_pools_are_left_to_cinder(self):
        volume = self.volume()
        before = self.fake.state()
        for host in ({'host': 'other@lvm#pool'},
                     {'host': base.HOST + '#nope'},
                     {'host': base.HOST + '#' + LVS1, 'capabilities': {
                         'location_info': 'spdk_vhost:elsewhere:lvs1'}}):
            self.assertEqual((False, None), self.driver.migrate_volume(
                self.ctxt, volume, host), host)
        self.assertEqual(before, self.fake.state())

    def test_esnap_clone_is_left_to_cinder(self):
        self.fake.aio['ext'] = {'filename': '/nonexistent',
                                'size': 1024 * dbase.MIB,
                                'block_size': 512, 'readonly': True}
        self.fake.call('bdev_lvol_clone_bdev', {
            'bdev': 'ext', 'lvs_name': LVS, 'clone_name': 'legacy'})
        volume = self.make_volume()
        self.driver.manage_existing(volume, {'source-name': 'lvs0/legacy'})
        before = self.fake.state()
        self.assertEqual((False, None), self.driver.migrate_volume(
            self.ctxt, volume, DEST))
        self.assertEqual(before, self.fake.state())

    def test_exported_volume_is_busy(self):
        volume = self.volume()
        self.driver.initialize_connection(volume, dbase.REMOTE)
        before = self.fake.state()
        self.assertRaises(exception.VolumeIsBusy,
                          self.driver.migrate_volume, self.ctxt, volume, DEST)
        self.assertEqual(before, self.fake.state())

    def test_failed_copy_leaves_the_volume_as_it_was(self):
        volume = self.volume()
        before = self.fake.state()
        self.fake.fail('bdev_lvol_check_shallow_copy', rpc_exc.NoSpace)
        self.assertRaises(exception.VolumeBackendAPIException,
                          self.driver.migrate_volume, self.ctxt, volume, DEST)
        self.assertEqual(before, self.fake.state())

    def test_source_deleted_despite_a_lost_answer_is_moved(self):
        volume = self.volume()
        real = self.fake.bdev_lvol_delete

        def delete_then_time_out(name, *args, **kwargs):
            real(name, *args, **kwargs)
            if name == self.alias(volume):
                raise rpc_exc.Timeout('bdev_lvol_delete', {}, None, 'lost')
        self.useFixture(fixtures.MockPatchObject(
            self.fake, 'bdev_lvol_delete', side_effect=delete_then_time_out))
        self.assertEqual((True, None), self.driver.migrate_volume(
            self.ctxt, volume, DEST))
        self.assertEqual([volume.name], self.in_pool(LVS1))
        self.assertEqual([], self.in_pool(LVS))


class RetypeTest(MigrationTestCase):

    def test_retype_to_other_pool_moves_with_new_qos(self):
        volume = self.volume(vtype=self.make_type(IOPS))
        new = self.make_type({'total_iops_sec': '3000'})
        self.assertEqual((True, None), self.driver.retype(
            self.ctxt, volume, new, {}, DEST))
        moved = self.fake.lvol(self.alias(volume, LVS1))
        self.assertEqual(3000, moved['qos']['rw_ios_per_sec'])
        self.assertEqual([], self.in_pool(LVS))

    def test_in_a_cluster_any_member_retypes_in_place(self):
        # The scheduler names the member that last reported; the volume
        # names the one that made it: the cluster decides, and the
        # volume keeps its host.
        volume = self.volume(vtype=self.make_type(IOPS))
        volume.host = 'controller-2@%s#%s' % (base.BACKEND, LVS)
        volume.cluster_name = 'cluster@%s#%s' % (base.BACKEND, LVS)
        here = {'host': 'controller-1@%s#%s' % (base.BACKEND, LVS),
                'cluster_name': volume.cluster_name,
                'capabilities': {'location_info': 'spdk_vhost:%s:%s'
                                 % (dbase.TARGET_ID, LVS)}}
        new = self.make_type({'total_iops_sec': '3000'})
        self.assertEqual((True, {'host': volume.host}), self.driver.retype(
            self.ctxt, volume, new, {}, here))
        self.assertEqual(3000, self.fake.lvol(self.alias(volume))['qos'][
            'rw_ios_per_sec'])
        other = dict(here, cluster_name='others@%s#%s' % (base.BACKEND, LVS))
        self.assertEqual((False, None), self.driver.retype(
            self.ctxt, volume, self.make_type(IOPS), {}, other))

    def test_attached_volume_is_left_to_cinder(self):
        volume = self.volume()
        volume.previous_status = 'in-use'
        before = self.fake.state()
        self.assertEqual((False, None), self.driver.retype(
            self.ctxt, volume, self.make_type(IOPS), {}, DEST))
        self.assertEqual(before, self.fake.state())


class HostCopyTest(MigrationTestCase):
    """Cinder's generic migration is refused before any data moves."""

    def test_from_this_backend(self):
        volume = self.volume()
        err = self.assertRaises(
            exception.VolumeMigrationFailed, self.driver.before_volume_copy,
            self.ctxt, volume, self.make_volume(), remote='dest')
        self.assertIn(migration.HOST_COPY_REFUSED, str(err))

    def test_into_this_backend(self):
        """Its new volume, from any backend, is not even made."""
        volume = self.make_volume(migration_status='target:x')
        err = self.assertRaises(exception.VolumeMigrationFailed,
                                self.driver.create_volume, volume)
        self.assertIn(migration.HOST_COPY_REFUSED, str(err))
        self.assertEqual([], sorted(self.fake.lvols))

    def test_volume_object_without_the_field_is_created(self):
        """Built without a database row, as tools/stress.py does."""
        volume = objects.Volume(context=self.ctxt, id=str(uuid.uuid4()),
                                size=1, host=base.HOST + '#' + LVS,
                                volume_type_id=None, _name_id=None)
        self.driver.create_volume(volume)
        self.assertEqual([volume.name], self.in_pool(LVS))
