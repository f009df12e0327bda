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

from cinder import exception
from cinder.volume import volume_utils
from oslo_log import log

from cinder_spdk_vhost import errors
from cinder_spdk_vhost import image_cache
from cinder_spdk_vhost import locks
from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import operation
from cinder_spdk_vhost import pools
from cinder_spdk_vhost import replica_type

LOG = log.getLogger(__name__)

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
    if replica_type.is_replica(name):
        return 'copy of a replicated volume of another backend'
    return None


def size_gb(lvol):
    """Size in whole GiB, rounded up (manage grows a volume to it)."""
    return int(math.ceil(lvol.size_bytes / float(lvols.GIB)))


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


class Manager(pools.Part):
    """The driver's manage, unmanage and manageable-list methods."""

    def _lvol_from_ref(self, existing_ref):
        """The lvol ``existing_ref`` names, if Cinder may adopt it."""
        lvstores = self.pools.lvstores
        if 'source-id' in existing_ref:
            lvol = lvols.get(self.client, existing_ref['source-id'])
        elif 'source-name' in existing_ref:
            lvs, _sep, name = existing_ref['source-name'].rpartition('/')
            lvol = lvols.find(self.client, name, [lvs] if lvs else lvstores)
        else:
            raise exception.ManageExistingInvalidReference(
                existing_ref=existing_ref,
                reason='give source-name (lvstore/lvol) or source-id')
        reason = None
        if lvol is None:
            reason = 'no such lvol'
        elif lvol.lvs not in lvstores:
            reason = 'lvol store %s is not managed here' % lvol.lvs
        else:
            reason = own_lvol_reason(lvol.name)
        if reason:
            raise exception.ManageExistingInvalidReference(
                existing_ref=existing_ref, reason=reason)
        return lvol

    def _volume_from_ref(self, existing_ref):
        lvol = self._lvol_from_ref(existing_ref)
        if lvol.is_snapshot:
            raise exception.ManageExistingInvalidReference(
                existing_ref=existing_ref,
                reason='lvol %s is a snapshot' % lvol.alias)
        return lvol

    def _snapshot_from_ref(self, snapshot, existing_ref):
        """The snapshot lvol named, which the snapshot's volume reads."""
        snap = self._lvol_from_ref(existing_ref)
        lvol = self.pools.get(snapshot.volume)
        if snap.lvs != lvol.lvs or snap.name not in self._chain(lvol):
            raise exception.ManageExistingInvalidReference(
                existing_ref=existing_ref,
                reason='lvol %s is not a snapshot of volume %s (%s)'
                       % (snap.alias, snapshot.volume_id, lvol.alias))
        return snap

    def _chain(self, lvol):
        """Names of the snapshots ``lvol`` reads from, nearest first."""
        names = []
        while lvol is not None and lvol.base_snapshot:
            names.append(lvol.base_snapshot)
            lvol = lvols.get(self.client,
                             lvols.alias(lvol.lvs, lvol.base_snapshot))
        return names

    def manage_existing_get_size(self, volume, existing_ref):
        """Size in whole GiB, rounded up; manage grows the lvol to it."""
        with errors.translated('size of %s' % existing_ref):
            return size_gb(self._volume_from_ref(existing_ref))

    def manage_existing(self, volume, existing_ref):
        """Rename the lvol after the volume, grow it to whole GiB, QoS."""
        limits = self.pools.limits(volume.volume_type_id, volume.size)
        with operation.running('manage %s' % existing_ref,
                               locks.vlock(volume.id)) as rb:
            lvol = self._volume_from_ref(existing_ref)
            if self.exporter.users(lvol):
                raise exception.ManageExistingInvalidReference(
                    existing_ref=existing_ref,
                    reason='lvol %s is exported' % lvol.alias)
            alias = lvol.alias
            if lvol.name != volume.name:
                alias = self.pools.rename(lvol.alias, volume.name, rb)
            self.pools.finish(alias, volume, limits)

    def unmanage(self, volume):
        """Keep the lvol, renamed so it is not mistaken for a volume."""
        with operation.running('unmanage volume %s' % volume.id,
                               locks.vlock(volume.id)):
            lvol = self.pools.find(volume)
            if lvol is not None:
                self.client.bdev_lvol_rename(
                    lvol.alias, UNMANAGED_PREFIX + volume.name)

    def manage_existing_snapshot_get_size(self, snapshot, existing_ref):
        """Size in whole GiB of a snapshot lvol of the snapshot's volume."""
        with errors.translated('size of %s' % existing_ref):
            return size_gb(self._snapshot_from_ref(snapshot, existing_ref))

    def manage_existing_snapshot(self, snapshot, existing_ref):
        """Adopt a snapshot lvol the volume reads, by its UUID.

        SPDK cannot rename a snapshot, so the lvol keeps its name and
        the snapshot records its UUID as ``provider_id``.
        """
        with operation.running('manage snapshot %s' % existing_ref,
                               locks.vlock(snapshot.volume_id),
                               locks.slock(snapshot.name)):
            snap = self._snapshot_from_ref(snapshot, existing_ref)
            if self.pools.marker(snap) is not None:
                raise exception.ManageExistingInvalidReference(
                    existing_ref=existing_ref,
                    reason='lvol %s is a deleted snapshot' % snap.alias)
        LOG.info('Snapshot %(id)s manages lvol %(alias)s',
                 {'id': snapshot.id, 'alias': snap.alias})
        return {'provider_id': snap.uuid}

    def unmanage_snapshot(self, snapshot):
        """Leave the snapshot lvol as it is (SPDK cannot rename it)."""
        with errors.translated('unmanage snapshot %s' % snapshot.id):
            snap = self.pools.find_snapshot(snapshot)
        LOG.info('Snapshot %(id)s unmanaged; lvol %(alias)s is kept',
                 {'id': snapshot.id, 'alias': snap and snap.alias})

    def get_manageable_volumes(self, cinder_volumes, marker, limit, offset,
                               sort_keys, sort_dirs):
        """Every lvol that is not a snapshot, safe to manage or not."""
        managed = {vol.name: vol.id for vol in cinder_volumes}
        with errors.translated('list manageable volumes'):
            entries = [
                entry(lvol, managed, self.exporter.users(lvol))
                for lvol in lvols.every(self.client, self.pools.lvstores)
                if not lvol.is_snapshot]
        return volume_utils.paginate_entries_list(
            entries, marker, limit, offset, sort_keys, sort_dirs)

    def get_manageable_snapshots(self, cinder_snapshots, marker, limit,
                                 offset, sort_keys, sort_dirs):
        """Every snapshot lvol, with a volume that reads it."""
        managed = {}
        for snap in cinder_snapshots:
            managed[snap.name] = snap.id
            if snap.provider_id:
                managed[snap.provider_id] = snap.id
        with errors.translated('list manageable snapshots'):
            found = lvols.every(self.client, self.pools.lvstores)
        entries = snapshot_entries(found, managed)
        return volume_utils.paginate_entries_list(
            entries, marker, limit, offset, sort_keys, sort_dirs)


class ManageMethods(object):
    """The driver's manage and unmanage entry points, on ``self.manager``.

    A replicated volume is refused: its copies on other targets are not
    Cinder's to adopt or let go of one by one.
    """

    def manage_existing_get_size(self, volume, existing_ref):
        return self.manager.manage_existing_get_size(volume, existing_ref)

    def manage_existing(self, volume, existing_ref):
        replica_type.refuse(volume, 'Managing an existing lvol')
        self.manager.manage_existing(volume, existing_ref)

    def unmanage(self, volume):
        replica_type.refuse(volume, 'Unmanaging')
        self.manager.unmanage(volume)

    def manage_existing_snapshot_get_size(self, snapshot, existing_ref):
        return self.manager.manage_existing_snapshot_get_size(
            snapshot, existing_ref)

    def manage_existing_snapshot(self, snapshot, existing_ref):
        return self.manager.manage_existing_snapshot(snapshot, existing_ref)

    def unmanage_snapshot(self, snapshot):
        self.manager.unmanage_snapshot(snapshot)

    def get_manageable_volumes(self, cinder_volumes, marker, limit, offset,
                               sort_keys, sort_dirs):
        return self.manager.get_manageable_volumes(
            cinder_volumes, marker, limit, offset, sort_keys, sort_dirs)

    def get_manageable_snapshots(self, cinder_snapshots, marker, limit,
                                 offset, sort_keys, sort_dirs):
        return self.manager.get_manageable_snapshots(
            cinder_snapshots, marker, limit, offset, sort_keys, sort_dirs)
