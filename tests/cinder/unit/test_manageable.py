"""Manage and unmanage of snapshots, and the manageable lists."""

from cinder import exception
from cinder import objects

from cinder_spdk_vhost import image_cache
from cinder_spdk_vhost import lvols
from tests.cinder.unit import driver_base as dbase

LVS = dbase.LVS


def _by_ref(entries):
    return {e['reference']['source-name']: e for e in entries}


class ManageSnapshotTest(dbase.DriverTestCase):

    def setUp(self):
        super().setUp()
        self.volume_ = self.volume()
        # A snapshot taken outside Cinder, and a later one of ours.
        self.fake.bdev_lvol_snapshot(self.alias(self.volume_), 'legacy-snap')
        self.later = self.snapshot(self.volume_)

    def manage(self, ref):
        snap = self.make_snapshot(self.volume_)
        update = self.driver.manage_existing_snapshot(snap, ref)
        snap.update(update)
        snap.save()
        return snap

    def test_manage_records_the_lvol_uuid(self):
        snap = self.make_snapshot(self.volume_)
        for ref in ({'source-name': 'lvs0/legacy-snap'},
                    {'source-name': 'legacy-snap'}):
            self.assertEqual(1, self.driver.manage_existing_snapshot_get_size(
                snap, ref))
        snap = self.manage({'source-name': 'lvs0/legacy-snap'})
        # SPDK cannot rename a snapshot: found by its UUID from now on.
        self.assertEqual(self.fake.lvol('lvs0/legacy-snap')['uuid'],
                         snap.provider_id)
        # Cinder's operations on it work: a volume from it, deletion.
        clone = self.make_volume()
        self.driver.create_volume_from_snapshot(clone, snap)
        self.assertEqual('lvs0/legacy-snap', self.fake.state()['lvols'][
            self.alias(clone)]['parent'])
        self.driver.delete_volume(clone)
        self.driver.delete_snapshot(snap)
        self.assertEqual(sorted([self.volume_.name, self.later.name]),
                         self.names())

    def test_refuses_what_the_volume_does_not_read(self):
        other = self.volume()
        self.fake.bdev_lvol_snapshot(self.alias(other), 'foreign')
        clone = self.make_volume()
        self.driver.create_cloned_volume(clone, other)
        hidden = lvols.hidden_snapshot_name(clone.id)
        snap = self.make_snapshot(self.volume_)
        before = self.names()
        for name in ('foreign', hidden, 'nope', other.name):
            self.assertRaises(exception.ManageExistingInvalidReference,
                              self.driver.manage_existing_snapshot, snap,
                              {'source-name': '%s/%s' % (LVS, name)})
        self.assertEqual(before, self.names())

    def test_refuses_a_deleted_snapshot(self):
        for clone in (self.make_volume(), self.make_volume()):
            self.driver.create_volume_from_snapshot(clone, self.later)
        self.driver.delete_snapshot(self.later)
        self.assertRaises(exception.ManageExistingInvalidReference,
                          self.manage, {'source-name': self.later.name})

    def test_unmanage_keeps_the_lvol(self):
        before = self.fake.state()
        self.driver.unmanage_snapshot(self.later)
        self.assertEqual(before, self.fake.state())
        # And it can be managed again.
        snap = self.manage({'source-name': self.later.name})
        self.assertEqual(self.fake.lvol(self.alias(self.later))['uuid'],
                         snap.provider_id)


class ManageableListTest(dbase.DriverTestCase):

    def listing(self, what, managed=(), **kwargs):
        args = dict(marker=None, limit=1000, offset=0,
                    sort_keys=['reference'], sort_dirs=['asc'])
        args.update(kwargs)
        entries = getattr(self.driver, 'get_manageable_' + what)(
            list(managed), **args)
        # What cinder-volume does with them: they must fit its objects.
        cls = (objects.ManageableVolumeList if what == 'volumes'
               else objects.ManageableSnapshotList)
        cls.from_primitives(self.ctxt, entries)
        return entries

    def test_volumes(self):
        managed = self.volume()
        self.fake.bdev_lvol_create('legacy', 1500, lvs_name=LVS,
                                   thin_provision=True)
        self.fake.bdev_lvol_create('exported', 10, lvs_name=LVS)
        self.fake.add_controller('vhost.0', LVS + '/exported')
        self.fake.bdev_lvol_create(lvols.temp_name('import', 'x'), 10,
                                   lvs_name=LVS)
        self.fake.bdev_lvol_create(image_cache.BASE_PREFIX + 'img', 10,
                                   lvs_name=LVS)
        got = _by_ref(self.listing('volumes', [managed]))
        self.assertEqual(
            {'reference': {'source-name': LVS + '/legacy'}, 'size': 2,
             'safe_to_manage': True, 'reason_not_safe': None,
             'cinder_id': None, 'extra_info': None},
            got[LVS + '/legacy'])
        reasons = {ref: (e['safe_to_manage'], e['reason_not_safe'],
                         e['cinder_id']) for ref, e in got.items()}
        self.assertEqual(
            (False, 'already managed', managed.id),
            reasons[self.alias(managed)])
        self.assertEqual((False, 'in use: a bdev that claims it (a local '
                                 'attachment\'s layer)', None),
                         reasons[LVS + '/exported'])
        self.assertEqual((False, 'scratch lvol of an image transfer', None),
                         reasons[LVS + '/tmp-import-x'])
        self.assertEqual((False, 'image cache base', None),
                         reasons[LVS + '/imgbase-img'])

    def test_volumes_paginated(self):
        for name in ('a', 'b', 'c'):
            self.fake.bdev_lvol_create(name, 4, lvs_name=LVS)
        page = self.listing('volumes', limit=2, offset=1,
                            sort_dirs=['desc'])
        self.assertEqual([LVS + '/b', LVS + '/a'],
                         [e['reference']['source-name'] for e in page])

    def test_snapshots(self):
        volume = self.volume()
        mine = self.snapshot(volume)
        self.fake.bdev_lvol_snapshot(self.alias(volume), 'legacy-snap')
        gone = self.snapshot(volume)
        clones = [self.make_volume(), self.make_volume()]
        for clone in clones:
            self.driver.create_volume_from_snapshot(clone, gone)
        self.driver.delete_snapshot(gone)
        got = _by_ref(self.listing('snapshots', [mine]))
        # Any volume below it reads it (here through the hidden one).
        self.assertIn(
            got[LVS + '/legacy-snap']['source_reference']['source-name'],
            [self.alias(v) for v in [volume] + clones])
        self.assertEqual(
            (True, None, None),
            tuple(got[LVS + '/legacy-snap'][k] for k in (
                'safe_to_manage', 'reason_not_safe', 'cinder_id')))
        self.assertEqual((False, 'already managed', mine.id), tuple(
            got[self.alias(mine)][k] for k in (
                'safe_to_manage', 'reason_not_safe', 'cinder_id')))
        retired = got[self.alias(gone)]
        self.assertEqual(
            (False, 'deleted snapshot, kept for its clones', None),
            (retired['safe_to_manage'], retired['reason_not_safe'],
             retired['cinder_id']))
        # Only snapshot lvols are listed; the marker is a volume lvol.
        self.assertEqual(3, len(got))
        marker = lvols.retired_marker_name(
            self.fake.lvol(self.alias(gone))['uuid'])
        self.assertEqual(
            'marks a deleted snapshot kept for its clones',
            _by_ref(self.listing('volumes'))[
                '%s/%s' % (LVS, marker)]['reason_not_safe'])
