"""Tell Cinder's users which replicated volumes run degraded.

The compute host's mirror knows first when a copy is lost, and says so
(``spdk-vhost-replicas``). The volume service sees it from the storage
side and records it on the volume, where ``openstack volume show`` and
a metadata filter of the volume list find it. At each stats report
(every ``backend_stats_polling_interval``) :meth:`Health.survey` looks
at each available or in-use replicated volume of the backend:

* fewer copies found than its type promises (a target does not answer,
  or none holds the copy: lost, made anew at the volume's next attach,
  see :meth:`replica_counts.Counts.replace_lost`): degraded;
* every copy there, on a volume already marked: the copies' RAID
  superblocks (a ``spdk_dd`` read of 4 KiB each) tell whether one still
  lacks writes. It stays degraded until its compute host has rebuilt
  it; a detached volume, until it is attached and repaired. A rebuild
  writes every block, so a stale copy whose lvol store cannot take the
  rest of it would fail every time: the mark says how much room the
  store lacks;
* otherwise the mark goes.

A degraded volume carries the metadata ``spdk:replica_state =
degraded`` and ``spdk:replica_problem``, which says why; both go when
it is whole again. Superblocks are read for marked volumes only, so a
copy that a compute host failed out while its target still answers the
volume service (a fault between those two hosts alone) shows on that
compute host only.
"""

from cinder import context
from cinder.db import api as db
from cinder import exception
from cinder import objects
from oslo_log import log

from cinder_spdk_vhost import locks
from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import replica_type
from spdk_vhost_core import exception as rpc_exc

LOG = log.getLogger(__name__)

STATE = 'spdk:replica_state'
PROBLEM = 'spdk:replica_problem'
DEGRADED = 'degraded'
#: Volumes in any other state are being made, changed or deleted.
SURVEYED = ('available', 'in-use')


class Health(object):
    """The degraded marks of one backend's replicated volumes."""

    def __init__(self, replicas, host, cluster=None):
        self.replicas = replicas
        # Which volumes are the backend's: a cluster's, whichever member
        # made them, as the volume manager counts its own.
        self.filters = ({'cluster_name': cluster} if cluster else
                        {'host': host})

    def survey(self):
        """Mark, or clear, each replicated volume of the backend."""
        ctxt = context.get_admin_context()
        silent = set()
        for volume in objects.VolumeList.get_all(
                ctxt, filters=dict(self.filters, status=list(SURVEYED))):
            try:
                wanted = replica_type.copies(volume)
                if wanted == 1:
                    continue
                problem = self._problem(volume, wanted, silent)
            except (exception.CinderException, rpc_exc.SpdkRpcError) as err:
                LOG.warning('Could not check the copies of volume %(vol)s: '
                            '%(err)s', {'vol': volume.id, 'err': err})
                continue
            self._record(ctxt, volume, problem)

    def _problem(self, volume, wanted, silent):
        """Why ``volume`` (``wanted`` copies) runs degraded, or None.

        ``silent``: the peers that did not answer in this survey, which
        are not asked again.
        """
        held = self.replicas.holders(volume, silent)
        if len(held) + 1 < wanted:
            away = [str(peer) for peer in self.replicas.peers
                    if peer in silent]
            return '%d of its %d copies out of reach (%s)' % (
                wanted - 1 - len(held), wanted,
                'not answering: %s' % ', '.join(away) if away
                else 'lost: made anew when it is next attached')
        if volume.metadata.get(STATE) != DEGRADED:
            return None
        with locks.idle(locks.vlock(volume.id)) as free:
            if not free:
                # Busy (its lock may be a dead member's, until its lease
                # expires): the mark stays until a survey finds it idle.
                return volume.metadata.get(PROBLEM)
            lvol = self.replicas.pools.get(volume)
            _heads, stale = self.replicas.sync.superblocks(volume, lvol,
                                                           held)
        if not stale:
            return None
        where = {lvol.uuid: (self.replicas.target_id,
                             self.replicas.pools.client, lvol)}
        where.update((copy.uuid, (str(peer), peer.client, copy))
                     for peer, copy in held)
        stale = [where[uuid] for uuid in stale]
        problems = ['its copies on %s lack writes until its compute host '
                    'rebuilds them' % ', '.join(item[0] for item in stale)]
        for name, client, copy in stale:
            lacks = _rebuild_shortfall(client, copy)
            if lacks:
                problems.append(
                    'the copy on %s cannot be rebuilt: lvol store %s there '
                    'lacks %d MiB for it (a rebuild writes every block)'
                    % (name, copy.lvs, -(-lacks // lvols.MIB)))
        return '; '.join(problems)

    @staticmethod
    def _record(ctxt, volume, problem):
        """Write or remove the mark; a change is logged."""
        meta = volume.metadata
        if problem:
            if meta.get(STATE) == DEGRADED and meta.get(PROBLEM) == problem:
                return
            LOG.warning('Replicated volume %(vol)s is degraded: %(why)s',
                        {'vol': volume.id, 'why': problem})
            db.volume_metadata_update(ctxt, volume.id, {
                STATE: DEGRADED, PROBLEM: problem}, False)
        elif STATE in meta or PROBLEM in meta:
            LOG.info('Replicated volume %s has every copy again, in sync',
                     volume.id)
            for key in (STATE, PROBLEM):
                if key in meta:
                    db.volume_metadata_delete(ctxt, volume.id, key)


def _rebuild_shortfall(client, copy):
    """Bytes the lvol store of ``copy`` lacks for its rebuild (0: none).

    A rebuild writes every block: what the copy has not allocated yet
    must find free clusters, or the rebuild fails where they run out.
    """
    store = client.bdev_lvol_get_lvstores(lvs_name=copy.lvs)[0]
    cluster = store['cluster_size']
    return max(0, lvols.unallocated(copy, cluster) -
               store['free_clusters'] * cluster)
