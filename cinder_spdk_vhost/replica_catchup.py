"""Copies on a peer that was away: what they missed, caught up.

While a peer does not answer, the volume service goes on without its
copies (:mod:`replication`): a delete leaves the copy there, an extend
leaves it small, a detach leaves the host admitted to its export. No
record of that is kept: Cinder's database says what each copy should
be. Each sweep (:mod:`housekeeping`: at start, then every
``spdk_sweep_interval`` seconds) compares the copies on every peer that
answers with their volumes, under each volume's lock, and

* deletes the copy of a volume Cinder has deleted;
* grows a copy smaller than its volume (with the QoS of the new size);
* removes from a copy's export each host no attachment of the volume
  holds, when no attach or detach is under way.

Only the copies of this backend's volumes (its host's, or its
cluster's) are touched; a copy of a volume the database no longer knows
at all (purged) is logged and left to the operator. A volume whose lock
is held (an operation runs, or a dead member's lock has not expired
yet) is left for a later sweep: waiting for it would hold up the
service's start, whose first report comes after it.
"""

from cinder import context
from cinder import exception
from cinder import objects
from cinder.objects import fields
from cinder.volume import volume_utils
from oslo_log import log

from cinder_spdk_vhost import locks
from cinder_spdk_vhost import operation
from cinder_spdk_vhost import replica_type
from spdk_vhost_core import exception as rpc_exc

LOG = log.getLogger(__name__)


class Catchup(object):
    """The copies of one backend's volumes on its peers."""

    def __init__(self, replicas, host, cluster=None):
        self.replicas = replicas
        self.host = host
        self.cluster = cluster

    def peer(self, peer):
        """Catch up every copy on ``peer``; one that fails is logged."""
        ctxt = context.get_admin_context(read_deleted='yes')
        for alias, volume_id in peer.copies():
            try:
                self._copy(ctxt, peer, alias, volume_id)
            except (exception.CinderException, rpc_exc.SpdkRpcError) as err:
                LOG.warning('Could not catch up the copy of volume %(vol)s '
                            'on %(peer)s: %(err)s',
                            {'vol': volume_id, 'peer': peer, 'err': err})

    def _ours(self, volume):
        """Whether ``volume`` is this backend's (its pool aside)."""
        if self.cluster:
            where, ours = volume.cluster_name, self.cluster
        else:
            where, ours = volume.host, self.host
        return volume_utils.extract_host(where, 'backend') == ours

    def _copy(self, ctxt, peer, alias, volume_id):
        with locks.idle(locks.vlock(volume_id)) as free:
            if free:
                self._locked_copy(ctxt, peer, alias, volume_id)
            else:
                LOG.debug('Volume %(vol)s is busy: its copy on %(peer)s is '
                          'caught up at a later sweep',
                          {'vol': volume_id, 'peer': peer})

    def _locked_copy(self, ctxt, peer, alias, volume_id):
        with operation.running('catch up the copy of volume %s on %s'
                               % (volume_id, peer)) as rb:
            try:
                volume = objects.Volume.get_by_id(ctxt, volume_id)
            except exception.VolumeNotFound:
                LOG.warning('%(alias)s on %(peer)s is the copy of a volume '
                            'the database does not know: left in place',
                            {'alias': alias, 'peer': peer})
                return
            lvol = peer.pools.lvol(alias)
            if not self._ours(volume) or lvol is None:
                return
            if volume.deleted:
                LOG.info('Volume %(vol)s was deleted while %(peer)s was '
                         'away', {'vol': volume_id, 'peer': peer})
                self.replicas.delete_copy(peer, lvol, volume_id)
            elif volume.status in ('available', 'in-use'):
                self._grow(peer, lvol, volume, rb)
                self._admissions(peer, lvol, volume)

    def _grow(self, peer, lvol, volume, rb):
        wanted = replica_type.lvol_mib(volume)
        if lvol.size_mib < wanted:
            LOG.info('Growing the copy of volume %(vol)s on %(peer)s to '
                     '%(mib)d MiB: it was extended while the peer was away',
                     {'vol': volume.id, 'peer': peer, 'mib': wanted})
            peer.pools.grow(lvol, wanted, self.replicas.pools.limits(
                volume.volume_type_id, volume.size), rb)

    @staticmethod
    def _admissions(peer, lvol, volume):
        """Drop the hosts no attachment of the settled ``volume`` holds.

        An attach or detach under way (an attachment not yet attached,
        or a volume neither available nor in-use) is left alone: Cinder
        records the connector after the export.
        """
        attachments = [att for att in volume.volume_attachment
                       if not att.deleted]
        if any(att.attach_status != fields.VolumeAttachStatus.ATTACHED
               for att in attachments):
            return
        holding = {(att.connector or {}).get('nqn') for att in attachments}
        for host_nqn in peer.exporter.admitted(lvol.name):
            if host_nqn not in holding:
                LOG.info('Removing %(host)s from the export of the copy of '
                         'volume %(vol)s on %(peer)s: no attachment of the '
                         'volume holds it',
                         {'host': host_nqn, 'vol': volume.id, 'peer': peer})
                peer.exporter.unexport(lvol.name, host_nqn)
                peer.pools.persist()
