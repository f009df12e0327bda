"""Snapshots through the real Cinder API: deletion with clones, manage.

A snapshot that volumes were made from is deleted at once: its lvol
stays on the target, marked deleted (SPDK cannot rename a snapshot), and
goes with its second-last dependent, while every clone keeps reading the
snapshot's data (checked byte for byte
over NVMe/TCP with spdk_dd). Snapshots and volumes are unmanaged,
listed by ``manageable-list`` and managed back. The base class checks
that nothing is left on the target.
"""

import os

from cinderclient import exceptions as cinder_exc
import fixtures

from cinder_spdk_vhost import lvols
from testbed import spdk_dd
from tests.deployment import base
from tests.deployment import test_lifecycle

LENGTH = 1024 * 1024
lvol_name = test_lifecycle.lvol_name


def snap_name(snapshot):
    return 'snapshot-%s' % snapshot.id


class TestSnapshots(base.DeploymentTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def _dd(self, volume, data=None):
        """Write ``data`` to ``volume``'s lvol, or read it back."""
        bdev = '%s/%s' % (base.LVS, lvol_name(volume))
        dd = spdk_dd.NvmfDd(self.deployment.target, self.tmp)
        try:
            if data is None:
                return dd.read(bdev, 0, LENGTH)
            dd.write(bdev, 0, data)
        finally:
            dd.unexport(bdev)

    def _markers(self):
        return sorted(n for n in self.lvols() if lvols.is_marker(n))

    def _family(self, clones=2):
        """A volume with data, its snapshot, volumes made from it."""
        vol = self.create_volume(1)
        data = os.urandom(LENGTH)
        self._dd(vol, data)
        snap = self.create_snapshot(vol.id)
        made = [self.create_volume(1, snapshot_id=snap.id)
                for _i in range(clones)]
        # The source moves on; the clones must keep the snapshot's data.
        self._dd(vol, os.urandom(LENGTH))
        return vol, snap, made, data

    def test_snapshot_with_two_clones_deleted_at_once(self):
        vol, snap, made, data = self._family()
        uuid = self.lvol(snap_name(snap))['name']
        self.delete_snapshot(snap.id)
        self.assertEqual([lvols.retired_marker_name(uuid)], self._markers())
        for clone in made:
            self.assertEqual(snap_name(snap), self.lvol(lvol_name(clone))[
                'driver_specific']['lvol']['base_snapshot'])
            self.assertEqual(data, self._dd(clone))
        # Not offered for manage: Cinder deleted it.
        listed = {s.reference['source-name']: s for s in
                  self.admin_client().volume_snapshots.list_manageable(
                      self.deployment.host)}
        entry = listed['%s/%s' % (base.LVS, snap_name(snap))]
        self.assertEqual((False, 'deleted snapshot, kept for its clones'),
                         (entry.safe_to_manage, entry.reason_not_safe))
        # The volumes go in any order; the second-last takes the snapshot.
        self.delete_volume(vol.id)
        self.delete_volume(made[0].id)
        self.assertEqual([lvol_name(made[1])], sorted(self.lvols()))
        self.assertEqual(data, self._dd(made[1]))

    def test_cascade_delete_of_a_volume_whose_snapshot_has_a_clone(self):
        vol, snap, made, data = self._family(clones=1)
        self.delete_volume(vol.id, cascade=True)
        self.assertRaises(cinder_exc.NotFound,
                          self.cinder.volume_snapshots.get, snap.id)
        # The snapshot had two dependents (the volume and the clone):
        # deleting the volume after it left one, which took it over.
        self.assertEqual([lvol_name(made[0])], sorted(self.lvols()))
        self.assertEqual(data, self._dd(made[0]))

    def test_unmanage_list_and_manage_snapshot_and_volume(self):
        admin = self.admin_client()
        vol = self.create_volume(1)
        snap = self.create_snapshot(vol.id)
        admin.volume_snapshots.unmanage(snap)
        self.wait_gone(self.cinder.volume_snapshots, snap.id)
        # Kept as it is: SPDK cannot rename a snapshot.
        kept = '%s/%s' % (base.LVS, snap_name(snap))
        self.assertIn(snap_name(snap), self.lvols())

        listed = {s.reference['source-name']: s for s in
                  admin.volume_snapshots.list_manageable(
                      self.deployment.host)}
        entry = listed[kept]
        self.assertEqual((True, None), (entry.safe_to_manage, entry.cinder_id))
        self.assertEqual({'source-name': '%s/%s' % (base.LVS,
                                                    lvol_name(vol))},
                         entry.source_reference)
        managed = admin.volume_snapshots.manage(vol.id, entry.reference)
        self.addCleanup(self._forget, self.cinder.volume_snapshots,
                        managed.id)
        self.wait_status(self.cinder.volume_snapshots, managed.id,
                         'available')
        listed = {s.reference['source-name']: s for s in
                  admin.volume_snapshots.list_manageable(
                      self.deployment.host)}
        self.assertEqual((False, 'already managed', managed.id),
                         (listed[kept].safe_to_manage,
                          listed[kept].reason_not_safe,
                          listed[kept].cinder_id))
        # Cinder uses it: a volume made from the adopted snapshot.
        self.create_volume(1, snapshot_id=managed.id)

        volumes = {v.reference['source-name']: v for v in
                   admin.volumes.list_manageable(self.deployment.host)}
        mine = volumes['%s/%s' % (base.LVS, lvol_name(vol))]
        self.assertEqual((False, 'already managed', vol.id),
                         (mine.safe_to_manage, mine.reason_not_safe,
                          mine.cinder_id))
        self.rpc('bdev_lvol_create', {'lvol_name': 'legacy',
                                      'size_in_mib': 1500,
                                      'lvs_name': base.LVS,
                                      'thin_provision': True})
        legacy = {v.reference['source-name']: v for v in
                  admin.volumes.list_manageable(self.deployment.host)}[
            '%s/legacy' % base.LVS]
        self.assertEqual((True, 2), (legacy.safe_to_manage, legacy.size))
        adopted = admin.volumes.manage(
            '%s#%s' % (self.deployment.host, base.LVS), legacy.reference)
        self.addCleanup(self._forget, self.cinder.volumes, adopted.id)
        adopted = self.wait_status(self.cinder.volumes, adopted.id,
                                   'available')
        self.assertEqual(2, adopted.size)
        self.assertIn(lvol_name(adopted), self.lvols())
