"""Replicated volumes: copies of a volume on other storage targets.

A volume type with the extra spec ``spdk:replicas`` = 2 or 3 keeps that
many *copies* of each volume, each on a different SPDK storage target (a
failure domain). The backend's own target holds the first, the *own
copy*: the volume's lvol, as for any volume. Each other copy is an lvol
named ``replica-<volume id>`` on a *peer*, one of the targets named in
``spdk_replica_targets`` (:mod:`peers`), those with the most free space
first. Every copy is exported to the attaching host over NVMe-oF (each
a *replica* of the connection properties, :mod:`connections`), and the
compute host mirrors them into a RAID1 (the wire format:
:mod:`spdk_vhost_core.replicas`).

Which peers hold a volume's copies is found by name on each, so there
is no record to go stale. A peer that does not answer (its storage node
is down) is *away*: what can finish on the copies left goes on without
it (detach, delete, extend, a snapshot the other copies prove sound, an
attach whose mirror can start without it), and its copies catch up on
what they missed when it answers again (:mod:`replica_catchup`); what
would leave a volume with fewer copies than its type promises (a create,
a clone, a retype, a revert) fails, with what it made undone, naming
the away peer.

:class:`Replicas` is the driver's one handle on them. It places the
copies and keeps them in step with the volume (create, extend, QoS,
delete), and holds the parts that do the rest, one job each:

* :mod:`replica_type`: how many copies a type asks for, their names,
  size and layout (no RPC);
* :mod:`replica_sync`: the compute host's RAID1 superblock at the start
  of each copy (:mod:`superblock`), read to prove which copies hold
  every write, or wiped;
* :mod:`replica_snapshots`: a snapshot of the own copy alone, proven in
  sync, and every copy of a clone, or of a reverted volume, made from
  that one snapshot (:mod:`remote_copy` for the peers), so no two copies
  can differ whatever the guest wrote meanwhile;
* :mod:`replica_disk`: the guest's disk as a raw file (backups, images,
  restores), read from and written past the superblock's room;
* :mod:`replica_counts`: a new number of copies (retype), and the lost
  copies, those no peer holds any more (its target retired, or its lvol
  store gone), made anew at the volume's next attach.
"""

from cinder import exception
from oslo_log import log

from cinder_spdk_vhost import export
from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import pools
from cinder_spdk_vhost import replica_counts
from cinder_spdk_vhost import replica_disk
from cinder_spdk_vhost import replica_snapshots
from cinder_spdk_vhost import replica_sync
from cinder_spdk_vhost import replica_type
from cinder_spdk_vhost import superblock
from spdk_vhost_core import exception as rpc_exc

LOG = log.getLogger(__name__)


class Replicas(pools.Part):
    """A backend's replicated volumes: their copies on its peers."""

    def __init__(self, pools, peers, target_id):
        super().__init__(pools)
        self.peers = peers
        self.target_id = target_id
        self.sync = replica_sync.Sync(pools, self)
        self.snapshots = replica_snapshots.Snapshots(pools, self, self.sync)
        self.disk = replica_disk.Disk(pools, self, self.sync)
        self.counts = replica_counts.Counts(pools, self, self.sync,
                                            self.snapshots, self.disk)

    def check_room(self, volume):
        """Refuse a type asking for more copies than there are targets."""
        wanted = replica_type.copies(volume)
        if wanted > 1 + len(self.peers):
            raise exception.InvalidVolumeType(
                reason='%s=%d needs %d storage targets; this backend has '
                       '%d (its own and spdk_replica_targets)'
                       % (replica_type.EXTRA_SPEC, wanted, wanted,
                          1 + len(self.peers)))

    # -- placement -------------------------------------------------------

    def _candidates(self, size_gb, skip=()):
        """(room, peer, lvol store) of every peer with room for a copy.

        Room for its whole size, thin or not: a compute host that loses
        a copy rebuilds it, writing every block, and a rebuild that
        cannot fit fails, every time it is tried. The room of a
        store keeps as much for the copies placed before
        (:meth:`peers.Peer.rooms`). Peers in ``skip`` are not asked.
        """
        found = []
        for peer in self.peers:
            if peer in skip:
                continue
            try:
                room, lvs = peer.room()
            except rpc_exc.SpdkRpcError as err:
                LOG.warning('Replica target %(peer)s: %(err)s',
                            {'peer': peer, 'err': err})
                continue
            if room >= size_gb * lvols.GIB + superblock.DATA_OFFSET:
                found.append((room, peer, lvs))
        return sorted(found, key=lambda item: -item[0])

    def available(self):
        """How many copies a new 1 GiB volume could have now."""
        return 1 + len(self._candidates(1))

    def place(self, volume, limits, rb, wanted=None, skip=()):
        """Make the volume's other copies, each on its own peer.

        ``wanted``: how many (all but its own, by default), on peers not
        in ``skip`` with room for them (:meth:`_candidates`); returns
        [(peer, alias)] of those made.
        """
        if wanted is None:
            wanted = replica_type.copies(volume) - 1
        if not wanted:
            return []
        # Nor those away: asked again, each would cost its connection
        # retries once more (Cinder's reschedules of a create too).
        found = self._candidates(volume.size, skip=set(skip) | {
            peer for peer in self.peers if peer.away})
        if len(found) < wanted:
            raise exception.VolumeBackendAPIException(
                data='volume %s needs %d copies on other storage targets; '
                     'only %d of spdk_replica_targets (%s) answer with '
                     'room for it' % (volume.id, wanted, len(found),
                                      ', '.join(map(str, self.peers))))
        made = [(peer, self.new_copy(peer, lvs, volume, limits, rb))
                for _free, peer, lvs in found[:wanted]]
        LOG.info('Volume %(vol)s has copies on %(targets)s',
                 {'vol': volume.id, 'targets': ', '.join(
                     [self.target_id] + [str(peer) for _f, peer, _l
                                         in found[:wanted]])})
        return made

    def new_copy(self, peer, lvs, volume, limits, rb):
        """An empty copy of ``volume`` on ``peer``, with its QoS; alias."""
        alias = peer.pools.create_lvol(
            volume, rb, name=replica_type.replica_name(volume.id), lvs=lvs,
            size_mib=replica_type.lvol_mib(volume))
        peer.pools.new_qos(alias, limits)
        return alias

    def holders(self, volume, silent=None):
        """(peer, lvol) of each copy; a peer that does not answer raises.

        ``silent``: a set of peers not to ask, to which one that does not
        answer is added (with a warning) instead: a survey, or an
        operation that can do without it, goes on.
        """
        name = replica_type.replica_name(volume.id)
        found = []
        for peer in self.peers:
            if silent is not None and peer in silent:
                continue
            try:
                lvol = peer.find(name)
            except rpc_exc.SpdkRpcError as err:
                if silent is None:
                    raise exception.VolumeBackendAPIException(
                        data='volume %s: replica target %s does not answer: '
                             '%s' % (volume.id, peer, err)) from err
                LOG.warning('Replica target %(peer)s: %(err)s',
                            {'peer': peer, 'err': err})
                silent.add(peer)
                continue
            if lvol is not None:
                found.append((peer, lvol))
        return found

    def reachable(self, volume):
        """(held, away): the copies that answer, and the away peers.

        ``away``: the peers that did not answer, now or a moment ago
        (:class:`peers.Peer`), when a copy is missing from the others
        (sorted; [] when every copy answered).
        """
        silent = {peer for peer in self.peers if peer.away}
        held = self.holders(volume, silent)
        if len(held) + 1 >= replica_type.copies(volume):
            return held, []
        return held, sorted(silent, key=str)

    def copies_left(self, volume, doing):
        """:meth:`reachable`'s held copies; ``doing`` logged if any away."""
        held, away = self.reachable(volume)
        if away:
            self.warn_away(volume, away, doing)
        return held

    @staticmethod
    def warn_away(volume, away, doing):
        """Log that ``doing`` goes on without the copies on ``away``."""
        LOG.warning('Volume %(vol)s: %(doing)s without its copies on '
                    '%(away)s, which do not answer; they catch up when '
                    'they answer again', {
                        'vol': volume.id, 'doing': doing,
                        'away': ', '.join(map(str, away))})

    @staticmethod
    def refuse_away(volume, away, doing='this operation'):
        """Fail ``doing``, which needs the copies on ``away``, if any."""
        if away:
            raise exception.VolumeBackendAPIException(
                data='volume %s: %s needs its copies on %s, which do not '
                     'answer' % (volume.id, doing,
                                 ', '.join(map(str, away))))

    def every_copy(self, volume):
        """:meth:`holders`; a missing copy or an away peer raises."""
        held, away = self.reachable(volume)
        self.refuse_away(volume, away)
        wanted = replica_type.copies(volume)
        if len(held) + 1 < wanted:
            raise exception.VolumeBackendAPIException(
                data='volume %s has %d of its %d copies (on %s)'
                     % (volume.id, len(held) + 1, wanted,
                        ', '.join([self.target_id] +
                                  [str(peer) for peer, _l in held])))
        return held

    # -- copies set aside, made anew -------------------------------------

    def renew(self, volume, limits, rb, why):
        """A new empty lvol in place of each other copy, the old set aside.

        Returns the old ones (peer, alias) and the new (peer, alias).
        """
        stale, made = [], []
        for peer, old in self.every_copy(volume):
            stale.append(self.set_aside(peer, old, why, rb))
            made.append((peer, self.new_copy(peer, old.lvs, volume, limits,
                                             rb)))
        return stale, made

    @staticmethod
    def set_aside(peer, copy, why, rb):
        """Rename ``copy`` to ``<name>-<why>`` (undone by ``rb``)."""
        name = '%s-%s' % (copy.name, why)
        peer.pools.rename(copy.alias, name, rb)
        return peer, lvols.alias(copy.lvs, name)

    def drop(self, stale):
        """Delete the copies set aside (:meth:`set_aside`), once done."""
        for peer, alias in stale:
            peer.pools.delete_lvol(alias)

    # -- changes to every copy -------------------------------------------

    def delete(self, volume):
        """Delete every other copy of ``volume``, exported to no host.

        The driver refused already if a host uses the volume (its own
        copy's export says so): an export of another copy is one a
        detach left while its peer was away. An away peer's copy goes
        when it answers again.
        """
        for peer, lvol in self.copies_left(volume, 'deleting'):
            self.delete_copy(peer, lvol, volume.id)

    @staticmethod
    def delete_copy(peer, lvol, volume_id):
        """Delete one copy, its export, and its QoS in the saved config."""
        if peer.exporter.admitted(lvol.name):
            LOG.warning('Removing the export of the copy of volume %(vol)s '
                        'on %(peer)s, left by a detach while it was away',
                        {'vol': volume_id, 'peer': peer})
            peer.exporter.unexport(lvol.name, None)
            peer.pools.persist()
        peer.pools.delete_lvol(lvol.alias)
        if any(lvol.rate_limits.values()):
            peer.pools.persist(pools.QOS_SUBSYSTEMS)
        LOG.info('Deleted the copy of volume %(vol)s on %(peer)s',
                 {'vol': volume_id, 'peer': peer})

    def extend(self, volume, lvol, size_gb, limits, rb):
        """Grow the other copies of ``volume`` (own copy ``lvol``, grown).

        An away peer's grows when it answers again. A detached volume's
        superblocks are told the new size too (:meth:`Sync.resize`).
        """
        if replica_type.copies(volume) == 1:
            return
        held = self.copies_left(volume, 'extending')
        size_mib = replica_type.lvol_mib(volume, size_gb)
        for peer, copy in held:
            self._check_growth(volume, peer, copy, size_gb, size_mib)
        for peer, copy in held:
            peer.pools.grow(copy, size_mib, limits, rb)
        if not any(att.attach_status in export.LIVE
                   for att in volume.volume_attachment):
            self.sync.resize(volume, lvol, held, size_gb, rb)

    @staticmethod
    def _check_growth(volume, peer, copy, size_gb, size_mib):
        """Refuse growing a copy whose rebuild would then not fit."""
        more = (size_mib - copy.size_mib) * lvols.MIB
        room = peer.rooms().get(copy.lvs, 0)
        if more > room:
            raise exception.VolumeBackendAPIException(
                data='volume %s cannot grow to %d GiB: its copy on %s would '
                     'need %d MiB more room in lvol store %s for a rebuild '
                     '(which writes every block) to fit, and it has %d MiB; '
                     'make room there first' % (
                         volume.id, size_gb, peer, more // lvols.MIB,
                         copy.lvs, max(0, room) // lvols.MIB))

    def apply_qos(self, volume, limits, rb):
        held, away = self.reachable(volume)
        self.refuse_away(volume, away, 'a change of QoS limits')
        for peer, lvol in held:
            peer.pools.apply_qos(lvol.alias, limits, rb)
