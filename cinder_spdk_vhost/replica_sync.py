"""Which copies of a replicated volume hold every write: superblocks.

The compute host writes to every copy, but a copy its mirror failed
out, or is still rebuilding, lacks writes; only the mirror knows which,
and it says so in the RAID1 superblock it keeps at the start of every
copy (:mod:`superblock`). What must start from a copy that had every
write (a snapshot, a backup, an upload, a new copy, a retype) reads the
superblocks first and refuses when they do not prove it; what makes a
copy another mirror's, or a mirror's anew, wipes them.

Each read or wipe reaches the copy through a scratch NVMe-oF export of
its own, gone after: a ``spdk_dd`` run of 4 KiB per copy.
"""

import contextlib

from cinder import exception

from cinder_spdk_vhost import dd
from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import pools
from cinder_spdk_vhost import replica_type
from cinder_spdk_vhost import rollback
from cinder_spdk_vhost import superblock


class OutOfSync(exception.VolumeBackendAPIException):
    """A copy lacks writes another copy holds: none can be the source."""


class Sync(pools.Part):
    """The superblocks of a backend's replicated volumes."""

    def __init__(self, pools, replicas):
        super().__init__(pools)
        self.replicas = replicas

    @contextlib.contextmanager
    def _reached(self, exporter, lvol, volume_id):
        """spdk_dd's way to a copy, through its own export; gone after."""
        with rollback.Cleanup('reach %s' % lvol.alias) as cleanup:
            yield dd.scratch_export(exporter, lvol.uuid, volume_id, cleanup,
                                    lvol.name)

    def head(self, exporter, lvol, volume_id):
        """The RAID superblock at the start of a copy, or None."""
        return superblock.parse(self.raw_head(exporter, lvol, volume_id))

    def raw_head(self, exporter, lvol, volume_id):
        """The first :data:`superblock.HEAD_BYTES` of a copy."""
        with self._reached(exporter, lvol, volume_id) as (params, secrets):
            return dd.read_head(self.conf, params, secrets,
                                superblock.HEAD_BYTES)

    def fail_member(self, exporter, lvol, volume_id, head, member_uuid):
        """Write ``head`` with ``member_uuid`` failed out on a copy."""
        self._write(exporter, lvol, volume_id,
                    superblock.failed(head, member_uuid))

    def wipe(self, exporter, lvol, volume_id):
        """Zero the superblock a copy carries (its source's, or stale)."""
        self._write(exporter, lvol, volume_id, bytes(superblock.HEAD_BYTES))

    def _write(self, exporter, lvol, volume_id, head):
        with self._reached(exporter, lvol, volume_id) as (params, secrets):
            dd.write_head(self.conf, params, secrets, head)

    def resize(self, volume, lvol, held, size_gb, rb):
        """Tell the superblock of each copy its volume's new size.

        For a volume no mirror runs: its next one starts from them (a
        running mirror grows with its copies and rewrites them itself).
        ``lvol``: the own copy; ``held``: the others. ``rb`` writes each
        old superblock back. Costs a ``spdk_dd`` read and write of 4 KiB
        per copy that has one.
        """
        for exporter, copy in [(self.exporter, lvol)] + [
                (peer.exporter, copy) for peer, copy in held]:
            with self._reached(exporter, copy, volume.id) as reached:
                params, secrets = reached
                head = dd.read_head(self.conf, params, secrets,
                                    superblock.HEAD_BYTES)
                new = superblock.resized(head, size_gb * lvols.GIB)
                if new is None:
                    continue
                dd.write_head(self.conf, params, secrets, new)
            rb.add('write back the superblock of %s' % copy.alias,
                   self._write, exporter, copy, volume.id, head)

    def superblocks(self, volume, lvol, held):
        """Every copy's superblock, and the UUIDs of those lacking writes.

        ``lvol``: the own copy; ``held``: :meth:`Replicas.holders`.
        Costs a ``spdk_dd`` read of 4 KiB per copy.
        """
        heads = [self.head(self.exporter, lvol, volume.id)] + [
            self.head(peer.exporter, copy, volume.id)
            for peer, copy in held]
        return heads, superblock.out_of_sync(
            heads, [lvol.uuid] + [copy.uuid for _p, copy in held])

    def in_sync(self, volume, lvol, held, doing):
        """Every copy's superblock, once they prove the copies identical.

        Else :class:`OutOfSync`, naming ``doing``.
        """
        heads, stale = self.superblocks(volume, lvol, held)
        if stale:
            raise OutOfSync(
                data='volume %s: its copies %s are out of sync; attach it '
                     'and repair it (spdk-vhost-replicas repair) before '
                     '%s' % (volume.id, ', '.join(stale), doing))
        return heads

    def check_in_sync(self, volume, lvol, doing):
        """Refuse ``doing`` from ``volume``'s own copy ``lvol`` if stale."""
        if replica_type.copies(volume) > 1:
            self.in_sync(volume, lvol, self.replicas.every_copy(volume),
                         doing)

    def check_startable(self, volume, lvol, held, away):
        """Refuse to attach without the copies on the ``away`` peers...

        ...unless the compute host's mirror can start from the own copy
        ``lvol`` and the copies ``held`` (:func:`superblock.unstartable`).
        """
        heads, _stale = self.superblocks(volume, lvol, held)
        why = superblock.unstartable(
            heads, [lvol.uuid] + [copy.uuid for _p, copy in held],
            replica_type.copies(volume))
        if why:
            raise exception.VolumeBackendAPIException(
                data='volume %s cannot be attached while its copies on %s '
                     'do not answer: %s. Bring them back, or take their '
                     'targets out of spdk_replica_targets (the copies are '
                     'then made anew)' % (
                         volume.id, ', '.join(map(str, away)), why))
