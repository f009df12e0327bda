"""backup.Backups: staged connections for cinder-backup, on FakeSpdk."""

import os

from cinder import exception

from cinder_spdk_vhost import dd
from spdk_vhost_core import exception as rpc_exc
from tests.cinder.unit import driver_base as dbase

MIB = dbase.MIB
GIB = 1024 * MIB
# What os-brick reports on a host without the SPDK vhost connector.
BACKUP_HOST = {'host': 'storage', 'ip': '127.0.0.1', 'multipath': False,
               'platform': 'x86_64', 'os_type': 'linux',
               'nqn': dbase.OTHER_NQN}


class VolumeBackupTest(dbase.ImageTestCase):

    def _volume(self, status, vtype=None):
        volume = self.volume(vtype=vtype)
        volume.status = status
        return volume

    def _path(self, conn):
        self.assertEqual('local', conn['driver_volume_type'])
        return conn['data']['device_path']

    def test_backup_reads_a_staged_copy(self):
        volume = self._volume('backing-up')
        before = self.fake.state()
        path = self._path(self.driver.initialize_connection(volume,
                                                            BACKUP_HOST))
        self.assertEqual(GIB, os.path.getsize(path))
        self.assertEqual(os.path.join(self.staging,
                                      'backup-volume-%s.raw' % volume.id),
                         path)
        calls = [c[0] for c in self.fake.calls]
        self.assertIn('bdev_lvol_start_shallow_copy', calls)
        # Scratch snapshot and aio bdev gone; no NVMe-oF export made.
        self.assertEqual(before, self.fake.state())
        self.driver.terminate_connection(volume, BACKUP_HOST)
        self.assertEqual([], self.staged())
        self.assertEqual(before, self.fake.state())

    def test_failed_copy_leaves_no_file(self):
        volume = self._volume('backing-up')
        before = self.fake.state()
        self.fake.fail('bdev_lvol_start_shallow_copy', rpc_exc.NoSpace)
        self.assertRaises(exception.VolumeBackendAPIException,
                          self.driver.initialize_connection, volume,
                          BACKUP_HOST)
        self.assertEqual([], self.staged())
        self.assertEqual(before, self.fake.state())

    def _restore(self, volume, data, offset=0):
        """As cinder-backup does: open with O_TRUNC, write, detach."""
        path = self._path(self.driver.initialize_connection(volume,
                                                            BACKUP_HOST))
        with open(path, 'wb') as out:
            out.seek(offset)
            out.write(data)
        self.driver.terminate_connection(volume, BACKUP_HOST, force=True)

    def test_restore_replaces_the_lvol(self):
        volume = self._volume('restoring-backup', vtype=self.make_type(
            {'total_iops_sec': '1000'}))
        old_uuid = self.fake.lvol(self.alias(volume))['uuid']
        self._restore(volume, b'\x07' * 4096, offset=3 * MIB)
        lvol = self.fake.lvol(self.alias(volume))
        # A new lvol: nothing of the old data survives; written thin.
        self.assertNotEqual(old_uuid, lvol['uuid'])
        self.assertEqual((GIB, True, 1, 1000),
                         (lvol['size'], lvol['thin'], lvol['allocated'],
                          lvol['qos']['rw_ios_per_sec']))
        self.assertEqual([volume.name], self.names())
        self.assertEqual(1, len(self.dd_runs))
        self.assertEqual([], self.staged())
        self.assertEqual({}, self.fake.aio)

    def test_restored_zeros_become_holes(self):
        """Onto an existing volume cinder-backup writes zeros too."""
        volume = self._volume('restoring-backup')
        self._restore(volume, bytes(8 * MIB) + b'\x07' * 4096)
        self.assertEqual(1, self.fake.lvol(self.alias(volume))['allocated'])

    def test_failed_restore_keeps_the_old_lvol_and_no_file(self):
        volume = self._volume('restoring-backup')
        old_uuid = self.fake.lvol(self.alias(volume))['uuid']
        before = self.fake.state()
        dd.write_file.side_effect = exception.VolumeBackendAPIException(
            data='spdk_dd failed')
        self.assertRaises(exception.VolumeBackendAPIException,
                          self._restore, volume, b'\x07' * 4096)
        self.assertEqual(old_uuid, self.fake.lvol(self.alias(volume))['uuid'])
        self.assertEqual(before, self.fake.state())
        self.assertEqual([], self.staged())

    def test_restore_larger_than_the_volume_refused(self):
        volume = self._volume('restoring-backup')
        before = self.fake.state()
        self.assertRaises(exception.VolumeBackendAPIException,
                          self._restore, volume, b'\x07' * 4096, offset=GIB)
        self.assertEqual(before, self.fake.state())
        self.assertEqual([], self.staged())
        self.assertEqual([], self.dd_runs)

    def test_other_attachment_without_spdk_identity_refused(self):
        volume = self._volume('available')
        self.assertRaises(exception.InvalidConnectorException,
                          self.driver.initialize_connection, volume,
                          BACKUP_HOST)
        self.assertEqual([], self.staged())

    def test_compute_host_of_a_volume_backing_up_gets_spdk_vhost(self):
        volume = self._volume('backing-up')
        conn = self.driver.initialize_connection(volume, dbase.LOCAL)
        self.assertEqual('spdk_vhost', conn['driver_volume_type'])
        self.assertEqual([], self.staged())


class SnapshotBackupTest(dbase.ImageTestCase):

    def test_snapshot_staged_for_the_backup_host_only(self):
        snap = self.snapshot(self.volume())
        before = self.fake.state()
        self.assertRaises(exception.InvalidConnectorException,
                          self.driver.initialize_connection_snapshot, snap,
                          dbase.LOCAL)
        conn = self.driver.initialize_connection_snapshot(snap, BACKUP_HOST)
        self.assertEqual('local', conn['driver_volume_type'])
        self.assertEqual(GIB, os.path.getsize(conn['data']['device_path']))
        calls = [c[0] for c in self.fake.calls]
        self.assertNotIn('bdev_lvol_decouple_parent', calls)
        self.driver.terminate_connection_snapshot(snap, BACKUP_HOST)
        self.assertEqual([], self.staged())
        self.assertEqual(before, self.fake.state())

    def test_snapshot_with_a_parent_flattened_first(self):
        src = self.volume()
        volume = self.make_volume()
        self.driver.create_volume_from_snapshot(volume, self.snapshot(src))
        snap = self.snapshot(volume)
        before = self.fake.state()
        self.driver.initialize_connection_snapshot(snap, BACKUP_HOST)
        calls = [c[0] for c in self.fake.calls]
        self.assertIn('bdev_lvol_decouple_parent', calls)
        self.assertEqual(before, self.fake.state())
        self.driver.terminate_connection_snapshot(snap, BACKUP_HOST)
        self.assertEqual([], self.staged())
