"""Which lvols Cinder may adopt, and the entries of its manageable lists.

``cinder manageable-list`` and ``snapshot-manageable-list`` show every
lvol of the backend's lvol stores in the shape Cinder's own drivers
(LVM, RBD) use: the reference to pass to manage, the size in whole GiB,
whether it is safe to manage and why not, and the Cinder id of one
already managed. The driver's own lvols (hidden snapshots, markers and the
deleted snapshots they mark, scratch lvols of image transfers, image
cache bases) are listed as not safe with the reason, as RBD lists its
clone snapshots: managing one would hand Cinder an lvol the driver
deletes behind its back.
"""

import math

from cinder_spdk_vhost import image_cache
from cinder_spdk_vhost import lvols

# What unmanage renames an lvol to: not mistaken for a Cinder object,
# and safe to manage again.
UNMANAGED_PREFIX = 'unmanaged-'


def own_lvol_reason(name):
    """Why lvol ``name`` is the driver's own and not manageable, or None."""
    if lvols.is_hidden(name):
        return 'hidden snapshot, deleted with its last dependent'
    if lvols.is_marker(name):
        return 'marks a deleted snapshot kept for its clones'
    if lvols.is_temp(name):
        return 'scratch lvol of an image transfer'
    if image_cache.is_base(name):
        return 'image cache base'
    return None


def size_gb(lvol):
    """Size in whole GiB, rounded up (manage grows a volume to it)."""
    return int(math.ceil(lvol.size_bytes / float(lvols.GIB)))


def backend_lvols(client, lvstores):
    """Every lvol of ``lvstores``, from one ``bdev_get_bdevs``."""
    found = [lvols.from_bdev(bdev) for bdev in client.bdev_get_bdevs()
             if bdev.get('product_name') == 'Logical Volume']
    return sorted((lvol for lvol in found if lvol.lvs in lvstores),
                  key=lambda lvol: lvol.alias)


def entry(lvol, managed, in_use=(), retired=False):
    """One manageable-list entry; ``managed`` maps lvol names to ids."""
    cinder_id = managed.get(lvol.name) or managed.get(lvol.uuid)
    reason = own_lvol_reason(lvol.name)
    if retired:
        reason = 'deleted snapshot, kept for its clones'
    if cinder_id:
        reason = 'already managed'
    elif reason is None and in_use:
        reason = 'in use: %s' % ', '.join(in_use)
    return {'reference': {'source-name': lvol.alias},
            'size': size_gb(lvol),
            'safe_to_manage': reason is None,
            'reason_not_safe': reason,
            'cinder_id': cinder_id,
            'extra_info': None}


def snapshot_entries(found, managed):
    """Entries for the snapshot lvols among ``found`` (every lvol)."""
    by_alias = {lvol.alias: lvol for lvol in found}
    retired = {lvol.name[len(lvols.RETIRED_PREFIX):] for lvol in found
               if lvols.is_marker(lvol.name)}
    return [snapshot_entry(lvol, managed, by_alias, lvol.uuid in retired)
            for lvol in found if lvol.is_snapshot]


def snapshot_entry(lvol, managed, by_alias, retired=False):
    """An entry for snapshot lvol ``lvol``, naming a volume it belongs to.

    SPDK does not record which lvol a snapshot was taken of: every lvol
    below it in the chain reads it. The source is the first volume found
    below (by name), the one to give ``snapshot-manage``.
    """
    item = entry(lvol, managed, retired=retired)
    source = first_volume_below(lvol, by_alias)
    item['source_reference'] = {'source-name': source and source.alias}
    item['extra_info'] = {'dependent_lvols': ', '.join(sorted(lvol.clones))}
    return item


def first_volume_below(lvol, by_alias):
    """The first lvol under snapshot ``lvol`` that is not a snapshot."""
    todo = [lvol]
    while todo:
        snap = todo.pop(0)
        for name in sorted(snap.clones):
            clone = by_alias.get(lvols.alias(snap.lvs, name))
            if clone is None:
                continue
            if not clone.is_snapshot:
                return clone
            todo.append(clone)
    return None
