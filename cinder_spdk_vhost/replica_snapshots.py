"""Snapshots, clones and reverts of replicated volumes: one point in time.

A snapshot is taken of the volume's own copy alone, on the backend's
target, once its superblock and the others' prove that copy was in sync
(:meth:`Snapshots.snapshot`). Every copy of a clone, of a reverted
volume, or a new copy of a volume is then made from one snapshot: the
own copy a thin clone of it, each other copy a new thin lvol on a peer
holding its bytes (:mod:`remote_copy`, through a staging file), so no
two copies can differ, whatever the guest wrote during the snapshot.
The copies' inherited superblock is wiped: it is the source's mirror,
and the compute host makes the new volume a mirror of its own.
"""

from cinder import exception
from oslo_log import log

from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import pools
from cinder_spdk_vhost import remote_copy
from cinder_spdk_vhost import replica_type
from cinder_spdk_vhost import rollback
from cinder_spdk_vhost import superblock

LOG = log.getLogger(__name__)


class Snapshots(pools.Part):
    """A backend's replicated volumes, made from one snapshot."""

    def __init__(self, pools, replicas, sync):
        super().__init__(pools)
        self.replicas = replicas
        self.sync = sync

    def snapshot(self, volume, lvol, take):
        """Run ``take()``, the own copy's snapshot, and prove it sound.

        The compute host writes to every copy, but a copy failed out of
        its mirror, or still being rebuilt, lacks writes: its snapshot
        would not be the guest's disk. Its own superblock is read before
        the snapshot and every other copy's after
        (:func:`superblock.unsound_snapshot`); ``take`` registers the
        snapshot's undo on the operation's rollback, so a refusal leaves
        nothing. Costs a ``spdk_dd`` read of 4 KiB per copy. An away
        peer's copy is left out while another copy answers: the own
        copy's superblock alone cannot tell that it was failed out.
        """
        if replica_type.copies(volume) == 1:
            return take()
        held, away = self.replicas.reachable(volume)
        if away and not held:
            raise exception.VolumeBackendAPIException(
                data='snapshot of replicated volume %s refused: its copies '
                     'on %s do not answer, and no copy but its own is left '
                     'to prove it holds every write' % (
                         volume.id, ', '.join(map(str, away))))
        if away:
            self.replicas.warn_away(volume, away, 'taking a snapshot')
        else:
            held = self.replicas.every_copy(volume)
        before = self.sync.head(self.exporter, lvol, volume.id)
        taken = take()
        others = [self.sync.head(peer.exporter, copy, volume.id)
                  for peer, copy in held]
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
        if replica_type.copies(volume) == 1:
            return
        self.sync.wipe(self.exporter, self.pools.lvol(alias), volume.id)
        self._copy_to_peers(volume, self.pools.lvol(snap_alias),
                            self.replicas.place(volume, limits, rb))

    def revert(self, volume, snap, alias, limits, rb):
        """Make the other copies ``snap``'s again, as new own copy ``alias``.

        Each old copy steps aside (renamed, undone by ``rb``) for a new
        lvol holding the snapshot's bytes; the own copy's inherited
        superblock is wiped, as a clone's. Returns the old copies, for
        :meth:`Replicas.drop` once the own copy is replaced too.
        """
        if replica_type.copies(volume) == 1:
            return []
        self.sync.wipe(self.exporter, self.pools.lvol(alias), volume.id)
        stale, made = self.replicas.renew(volume, limits, rb, 'reverted')
        self._copy_to_peers(volume, snap, made)
        return stale

    def add_copies(self, volume, lvol, count, limits, rb, skip):
        """``count`` new copies from a snapshot of the own copy ``lvol``.

        On peers not in ``skip``; the snapshot is gone after.
        """
        frozen = lvols.alias(lvol.lvs, lvols.temp_name('copy-src', volume.id))
        with rollback.Cleanup('copy volume %s' % volume.id) as cleanup:
            with cleanup.change('delete snapshot %s' % frozen,
                                self.pools.delete_lvol, frozen):
                self.client.bdev_lvol_snapshot(lvol.alias,
                                               frozen.partition('/')[2])
            self._copy_to_peers(volume, self.pools.lvol(frozen),
                                self.replicas.place(volume, limits, rb,
                                                    count, skip))

    def _copy_to_peers(self, volume, snap, made):
        """Copy ``snap`` into each new copy; [(peer, lvol)] of them."""
        copies = [(peer, peer.pools.lvol(alias)) for peer, alias in made]
        remote_copy.copy_snapshot(self.exporter, self.conf, snap, copies,
                                  volume.id)
        return copies
