"""Replicated volumes: copies of a volume on other storage targets.

A volume type with the extra spec ``spdk:replicas`` = 2 or 3 keeps that
many copies of each volume, each on a different SPDK storage target (a
failure domain). The backend's own target holds the first: the volume's
lvol, as for any volume. Each other copy is an lvol named
``replica-<volume id>`` on one of the targets named in
``spdk_replica_targets`` (:mod:`peers`), those with the most free space
first. Every copy is exported to the attaching host over NVMe-oF, and
the compute host mirrors them into a RAID1 (the wire format:
:mod:`spdk_vhost_core.replicas`).

Which targets hold a volume's copies is found by name on each, so there
is no record to go stale; a target that does not answer fails the
operation, with what it made undone, rather than leave a copy behind or
make a volume with fewer copies than its type promises.

The compute host's RAID1 keeps a superblock at the start of every copy
(:mod:`superblock`), so an lvol's bytes are not the guest's disk.
Snapshots and clones work on whole copies and keep that layout: a
snapshot is taken of the volume's own copy alone, once its superblock and
the others' prove that copy was in sync, and every copy of a clone is
made from that one snapshot (:mod:`remote_copy` for the other targets),
so no two copies of a clone can differ, whatever the guest wrote during
the snapshot. A clone's copies then have their superblock wiped: it is
the source's mirror, and the compute host makes the clone its own. What
reads or writes the guest's bytes on the storage side skips the
superblock's room: a backup or an upload reads the own copy (proven in
sync) from :data:`superblock.DATA_OFFSET` on (:meth:`Replicas.read_disk`),
a restore or an image writes every copy anew with that room left zero
(:meth:`Replicas.write_disk`). Moves between pools are still refused
for replicated volumes, as is a clone between a replicated volume and a
single-copy one: their data does not start at the same offset.

A copy is lost when no target of ``spdk_replica_targets`` holds it: the
operator took its target out of the list for good, or the target lost
its lvol store. The volume's next attach where it is attached nowhere
else makes the copy anew on another target (:meth:`Replicas.replace_lost`);
an attach while it is in use (a live migration's destination) makes it
empty, for the compute host to rebuild once the guest runs there.
"""

import contextlib

from cinder import exception
from cinder.volume import volume_types
from oslo_log import log

from cinder_spdk_vhost import dd
from cinder_spdk_vhost import export
from cinder_spdk_vhost import image_ops
from cinder_spdk_vhost import images
from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import pools
from cinder_spdk_vhost import remote_copy
from cinder_spdk_vhost import rollback
from cinder_spdk_vhost import sparse
from cinder_spdk_vhost import superblock
from spdk_vhost_core import exception as rpc_exc
from spdk_vhost_core import replicas as wire

LOG = log.getLogger(__name__)

EXTRA_SPEC = 'spdk:replicas'
PREFIX = 'replica-'


class OutOfSync(exception.VolumeBackendAPIException):
    """A copy lacks writes another copy holds: none can be the source."""


def copies_of_type(volume_type_id):
    """How many copies a volume type asks for: 1 (unset) to 3."""
    if not volume_type_id:
        return 1
    value = volume_types.get_volume_type_extra_specs(
        volume_type_id).get(EXTRA_SPEC)
    if value is None:
        return 1
    if not str(value).isdigit() or not 1 <= int(value) <= wire.MAX_REPLICAS:
        raise exception.InvalidVolumeType(
            reason='%s=%r: must be a whole number from 1 to %d'
                   % (EXTRA_SPEC, value, wire.MAX_REPLICAS))
    return int(value)


def replica_name(volume_id):
    """The lvol of a volume's copy on another storage target."""
    return PREFIX + volume_id


def is_replica(name):
    return bool(name) and name.startswith(PREFIX)


class Replicas(pools.Part):
    """A backend's replicated volumes: their copies on its peers."""

    def __init__(self, pools, peers, target_id):
        super().__init__(pools)
        self.peers = peers
        self.target_id = target_id

    def copies(self, volume):
        return copies_of_type(volume.volume_type_id)

    def lvol_mib(self, volume, size_gb=None):
        """The size of each copy: the volume's, plus the superblock's room.

        The compute host's RAID starts the guest's disk 1 MiB into each
        copy (:data:`superblock.DATA_OFFSET`): without that room a
        replicated volume would look 1 MiB smaller than it is.
        """
        size_mib = lvols.size_in_mib(size_gb or volume.size)
        if self.copies(volume) > 1:
            size_mib += superblock.DATA_OFFSET // lvols.MIB
        return size_mib

    def refuse(self, volume, what):
        """Refuse ``what`` for a replicated volume (see the module doc)."""
        if self.copies(volume) > 1:
            raise exception.VolumeDriverException(
                message='%s is not supported for volume %s: it is '
                        'replicated (%s), and its copies hold the compute '
                        'host\'s RAID1 superblock'
                        % (what, volume.id, EXTRA_SPEC))

    def data_offset(self, obj):
        """Where the guest's disk starts in each lvol of a volume or snapshot.

        (Either has ``volume_type_id``.)
        """
        return superblock.DATA_OFFSET if self.copies(obj) > 1 else 0

    def check_layout(self, source, volume):
        """Refuse a clone between a replicated and a single-copy volume."""
        if (self.copies(source) > 1) != (self.copies(volume) > 1):
            raise exception.VolumeDriverException(
                message='volume %s cannot be made from volume %s: one is '
                        'replicated (%s) and the other is not, and a '
                        'replicated volume\'s data starts after the compute '
                        'host\'s RAID1 superblock' % (volume.id, source.id,
                                                      EXTRA_SPEC))

    def check_room(self, volume):
        """Refuse a type asking for more copies than there are targets."""
        wanted = self.copies(volume)
        if wanted > 1 + len(self.peers):
            raise exception.InvalidVolumeType(
                reason='%s=%d needs %d storage targets; this backend has '
                       '%d (its own and spdk_replica_targets)'
                       % (EXTRA_SPEC, wanted, wanted, 1 + len(self.peers)))

    # -- placement -------------------------------------------------------

    def _candidates(self, size_gb, whole=False):
        """(free bytes, peer, lvol store) of every peer with room.

        Room for a thin lvol is any free cluster (the scheduler's
        over-subscription ratio governs the backend's own pools); a
        thick one needs its whole size, as does one the compute host
        will rebuild (``whole``): a rebuild writes every block.
        """
        found = []
        for peer in self.peers:
            try:
                free, lvs = peer.free_bytes()
            except rpc_exc.SpdkRpcError as err:
                LOG.warning('Replica target %(peer)s: %(err)s',
                            {'peer': peer, 'err': err})
                continue
            thin = peer.conf.spdk_thin_provision and not whole
            if free > 0 and (thin or free >= size_gb * lvols.GIB +
                             superblock.DATA_OFFSET):
                found.append((free, peer, lvs))
        return sorted(found, key=lambda item: -item[0])

    def available(self):
        """How many copies a new 1 GiB volume could have now."""
        return 1 + len(self._candidates(1))

    def place(self, volume, limits, rb, wanted=None, skip=(),
              whole=False):
        """Make the volume's other copies, each on its own target.

        ``wanted``: how many (all but its own, by default), on peers not
        in ``skip`` with room for them (``whole``: see
        :meth:`_candidates`); returns [(peer, alias)] of those made.
        """
        if wanted is None:
            wanted = self.copies(volume) - 1
        if not wanted:
            return []
        found = [item for item in self._candidates(volume.size, whole)
                 if item[1] not in skip]
        if len(found) < wanted:
            raise exception.VolumeBackendAPIException(
                data='volume %s needs %d copies on other storage targets; '
                     'only %d of spdk_replica_targets (%s) answer with '
                     'room for it' % (volume.id, wanted, len(found),
                                      ', '.join(map(str, self.peers))))
        made = [(peer, self._new_copy(peer, lvs, volume, limits, rb))
                for _free, peer, lvs in found[:wanted]]
        LOG.info('Volume %(vol)s has copies on %(targets)s',
                 {'vol': volume.id, 'targets': ', '.join(
                     [self.target_id] + [str(peer) for _f, peer, _l
                                         in found[:wanted]])})
        return made

    def _new_copy(self, peer, lvs, volume, limits, rb):
        """An empty copy of ``volume`` on ``peer``, with its QoS; alias."""
        alias = peer.pools.create_lvol(
            volume, rb, name=replica_name(volume.id), lvs=lvs,
            size_mib=self.lvol_mib(volume))
        peer.pools.new_qos(alias, limits)
        return alias

    def holders(self, volume, silent=None):
        """(peer, lvol) of each copy; a peer that does not answer raises.

        ``silent``: a set of peers not to ask, to which one that does not
        answer is added (with a warning) instead: a survey goes on.
        """
        name = replica_name(volume.id)
        found = []
        for peer in self.peers:
            if silent is not None and peer in silent:
                continue
            try:
                lvol = peer.find(name)
            except rpc_exc.SpdkRpcError as err:
                if silent is None:
                    raise
                LOG.warning('Replica target %(peer)s: %(err)s',
                            {'peer': peer, 'err': err})
                silent.add(peer)
                continue
            if lvol is not None:
                found.append((peer, lvol))
        return found

    def every_copy(self, volume):
        """:meth:`holders`; fewer copies than the type promises raise."""
        held = self.holders(volume)
        wanted = self.copies(volume)
        if len(held) + 1 < wanted:
            raise exception.VolumeBackendAPIException(
                data='volume %s has %d of its %d copies (on %s)'
                     % (volume.id, len(held) + 1, wanted,
                        ', '.join([self.target_id] +
                                  [str(peer) for peer, _l in held])))
        return held

    # -- snapshots and clones --------------------------------------------

    @contextlib.contextmanager
    def _reached(self, exporter, lvol, volume_id):
        """spdk_dd's way to a copy, through its own export; gone after."""
        with rollback.Cleanup('reach %s' % lvol.alias) as cleanup:
            yield dd.scratch_export(exporter, lvol.uuid, volume_id, cleanup,
                                    lvol.name)

    def _head(self, exporter, lvol, volume_id):
        """The RAID superblock at the start of a copy, or None."""
        with self._reached(exporter, lvol, volume_id) as (params, secrets):
            return superblock.parse(dd.read_head(
                self.conf, params, secrets, superblock.HEAD_BYTES))

    def _wipe(self, exporter, lvol, volume_id):
        """Zero the superblock a copy carries (its source's, or stale)."""
        with self._reached(exporter, lvol, volume_id) as (params, secrets):
            dd.zero_head(self.conf, params, secrets, superblock.HEAD_BYTES)

    def snapshot(self, volume, lvol, take):
        """Run ``take()``, the own copy's snapshot, and prove it sound.

        The compute host writes to every copy, but a copy failed out of
        its mirror, or still being rebuilt, lacks writes: its snapshot
        would not be the guest's disk. Its own superblock is read before
        the snapshot and every other copy's after
        (:func:`superblock.unsound_snapshot`); ``take`` registers the
        snapshot's undo on the operation's rollback, so a refusal leaves
        nothing. Costs a ``spdk_dd`` read of 4 KiB per copy.
        """
        if self.copies(volume) == 1:
            return take()
        before = self._head(self.exporter, lvol, volume.id)
        taken = take()
        others = [self._head(peer.exporter, copy, volume.id)
                  for peer, copy in self.every_copy(volume)]
        why = superblock.unsound_snapshot(before, others, lvol.uuid)
        if why:
            raise exception.VolumeBackendAPIException(
                data='snapshot of replicated volume %s refused: %s. Repair '
                     'it on its compute host (spdk-vhost-replicas repair) '
                     'and retry' % (volume.id, why))
        LOG.info('Snapshot of volume %(vol)s taken on its own copy, in '
                 'sync with its %(count)d others', {'vol': volume.id,
                                                    'count': len(others)})
        return taken

    def clone(self, volume, snap_alias, alias, limits, rb):
        """Make the other copies of ``volume``, cloned as ``alias``.

        Every copy comes from ``snap_alias``, the one snapshot the own
        copy ``alias`` was cloned from, so they are identical; each then
        has its inherited superblock wiped.
        """
        if self.copies(volume) == 1:
            return
        self._wipe(self.exporter, self.pools.lvol(alias), volume.id)
        self._copy_to_peers(volume, self.pools.lvol(snap_alias),
                            self.place(volume, limits, rb))

    def recount(self, volume, lvol, copies, limits, rb):
        """Give detached ``volume`` (own copy ``lvol``) ``copies`` copies.

        Between 2 and 3 only: a single copy's data starts at offset 0,
        not after the superblock. A lost copy, one no peer of
        ``spdk_replica_targets`` holds (its target taken out of the list
        for good, or its lvol gone), is made anew too. The copies left
        must be in sync (their superblocks say so); a new one is copied
        from a snapshot of the own copy, a dropped one deleted. Then
        every superblock is wiped: a mirror cannot change its members,
        and SPDK's examine would wait for ever for a lost one the old
        superblocks name, so the next attach builds a new mirror over
        the identical copies.
        """
        held = self.holders(volume)
        if len(held) + 1 == copies == self.copies(volume):
            return
        heads = self._in_sync(volume, lvol, held,
                              'changing or replacing its copies')
        if copies > len(held) + 1:
            self._add_copies(volume, lvol, copies - len(held) - 1, limits,
                             rb, [peer for peer, _copy in held])
        kept = [(self.exporter, lvol)] + [
            (peer.exporter, copy) for peer, copy in held[:copies - 1]]
        for (exporter, copy), head in zip(kept, heads):
            if head is not None:
                self._wipe(exporter, copy, volume.id)
        for peer, copy in held[copies - 1:]:
            peer.pools.delete_lvol(copy.alias)
            LOG.info('Dropped the copy of volume %(vol)s on %(peer)s',
                     {'vol': volume.id, 'peer': peer})

    def replace_lost(self, volume, lvol, limits, rb, in_use=False):
        """Make anew the lost copies of ``volume``; whether it has all now.

        Attached nowhere, a new copy is the own copy's data
        (:meth:`recount`); one that cannot be, because the own copy lacks
        writes another copy holds, stays lost: the compute host's mirror
        starts from the copies left, and a repair there must come first.
        ``in_use`` (a live migration's destination), it is made empty
        instead (:meth:`_place_empty`), for the compute host to rebuild.
        """
        held = self.holders(volume)
        lost = self.copies(volume) - 1 - len(held)
        if lost <= 0:
            return True
        LOG.warning('Volume %(vol)s lost %(lost)d of its %(wanted)d copies '
                    '(no target of spdk_replica_targets holds them): '
                    'making them anew %(how)s',
                    {'vol': volume.id, 'lost': lost,
                     'wanted': self.copies(volume),
                     'how': 'empty, for its compute host to rebuild once '
                            'the guest runs there' if in_use else
                            'from its copy on %s' % self.target_id})
        try:
            if in_use:
                return self._place_empty(volume, lvol, held, lost, limits,
                                         rb)
            self.recount(volume, lvol, self.copies(volume), limits, rb)
        except OutOfSync as err:
            LOG.warning('%s; it is attached with the copies left', err)
            return False
        return True

    def _place_empty(self, volume, lvol, held, lost, limits, rb):
        """Place ``lost`` empty copies of in-use ``volume``; whether it did.

        Its compute host's mirror adds them, and rebuilds them from the
        copies in sync, once the guest runs there: a copy rebuilt at a
        live migration's destination before the switch would miss what
        the source still writes. Until then a new copy's missing
        superblock marks it lacking writes to every check here. It goes
        where the whole volume fits, thin or not: the rebuild writes
        every block. Nothing is made when the mirror's superblock still
        counts a lost copy in sync (its target retired before the mirror
        noticed): no mirror can start from it, and only the volume's
        next attach where it is attached nowhere else mends that
        (:meth:`recount`). Nor when no target has room: the attach gets
        the copies left rather than fail a live migration.
        """
        heads, _stale = self.superblocks(volume, lvol, held)
        absent = superblock.absent_in_sync(
            heads, [lvol.uuid] + [copy.uuid for _peer, copy in held])
        if absent:
            LOG.warning('Volume %(vol)s: its mirror\'s superblock counts '
                        'lost copies %(absent)s in sync; it is attached with '
                        'the copies left, and its copies made anew when it '
                        'is next attached nowhere else',
                        {'vol': volume.id, 'absent': ', '.join(absent)})
            return False
        try:
            self.place(volume, limits, rb, wanted=lost,
                       skip=[peer for peer, _copy in held], whole=True)
        except exception.VolumeBackendAPIException as err:
            LOG.warning('%s; it is attached with the copies left', err)
            return False
        return True

    def relayout(self, volume, lvol, type_id, limits, rb):
        """Give detached ``volume`` the copies of type ``type_id``: 1 <-> n.

        A single copy holds the guest's disk from offset 0, each of
        several from :data:`superblock.DATA_OFFSET`, so no lvol can stay:
        the disk is read out of the own copy ``lvol`` (proven in sync)
        into a staging file, and written into new lvols in the new
        layout (:meth:`write_disk`), which replace the own copy and,
        from one copy, become the others. Going to one copy, the others
        step aside, and are returned for :meth:`drop` once done. Costs a
        copy of the written data through the staging directory.
        """
        retyped = volume.obj_clone()
        retyped.volume_type_id = type_id
        with images.staging_file(image_ops.staging_dir(self.conf),
                                 'retype-%s-' % volume.id) as path:
            self.save_disk(volume, lvol, path,
                           'changing its number of copies')
            stale = [self._set_aside(peer, copy, 'retyped', rb)
                     for peer, copy in (self.every_copy(volume)
                                        if self.copies(volume) > 1 else [])]
            self.write_disk(retyped, lvol, path, limits, rb, 'retype',
                            'retyped', placed=True)
        return stale

    def check_in_sync(self, volume, lvol, doing):
        """Refuse ``doing`` from ``volume``'s own copy ``lvol`` if stale."""
        if self.copies(volume) > 1:
            self._in_sync(volume, lvol, self.every_copy(volume), doing)

    def _in_sync(self, volume, lvol, held, doing):
        """Every copy's superblock, once they prove the copies identical."""
        heads, stale = self.superblocks(volume, lvol, held)
        if stale:
            raise OutOfSync(
                data='volume %s: its copies %s are out of sync; attach it '
                     'and repair it (spdk-vhost-replicas repair) before '
                     '%s' % (volume.id, ', '.join(stale), doing))
        return heads

    def superblocks(self, volume, lvol, held):
        """Every copy's superblock, and the UUIDs of those lacking writes.

        ``lvol``: the own copy; ``held``: :meth:`holders`. Costs a
        ``spdk_dd`` read of 4 KiB per copy.
        """
        heads = [self._head(self.exporter, lvol, volume.id)] + [
            self._head(peer.exporter, copy, volume.id)
            for peer, copy in held]
        return heads, superblock.out_of_sync(
            heads, [lvol.uuid] + [copy.uuid for _p, copy in held])

    # -- the guest's disk as a raw file (backups, images) ----------------

    def save_disk(self, volume, lvol, path, doing):
        """Fill ``path`` with the guest's disk, from own copy ``lvol``.

        Refused (naming ``doing``) when that copy lacks writes; the
        scratch lvols are gone afterwards.
        """
        with rollback.Cleanup('read volume %s' % volume.id) as cleanup:
            self.check_in_sync(volume, lvol, doing)
            source = images.flat_source(self.client, lvol, volume.id,
                                        cleanup)
            self.read_disk(volume, source, lvol, path,
                           lvols.temp_name('out', volume.id))

    def read_disk(self, obj, source, lvol, path, aio_name):
        """Fill ``path`` with the guest's disk, from read-only ``source``.

        ``obj``: the volume or snapshot; ``lvol``: the lvol's size and
        block size. A replicated copy is staged whole in a scratch file
        first, then its data extents move down past the superblock's
        room. Returns the shallow copy's report.
        """
        offset = self.data_offset(obj)
        if not offset:
            return images.export_to_file(self.exporter, self.conf, source,
                                         lvol, path, aio_name, obj.id)
        with images.staging_file(image_ops.staging_dir(self.conf),
                                 'raw-%s-' % obj.id) as raw:
            info = images.export_to_file(self.exporter, self.conf, source,
                                         lvol, raw, aio_name, obj.id)
            sparse.shifted_copy(raw, path, offset, 0,
                                lvol.size_bytes - offset)
        return info

    def write_disk(self, volume, old, path, limits, rb, scratch, tag,
                   placed=False):
        """Make raw ``path``, the guest's disk, every copy of ``volume``.

        A new thin lvol (first the scratch lvol of kind ``scratch``, which
        a retry finds and replaces) takes the place of each copy: the own
        copy ``old`` is set aside under ``tag`` and deleted
        (:meth:`pools.Pools.replace`); the others are set aside and
        returned, for :meth:`drop` once the operation is done, or, with
        ``placed``, made anew where :meth:`place` puts them. A
        replicated volume's copies get the data after the superblock's
        room, left zero, so the next attach mirrors them afresh.
        """
        size = self.lvol_mib(volume) * lvols.MIB
        with self._at_offset(path, volume, size) as path:
            store = self.client.bdev_lvol_get_lvstores(lvs_name=old.lvs)[0]
            images.pad(path, store['cluster_size'])
            alias = images.import_file(
                self.client, self.exporter, self.conf, path, old.lvs,
                lvols.temp_name(scratch, volume.id), volume.id,
                store['cluster_size'], rb)
            stale = self._rewrite_peers(volume, path, limits, rb, placed)
        alias = self.pools.replace(old, alias, volume, limits, rb, tag,
                                   self.lvol_mib(volume))
        if not self.conf.spdk_thin_provision:
            self.client.bdev_lvol_inflate(alias)
        return stale

    @contextlib.contextmanager
    def _at_offset(self, path, volume, size):
        """``path``, or a scratch copy with the data where copies hold it.

        The copy is ``size`` bytes, a whole copy's.
        """
        offset = self.data_offset(volume)
        if not offset:
            yield path
            return
        with images.staging_file(image_ops.staging_dir(self.conf),
                                 'raw-%s-' % volume.id) as raw:
            sparse.shifted_copy(path, raw, 0, offset, size)
            yield raw

    def revert(self, volume, snap, alias, limits, rb):
        """Make the other copies ``snap``'s again, as new own copy ``alias``.

        Each old copy steps aside (renamed, undone by ``rb``) for a new
        lvol holding the snapshot's bytes; the own copy's inherited
        superblock is wiped, as a clone's. Returns the old copies, for
        :meth:`drop` once the own copy is replaced too.
        """
        if self.copies(volume) == 1:
            return []
        self._wipe(self.exporter, self.pools.lvol(alias), volume.id)
        stale, made = self._renew(volume, limits, rb, 'reverted')
        self._copy_to_peers(volume, snap, made)
        return stale

    def _rewrite_peers(self, volume, path, limits, rb, placed):
        """Make the other copies hold raw ``path``, as :meth:`revert` does.

        ``path``: a whole copy's bytes, its superblock's room left zero;
        ``placed``: new copies, none set aside.
        """
        if self.copies(volume) == 1:
            return []
        if placed:
            stale, made = [], self.place(volume, limits, rb)
        else:
            stale, made = self._renew(volume, limits, rb, 'restored')
        remote_copy.copy_file(self.conf, path, [
            (peer, peer.pools.lvol(alias)) for peer, alias in made],
            volume.id)
        return stale

    def _renew(self, volume, limits, rb, why):
        """A new empty lvol in place of each other copy, the old set aside.

        Returns the old ones (peer, alias) and the new (peer, alias).
        """
        stale, made = [], []
        for peer, old in self.every_copy(volume):
            stale.append(self._set_aside(peer, old, why, rb))
            made.append((peer, self._new_copy(peer, old.lvs, volume, limits,
                                              rb)))
        return stale, made

    @staticmethod
    def _set_aside(peer, copy, why, rb):
        """Rename ``copy`` to ``<name>-<why>`` (undone by ``rb``)."""
        name = '%s-%s' % (copy.name, why)
        peer.pools.rename(copy.alias, name, rb)
        return peer, lvols.alias(copy.lvs, name)

    def drop(self, stale):
        """Delete the copies :meth:`revert` or :meth:`write_disk` set aside."""
        for peer, alias in stale:
            peer.pools.delete_lvol(alias)

    def _add_copies(self, volume, lvol, count, limits, rb, skip):
        """``count`` new copies from a snapshot of the own copy."""
        frozen = lvols.alias(lvol.lvs, lvols.temp_name('copy-src', volume.id))
        with rollback.Cleanup('copy volume %s' % volume.id) as cleanup:
            with cleanup.change('delete snapshot %s' % frozen,
                                self.pools.delete_lvol, frozen):
                self.client.bdev_lvol_snapshot(lvol.alias,
                                               frozen.partition('/')[2])
            self._copy_to_peers(volume, self.pools.lvol(frozen),
                                self.place(volume, limits, rb, count, skip))

    def _copy_to_peers(self, volume, snap, made):
        """Copy ``snap`` into each new copy; [(peer, lvol)] of them."""
        copies = [(peer, peer.pools.lvol(alias)) for peer, alias in made]
        remote_copy.copy_snapshot(self.exporter, self.conf, snap, copies,
                                  volume.id)
        return copies

    # -- changes to every copy -------------------------------------------

    def delete(self, volume):
        """Delete every other copy; one that a host still uses is busy."""
        held = self.holders(volume)
        for peer, lvol in held:
            peer.pools.refuse_if_exported(lvol, volume)
        for peer, lvol in held:
            peer.pools.delete_lvol(lvol.alias)
            if any(lvol.rate_limits.values()):
                peer.pools.persist(pools.QOS_SUBSYSTEMS)
            LOG.info('Deleted the copy of volume %(vol)s on %(peer)s',
                     {'vol': volume.id, 'peer': peer})

    def extend(self, volume, size_mib, limits, rb):
        for peer, lvol in self.holders(volume):
            peer.pools.grow(lvol, size_mib, limits, rb)

    def apply_qos(self, volume, limits, rb):
        for peer, lvol in self.holders(volume):
            peer.pools.apply_qos(lvol.alias, limits, rb)

    # -- attachments -----------------------------------------------------

    def export(self, volume, lvol, connector, rb, rekey, short=False):
        """Export every copy to the host; the properties' replicas part.

        A copy that is missing fails the attachment, unless ``short``:
        the guest would otherwise get fewer copies than its volume type
        promises. ``short``: the copies left will do, as they do for
        the volume's live attachment (a live migration's destination
        mirrors what its source mirrors).
        """
        host_nqn = export.require_host_nqn(connector)
        held = self.holders(volume) if short else self.every_copy(volume)
        exports = [(self.pools, volume.name, lvol, self.target_id)] + [
            (peer.pools, lvol.name, lvol, peer.target_id)
            for peer, lvol in held]
        here = connector.get('spdk_target_id')
        if here in [target for _p, _n, _l, target in exports]:
            # Its bdev examine would find the RAID superblock on the
            # lvol itself and assemble the mirror there, from one copy.
            raise exception.VolumeBackendAPIException(
                data='volume %s is replicated and the attaching host\'s '
                     'SPDK target %s holds one of its copies: attach it '
                     'on a host that holds none' % (volume.id, here))
        found = []
        for where, name, copy, target in exports:
            data = where.exporter.export(name, copy, host_nqn, rb,
                                         rekey=rekey, connector=connector,
                                         mirrored=True)
            where.persist()
            found.append(dict(data, target_id=target))
        return {'transport': wire.REPLICATED, wire.KEY: found}

    def unexport(self, volume, host_nqn):
        """Remove the host from every copy's export.

        A peer that does not answer is logged and skipped: the host is
        gone from the others, and a dead storage target must not keep a
        guest from detaching.
        """
        self.exporter.unexport(volume.name, host_nqn)
        self.pools.persist()
        name = replica_name(volume.id)
        for peer in self.peers:
            try:
                if peer.find(name) is not None:
                    peer.exporter.unexport(name, host_nqn)
                    peer.pools.persist()
            except rpc_exc.SpdkRpcError as err:
                LOG.warning('Could not remove %(host)s from the export of '
                            'volume %(vol)s on %(peer)s: %(err)s',
                            {'host': host_nqn or 'every host',
                             'vol': volume.id, 'peer': peer, 'err': err})
