"""A replicated volume's number of copies: changed, or made whole again.

A retype between 2 and 3 copies of a detached volume adds or deletes a
copy (:meth:`Counts.recount`); one to or from a single copy moves the
data by the superblock's room, so every lvol is written anew
(:meth:`Counts.relayout`). A *lost* copy, one no peer of
``spdk_replica_targets`` holds any more (its target retired, or its
lvol store gone), is made anew at the volume's next attach
(:meth:`Counts.replace_lost`): from the own copy where the volume is
attached nowhere else, empty (for the compute host to rebuild once the
guest runs there) while it is in use, at a live migration's destination.
"""

from cinder import exception
from oslo_log import log

from cinder_spdk_vhost import image_ops
from cinder_spdk_vhost import images
from cinder_spdk_vhost import pools
from cinder_spdk_vhost import replica_sync
from cinder_spdk_vhost import replica_type
from cinder_spdk_vhost import superblock

LOG = log.getLogger(__name__)


class Counts(pools.Part):
    """How many copies a backend's replicated volumes have."""

    def __init__(self, pools, replicas, sync, snapshots, disk):
        super().__init__(pools)
        self.replicas = replicas
        self.sync = sync
        self.snapshots = snapshots
        self.disk = disk

    def recount(self, volume, lvol, copies, limits, rb):
        """Give detached ``volume`` (own copy ``lvol``) ``copies`` copies.

        Between 2 and 3 only: a single copy's data starts at offset 0,
        not after the superblock. A lost copy is made anew too. The
        copies left must be in sync (their superblocks say so); a new one
        is copied from a snapshot of the own copy, a dropped one deleted.
        Then every superblock is wiped: a mirror cannot change its
        members, and SPDK's examine would wait for ever for a lost one
        the old superblocks name, so the next attach builds a new mirror
        over the identical copies.
        """
        held = self.replicas.holders(volume)
        if len(held) + 1 == copies == replica_type.copies(volume):
            return
        heads = self.sync.in_sync(volume, lvol, held,
                                  'changing or replacing its copies')
        if copies > len(held) + 1:
            self.snapshots.add_copies(volume, lvol, copies - len(held) - 1,
                                      limits, rb,
                                      [peer for peer, _copy in held])
        kept = [(self.exporter, lvol)] + [
            (peer.exporter, copy) for peer, copy in held[:copies - 1]]
        for (exporter, copy), head in zip(kept, heads):
            if head is not None:
                self.sync.wipe(exporter, copy, volume.id)
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
        held = self.replicas.holders(volume)
        wanted = replica_type.copies(volume)
        lost = wanted - 1 - len(held)
        if lost <= 0:
            return True
        LOG.warning('Volume %(vol)s lost %(lost)d of its %(wanted)d copies '
                    '(no target of spdk_replica_targets holds them): '
                    'making them anew %(how)s',
                    {'vol': volume.id, 'lost': lost, 'wanted': wanted,
                     'how': 'empty, for its compute host to rebuild once '
                            'the guest runs there' if in_use else
                            'from its copy on %s' % self.replicas.target_id})
        try:
            if in_use:
                return self._place_empty(volume, lvol, held, lost, limits,
                                         rb)
            self.recount(volume, lvol, wanted, limits, rb)
        except replica_sync.OutOfSync as err:
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
        (:meth:`recount`). Nor when no peer has room: the attach gets
        the copies left rather than fail a live migration.
        """
        heads, _stale = self.sync.superblocks(volume, lvol, held)
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
            self.replicas.place(volume, limits, rb, wanted=lost,
                                skip=[peer for peer, _copy in held])
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
        layout (:meth:`Disk.write`), which replace the own copy and,
        from one copy, become the others. Going to one copy, the others
        step aside, and are returned for :meth:`Replicas.drop` once
        done. Costs a copy of the written data through the staging
        directory.
        """
        retyped = volume.obj_clone()
        retyped.volume_type_id = type_id
        with images.staging_file(image_ops.staging_dir(self.conf),
                                 'retype-%s-' % volume.id) as path:
            self.disk.save(volume, lvol, path,
                           'changing its number of copies')
            stale = [self.replicas.set_aside(peer, copy, 'retyped', rb)
                     for peer, copy in (
                         self.replicas.every_copy(volume)
                         if replica_type.copies(volume) > 1 else [])]
            self.disk.write(retyped, lvol, path, limits, rb, 'retype',
                            'retyped', placed=True)
        return stale
