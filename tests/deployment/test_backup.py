"""Backup and restore through the real cinder-backup (posix driver).

cinder-backup attaches the volume (or, for an in-use volume, a temporary
snapshot) with its own os-brick connector: the driver stages the data as
a raw file it opens with os-brick's ``local`` protocol. Data is written
into the lvols and read back over NVMe/TCP with spdk_dd, byte for byte;
a restore onto an existing volume must leave nothing of its old data
where the backup had none. The base class checks that nothing is left
on the target; these tests check the staging directory too.
"""

import os


from tests.deployment import base
from tests.deployment import test_connection
from tests.deployment import test_lifecycle

LENGTH = 1024 * 1024
# A second region, far from the first: another cluster of the lvol.
FAR = 300 * LENGTH
ZEROS = bytes(LENGTH)
BACKUP_TIMEOUT = 300
lvol_name = test_lifecycle.lvol_name


class Backups(object):
    """Backup and restore through the API, for a DeploymentTestCase.

    Nothing may be left in the staging directory afterwards.
    """

    def setUp(self):
        super().setUp()
        self.addCleanup(self._assert_staging_empty)

    def _assert_staging_empty(self):
        staging = os.path.join(self.deployment.workdir, 'staging')
        left = os.listdir(staging) if os.path.isdir(staging) else []
        # The staged files, and a replicated copy's scratch ones.
        self.assertEqual([], [n for n in left
                              if n.startswith(('backup-', 'raw-'))])

    def backup(self, volume, **kwargs):
        made = self.cinder.backups.create(volume.id, **kwargs)
        self.addCleanup(self._forget, self.cinder.backups, made.id)
        return self.wait_status(self.cinder.backups, made.id, 'available',
                                timeout=BACKUP_TIMEOUT)

    def restore(self, backup, volume=None):
        """Restore to ``volume``, else to a new volume; that volume."""
        done = self.cinder.restores.restore(
            backup.id, volume.id if volume else None)
        if volume is None:
            self.addCleanup(self._forget, self.cinder.volumes,
                            done.volume_id)
        self.wait_status(self.cinder.backups, backup.id, 'available',
                         timeout=BACKUP_TIMEOUT)
        return self.wait_status(self.cinder.volumes, done.volume_id,
                                'available', timeout=BACKUP_TIMEOUT)

    def _delete_backups(self, *backups):
        """Newest first: Cinder keeps a backup with incrementals."""
        for made in backups:
            self.cinder.backups.delete(made.id)
            self.wait_gone(self.cinder.backups, made.id,
                           timeout=BACKUP_TIMEOUT)


class TestBackup(Backups, base.DeploymentTestCase):

    def _dd(self, volume, offset, data=None):
        """Write ``data`` at ``offset`` of the volume, or read LENGTH."""
        return self.dd('%s/%s' % (base.LVS, lvol_name(volume)), offset,
                       LENGTH, data)

    def assertContent(self, expected, volume):
        """``expected``: offset -> bytes, read back from the volume."""
        self.assertEqual(expected, {offset: self._dd(volume, offset)
                                    for offset in expected})

    def test_available_volume_full_incremental_and_restores(self):
        vol = self.create_volume(1)
        first, second = os.urandom(LENGTH), os.urandom(LENGTH)
        self._dd(vol, 0, first)
        full = self.backup(vol)
        self.assertFalse(full.is_incremental)
        self._dd(vol, FAR, second)
        incr = self.backup(vol, incremental=True)
        self.assertTrue(incr.is_incremental)
        self.assertEqual('available',
                         self.cinder.volumes.get(vol.id).status)

        restored = self.restore(incr)
        self.assertContent({0: first, FAR: second}, restored)
        # Onto an existing volume holding data where the full backup
        # has none: that data must not survive.
        again = self.restore(full, restored)
        self.assertEqual(restored.id, again.id)
        self.assertContent({0: first, FAR: ZEROS}, again)
        # cinder-backup wrote the whole volume, zeros too: still thin.
        self.assertEqual(1, self.lvol(lvol_name(again))['driver_specific'][
            'lvol']['num_allocated_clusters'])
        self.assertContent({0: first, FAR: second}, vol)
        self._delete_backups(incr, full)

    def test_in_use_volume_backed_up_from_temporary_snapshot(self):
        vol = self.create_volume(1)
        first, second = os.urandom(LENGTH), os.urandom(LENGTH)
        self._dd(vol, 0, first)
        # No instance: attached as a hyperconverged compute host would.
        attachment = self.cinder.attachments.create(
            vol.id, test_connection.nova_connector(
                target_id=self.deployment.target_id))
        self.addCleanup(self.wait_status, self.cinder.volumes, vol.id,
                        'available')
        self.addCleanup(self.cinder.attachments.delete, attachment['id'])
        self.cinder.attachments.complete(attachment['id'])
        self.wait_status(self.cinder.volumes, vol.id, 'in-use')

        full = self.backup(vol, force=True)
        self._dd(vol, FAR, second)
        incr = self.backup(vol, force=True, incremental=True)
        self.assertEqual('in-use', self.cinder.volumes.get(vol.id).status)
        # The temporary snapshots go, from Cinder and the target. Cinder
        # deletes each by a cast, which may run after its backup is done.
        for snapshot in self.cinder.volume_snapshots.list():
            self.wait_gone(self.cinder.volume_snapshots, snapshot.id)
        self.assertEqual([], self.cinder.volume_snapshots.list())
        self.assertEqual([lvol_name(vol)], sorted(self.lvols()))

        self.assertContent({0: first, FAR: ZEROS}, self.restore(full))
        self.assertContent({0: first, FAR: second}, self.restore(incr))
        self._delete_backups(incr, full)

    def test_backup_of_a_volume_made_from_a_snapshot(self):
        """The staged file holds the parent's data too, not only new."""
        src = self.create_volume(1)
        first, second = os.urandom(LENGTH), os.urandom(LENGTH)
        self._dd(src, 0, first)
        snap = self.create_snapshot(src.id)
        vol = self.create_volume(1, snapshot_id=snap.id)
        self._dd(vol, FAR, second)
        full = self.backup(vol)
        self.assertContent({0: first, FAR: second}, self.restore(full))
        self._delete_backups(full)
