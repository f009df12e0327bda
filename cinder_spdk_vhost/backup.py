"""Backup and restore: cinder-backup reads and writes a staged raw file.

cinder-backup attaches a volume (or, for an in-use volume with
``backup_use_temp_snapshot``, a temporary snapshot) through os-brick's
connector table, which has no ``spdk_vhost`` entry, and needs no SPDK
identity in its connector. So for a connector without
``spdk_target_id`` and a volume that is ``backing-up`` or
``restoring-backup`` (or any snapshot), the driver hands out os-brick's
``local`` protocol: a sparse raw file in the staging directory.

* Backup: SPDK shallow-copies the data (allocated clusters only) into
  the file through an aio bdev, as ``copy_volume_to_image`` does; the
  file goes at detach.
* Restore: the file starts empty and sparse; at detach its data extents
  go into a new thin lvol (``spdk_dd --sparse``) that replaces the
  volume's, so an existing volume keeps nothing of its old data where
  the backup had zeros; then the file goes. Onto an existing volume
  cinder-backup writes the zeros too: ``fallocate --dig-holes`` makes
  them holes again first, so the volume stays thin. A failure leaves the
  old lvol and raises: Cinder sets the volume to ``error_restoring``.

The staging directory (``spdk_image_staging_dir``) must be on the SPDK
target's host and the same path for cinder-volume and cinder-backup.
"""

import os

from cinder import exception
from oslo_log import log

from cinder_spdk_vhost import errors
from cinder_spdk_vhost import image_ops
from cinder_spdk_vhost import images
from cinder_spdk_vhost import locks
from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import operation
from cinder_spdk_vhost import pools
from cinder_spdk_vhost import replica_type
from cinder_spdk_vhost import rollback
from cinder_spdk_vhost import sparse

LOG = log.getLogger(__name__)

BACKING_UP = 'backing-up'
RESTORING = 'restoring-backup'
SNAPSHOT_REFUSED = (
    'a snapshot is attached only by cinder-backup (a connector without '
    'spdk_target_id): it is staged as a raw file for the backup')


def is_backup_host(connector):
    """A connector of a host without SPDK: cinder-backup's (os-brick)."""
    return (isinstance(connector, dict) and
            connector.get('spdk_target_id') is None)


def staged_kind(volume, connector):
    """``'backup'``, ``'restore'`` or None (an ordinary attachment)."""
    if not is_backup_host(connector):
        return None
    return {BACKING_UP: 'backup', RESTORING: 'restore'}.get(volume.status)


def local_connection(path):
    """os-brick's ``local`` protocol: LocalConnector opens the path."""
    return {'driver_volume_type': 'local', 'data': {'device_path': path}}


class Backups(pools.Part):
    """Staged connections for cinder-backup, for volumes and snapshots."""

    def __init__(self, pools, replicas):
        super().__init__(pools)
        self.replicas = replicas

    def _backup_path(self, kind, obj_id):
        return os.path.join(image_ops.staging_dir(self.conf),
                            'backup-%s-%s.raw' % (kind, obj_id))

    def stage_volume(self, volume, kind):
        """Make the file cinder-backup reads (backup) or writes (restore)."""
        path = self._backup_path('volume', volume.id)
        with locks.locked(locks.vlock(volume.id)), \
                errors.translated('stage volume %s for %s'
                                  % (volume.id, kind)), \
                rollback.Cleanup('stage volume %s' % volume.id) as tmp:
            lvol = self.pools.get(volume)
            offset = replica_type.data_offset(volume)
            self._new_file(path, lvol.size_bytes - offset)
            try:
                if kind == 'backup':
                    self.replicas.sync.check_in_sync(volume, lvol,
                                                     'backing it up')
                    source = images.flat_source(self.client, lvol, volume.id,
                                                tmp)
                    self._copy_out(volume, source, lvol, path)
            except Exception:
                images.remove_file(path)
                raise
        LOG.info('Volume %(vol)s staged in %(path)s for %(kind)s',
                 {'vol': volume.id, 'path': path, 'kind': kind})
        return local_connection(path)

    @staticmethod
    def _new_file(path, size):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, 'wb') as out:
            out.truncate(size)

    def _copy_out(self, obj, source, lvol, path):
        info = self.replicas.disk.read(obj, source, lvol, path,
                                       lvols.temp_name('bk', obj.id))
        LOG.debug('Staged %(src)s: %(info)s', {'src': source, 'info': info})

    def unstage_volume(self, volume, kind):
        """Drop the file; for a restore, first write it into the volume.

        A restore whose file is not here (staged by another member of the
        cluster whose staging directory is not this one) is refused: the
        volume would be reported restored with none of the backup in it.
        """
        path = self._backup_path('volume', volume.id)
        if not os.path.exists(path):
            if kind == 'restore':
                raise exception.VolumeBackendAPIException(
                    data='the staged restore %s of volume %s is not on this '
                         'host: every cinder-volume of the cluster and '
                         'cinder-backup must share spdk_image_staging_dir'
                         % (path, volume.id))
            LOG.debug('No staged file %s to remove', path)
            return
        try:
            if kind == 'restore':
                self.restore_from(volume, path)
        finally:
            images.remove_file(path)

    def restore_from(self, volume, path):
        """A new lvol with the file's data extents replaces the volume's.

        So does one in place of each other copy of a replicated volume,
        the data after the superblock's room.
        """
        limits = self.pools.limits(volume.volume_type_id, volume.size)
        offset = replica_type.data_offset(volume)
        with operation.running('restore volume %s' % volume.id,
                               locks.vlock(volume.id)) as rb:
            self.exporter.require('Restoring a backup (spdk_dd reaches the '
                                  'lvol over NVMe/TCP)')
            old = self.pools.get(volume)
            self.pools.refuse_if_exported(old, volume)
            # cinder-backup opened it with O_TRUNC and may have skipped
            # trailing zeros: back to the volume's size, still sparse.
            room = old.size_bytes - offset
            size = os.path.getsize(path)
            if size > room:
                raise exception.VolumeBackendAPIException(
                    data='restored data of volume %s is %d bytes, more than '
                         'its %d' % (volume.id, size, room))
            os.truncate(path, room)
            sparse.dig_holes(path)
            stale = self.replicas.disk.write(volume, old, path, limits, rb,
                                             'restore', 'restored')
        with errors.translated('clean up after restore'):
            self.replicas.drop(stale)
            self.pools.release_parent(old.lvs, old.base_snapshot)
        LOG.info('Volume %s restored from its staged file', volume.id)

    # -- snapshots (backup of an in-use volume) ---------------------------

    def stage_snapshot(self, snapshot, connector):
        """Stage the snapshot's data as a raw file for cinder-backup.

        A snapshot of a volume made from another snapshot (or an image)
        owns only its own clusters: a scratch clone is decoupled from
        every parent first, so the file holds all the data.
        """
        if not is_backup_host(connector):
            raise exception.InvalidConnectorException(
                missing=SNAPSHOT_REFUSED)
        path = self._backup_path('snapshot', snapshot.id)
        with locks.locked(locks.slock(snapshot.name)), \
                errors.translated('stage snapshot %s' % snapshot.id), \
                rollback.Cleanup('stage snapshot %s' % snapshot.id) as tmp:
            snap = self.pools.get_snapshot(snapshot)
            offset = replica_type.data_offset(snapshot)
            self._new_file(path, snap.size_bytes - offset)
            try:
                source = images.flat_snapshot(self.client, snap, snapshot.id,
                                              tmp)
                self._copy_out(snapshot, source, snap, path)
            except Exception:
                images.remove_file(path)
                raise
        LOG.info('Snapshot %(snap)s staged in %(path)s for backup',
                 {'snap': snapshot.id, 'path': path})
        return local_connection(path)

    def unstage_snapshot(self, snapshot):
        images.remove_file(self._backup_path('snapshot', snapshot.id))
