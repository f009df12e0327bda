"""Copy a volume's lvol into another lvol store of the same SPDK target.

SPDK cannot move or rename an lvol across lvol stores, so the data is
copied by the target itself with its shallow copy
(``bdev_lvol_start_shallow_copy``): it reads only the clusters a
read-only lvol owns and writes them at the same offsets into a bdev, here
a new thin lvol in the destination store, so clusters never written stay
unallocated there. The volume's own clusters are frozen in a temporary
snapshot (a shallow copy needs a read-only source). A volume made from a
snapshot, a clone or a cached image owns only what was written since, so
every snapshot it reads through is copied first, oldest first: newer
clusters overwrite older ones and the new lvol holds the whole content,
with no parent. It allocates the union of the chain's allocated clusters
(no longer shared), and the copy takes time in proportion to them.
"""

from cinder import exception
from cinder.volume import volume_utils
from oslo_log import log

from cinder_spdk_vhost import errors
from cinder_spdk_vhost import images
from cinder_spdk_vhost import locks
from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import operation
from cinder_spdk_vhost import pools
from cinder_spdk_vhost import replica_type
from cinder_spdk_vhost import rollback
from spdk_vhost_core import exception as rpc_exc

LOG = log.getLogger(__name__)

HOST_COPY_REFUSED = (
    'Cinder\'s generic (host-assisted) migration cannot move spdk_vhost '
    'volumes: it attaches them on the cinder-volume host through os-brick, '
    'which has no spdk_vhost connector, or, for an attached volume, asks '
    'Nova to swap the disk, which vhost-user disks do not support. A '
    'detached volume moves between the lvol stores (pools) of its own SPDK '
    'target only')


def chain(client, lvol):
    """The snapshots ``lvol`` reads through, oldest first."""
    found = []
    current = lvol
    while current.base_snapshot:
        if len(found) >= images.MAX_CHAIN:
            raise exception.VolumeBackendAPIException(
                data='%s has more than %d parents' % (lvol.alias,
                                                      images.MAX_CHAIN))
        parent = lvols.get(client, lvols.alias(current.lvs,
                                               current.base_snapshot))
        if parent is None:
            raise exception.VolumeBackendAPIException(
                data='parent %s of %s vanished' % (current.base_snapshot,
                                                   current.alias))
        found.append(parent)
        current = parent
    return list(reversed(found))


def unmovable_reason(client, lvol):
    """Why ``lvol`` cannot be copied into another store, or None.

    An lvol over an external bdev ("esnap" clone, only by managing one
    made outside Cinder) has content no shallow copy reads.
    """
    for item in [lvol] + chain(client, lvol):
        if item.esnap:
            return ('%s reads from an external bdev (esnap clone), which '
                    'SPDK cannot copy with it' % item.alias)
    return None


def snapshot_name(volume_id):
    """The temporary snapshot freezing the volume in its own store."""
    return lvols.temp_name('migrate-src', volume_id)


def copy_name(volume_id):
    """The new lvol in the destination store until it is complete."""
    return lvols.temp_name('migrate-dst', volume_id)


def copy(client, lvol, volume_id, dest_lvs, timeout, rb, cleanup):
    """Make a new thin lvol in ``dest_lvs`` holding ``lvol``'s content.

    Returns its alias. Its undo is registered on ``rb``; the temporary
    snapshot's deletion on ``cleanup``: with the volume still there it
    folds back into it (metadata only), without, it just goes.
    Leftovers of an interrupted attempt are removed first.
    """
    snap = snapshot_name(volume_id)
    snap_alias = lvols.alias(lvol.lvs, snap)
    dest = copy_name(volume_id)
    dest_alias = lvols.alias(dest_lvs, dest)
    images.delete_lvol(client, dest_alias)
    images.delete_lvol(client, snap_alias)
    with rb.change('delete lvol %s' % dest_alias, images.delete_lvol,
                   client, dest_alias):
        client.bdev_lvol_create(dest, lvol.size_mib, lvs_name=dest_lvs,
                                thin_provision=True)
    with cleanup.change('delete snapshot %s' % snap_alias,
                        images.delete_lvol, client, snap_alias):
        client.bdev_lvol_snapshot(lvol.alias, snap)
    frozen = lvols.get(client, snap_alias)
    for source in [item.alias for item in chain(client, frozen)] + [
            snap_alias]:
        started = client.bdev_lvol_start_shallow_copy(source, dest_alias)
        images.wait_shallow_copy(client, started['operation_id'], source,
                                 timeout)
    return dest_alias


class Mover(pools.Part):
    """The driver's retype and migrate_volume: QoS in place, or a move.

    Only between the lvol stores (pools) of this backend's own target;
    anything else is left to Cinder (``False``).
    """

    def __init__(self, pools, replicas):
        super().__init__(pools)
        self.replicas = replicas
        self.target_id = replicas.target_id

    def retype(self, volume, new_type, host):
        """Cinder's ``(retyped, model update)`` for a retype to ``host``.

        A clustered volume retyped where it is keeps its host: Cinder
        would write the scheduler's, which names whichever member of the
        cluster reported last, as if the volume had moved.
        """
        dest = self._destination(volume, host)
        retyped = dest is not None and self._retype(volume, new_type, dest)
        if (retyped and volume.cluster_name and
                dest == self.pools.pool(volume)):
            return True, {'host': volume.host}
        return retyped, None

    def _retype(self, volume, new_type, dest):
        """QoS in place, a move, or a new number of copies; else False.

        A replicated volume's copies do not move between pools; their
        number changes while it is detached (:meth:`_recount`). Anything
        else is left to Cinder's migration, which refuses it.
        """
        type_id = new_type['id'] if new_type else None
        copies = replica_type.copies(volume)
        wanted = replica_type.copies_of_type(type_id)
        limits = self.pools.limits(type_id, volume.size)
        if max(copies, wanted) > 1 and dest != self.pools.pool(volume):
            LOG.info('Volume %s: the driver does not move the copies of a '
                     'replicated volume', volume.id)
            return False
        if copies != wanted:
            if _attached(volume):
                LOG.info('Volume %(vol)s is attached: the driver changes '
                         'the number of copies of a detached volume only '
                         '(%(old)d to %(new)d asked)',
                         {'vol': volume.id, 'old': copies, 'new': wanted})
                return False
            return self._recount(volume, type_id, copies, wanted, limits)
        elif dest != self.pools.pool(volume):
            if _attached(volume):
                LOG.info('Volume %(vol)s is attached: the driver does not '
                         'move it to pool %(pool)s',
                         {'vol': volume.id, 'pool': dest})
                return False
            return self._move(volume, dest, limits)
        with operation.running('retype volume %s' % volume.id,
                               locks.vlock(volume.id)) as rb:
            self.pools.apply_qos(self.pools.get(volume).alias, limits, rb)
            self.replicas.apply_qos(volume, limits, rb)
        return True

    def _recount(self, volume, type_id, copies, wanted, limits):
        """Give detached ``volume`` ``wanted`` copies instead of ``copies``.

        Between 2 and 3 the copies stay where they are
        (:meth:`replica_counts.Counts.recount`); to or from one, the data
        moves by the superblock's room
        (:meth:`replica_counts.Counts.relayout`).
        """
        with operation.running('retype volume %s to %d copies'
                               % (volume.id, wanted),
                               locks.vlock(volume.id)) as rb:
            lvol = self.pools.get(volume)
            self.pools.refuse_if_exported(lvol, volume)
            if min(copies, wanted) > 1:
                self.replicas.counts.recount(volume, lvol, wanted, limits,
                                             rb)
                stale = []
            else:
                stale = self.replicas.counts.relayout(volume, lvol, type_id,
                                                      limits, rb)
        with errors.translated('clean up after the retype of volume %s'
                               % volume.id):
            self.replicas.drop(stale)
        LOG.info('Volume %(vol)s has %(new)d copies instead of %(old)d',
                 {'vol': volume.id, 'new': wanted, 'old': copies})
        return True

    def migrate_volume(self, volume, host):
        dest = self._destination(volume, host)
        if dest is None or replica_type.copies(volume) > 1:
            LOG.info('Volume %(vol)s: %(host)s is not a pool of this '
                     'backend; left to Cinder\'s generic migration',
                     {'vol': volume.id, 'host': host.get('host')})
            return False
        limits = self.pools.limits(volume.volume_type_id, volume.size)
        return self._move(volume, dest, limits)

    def _destination(self, volume, host):
        """The lvol store of this backend ``host`` names, or None.

        A clustered volume's backend is its cluster's: ``host['host']``
        and ``volume.host`` then name whichever members last reported
        and made it, not necessarily the same.
        """
        lvstores = self.pools.lvstores
        if volume.cluster_name:
            target, current = host.get('cluster_name'), volume.cluster_name
        else:
            target, current = host.get('host'), volume.host
        target = target or ''
        backend = volume_utils.extract_host(current, 'backend')
        pool = volume_utils.extract_host(target, 'pool')
        if (volume_utils.extract_host(target, 'backend') != backend or
                (pool and pool not in lvstores)):
            return None
        location = (host.get('capabilities') or {}).get('location_info')
        if location and location != 'spdk_vhost:%s:%s' % (
                self.target_id, pool or lvstores[0]):
            return None
        return pool or lvstores[0]

    def _move(self, volume, dest, limits):
        """Copy the volume's lvol into store ``dest``, then drop the old.

        True when the volume is in ``dest`` (already, on a retry), False
        when SPDK cannot copy it. The old lvol is deleted last; until
        then any failure deletes the copy and leaves the volume as it
        was.
        """
        what = 'migrate volume %s to %s' % (volume.id, dest)
        with locks.locked(locks.vlock(volume.id)), errors.translated(what):
            lvol = self.pools.get(volume)
            if lvol.lvs == dest:
                LOG.info('Volume %(vol)s is already in %(dest)s',
                         {'vol': volume.id, 'dest': dest})
                return True
            reason = unmovable_reason(self.client, lvol)
            if reason:
                LOG.warning('Volume %(vol)s cannot be moved by the driver: '
                            '%(reason)s', {'vol': volume.id,
                                           'reason': reason})
                return False
            self.pools.refuse_if_exported(lvol, volume)
            # A copy an interrupted attempt completed, never adopted.
            self.pools.delete_lvol(lvols.alias(dest, volume.name))
            parents = [locks.slock(item.name)
                       for item in chain(self.client, lvol)]
            with locks.locked(*parents), \
                    rollback.Rollback(what) as rb, \
                    rollback.Cleanup(what) as tmp:
                copied = copy(self.client, lvol, volume.id, dest,
                              self.conf.spdk_image_copy_timeout, rb, tmp)
                alias = self.pools.rename(copied, volume.name, rb)
                if not self.conf.spdk_thin_provision:
                    self.client.bdev_lvol_inflate(alias)
                self.pools.apply_qos(alias, limits)
                self._delete_source(lvol)
            self.pools.release_parent(lvol.lvs, lvol.base_snapshot)
            self.pools.persist()
        LOG.info('Volume %(vol)s moved from %(old)s to %(new)s',
                 {'vol': volume.id, 'old': lvol.alias, 'new': alias})
        return True

    def _delete_source(self, lvol):
        """Delete the moved volume's old lvol: the point of no return.

        Raises only if it is still there, so a lost answer does not roll
        back (delete) the only copy left.
        """
        try:
            self.client.bdev_lvol_delete(lvol.alias)
        except rpc_exc.SpdkRpcError:
            if lvols.get(self.client, lvol.uuid) is not None:
                raise
            LOG.info('%s is gone although its deletion failed', lvol.alias)


def _attached(volume):
    return bool(volume.volume_attachment) or (
        volume.previous_status == 'in-use')


def refuse_host_copy(volume):
    """Refuse to be the new volume of Cinder's generic migration.

    Its ``migration_status`` is ``target:<source id>``: refused before
    anything is made or copied, whatever the source backend.
    """
    # An object built without a database row may lack the field.
    if (volume.obj_attr_is_set('migration_status') and
            volume.is_migration_target()):
        raise exception.VolumeMigrationFailed(reason=HOST_COPY_REFUSED)
