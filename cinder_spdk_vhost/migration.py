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

from cinder_spdk_vhost import images
from cinder_spdk_vhost import lvols


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
