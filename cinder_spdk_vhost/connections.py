"""Attachments: the connection_info Cinder hands to the compute host.

A compute host that shares the backend's SPDK target gets the lvol
itself (``transport: local``); any other gets a per-volume NVMe-oF
subsystem admitting its host NQN alone, and a replicated volume one
such export of each of its copies, whichever the host: the
``replicas`` of its properties (see :mod:`replication`). The
dictionary's keys are the wire format, documented once in
``spdk_vhost_core.properties.ConnectionProperties``. cinder-backup's
connector gets a staged raw file instead (see :mod:`backup`).
"""

from cinder import exception
from oslo_log import log

from cinder_spdk_vhost import backup
from cinder_spdk_vhost import export
from cinder_spdk_vhost import locks
from cinder_spdk_vhost import operation
from cinder_spdk_vhost import pools
from cinder_spdk_vhost import replica_type
from cinder_spdk_vhost import validation
from spdk_vhost_core import exception as rpc_exc
from spdk_vhost_core import replicas as wire

LOG = log.getLogger(__name__)


class Connections(pools.Part):
    """The driver's initialize_connection and terminate_connection."""

    def __init__(self, pools, backups, replicas):
        super().__init__(pools)
        self.backups = backups
        self.replicas = replicas
        self.target_id = replicas.target_id

    def _is_local(self, connector):
        return isinstance(connector, dict) and (
            connector.get('spdk_target_id') == self.target_id)

    def initialize(self, volume, connector):
        """The ``spdk_vhost`` connection_info (the wire format).

        Connector keys read (os-brick's ``get_connector_properties()``
        plus the SPDK vhost connector's additions):

        * ``spdk_target_id``: identity of the compute host's SPDK target;
          equal to this backend's ``spdk_target_id`` means hyperconverged,
          and the lvol is handed over as is (``transport: local``).
        * ``nqn``: the compute host's NVMe host NQN; the only host the
          volume's NVMe-oF subsystem admits (required unless local).

        cinder-backup's connector (no ``spdk_target_id``) for a volume
        being backed up or restored gets a staged raw file instead
        (os-brick's ``local`` protocol): see :mod:`backup`.
        """
        kind = backup.staged_kind(volume, connector)
        if kind:
            return self.backups.stage_volume(volume, kind)
        replicated = replica_type.copies(volume) > 1
        validation.check_connector(
            connector, need_nqn=replicated or not self._is_local(connector),
            need_target_id=True)
        access = 'ro' if self._read_only(volume) else 'rw'
        with operation.running('attach volume %s' % volume.id,
                               locks.vlock(volume.id)) as rb:
            lvol = self.pools.get(volume)
            data = {'volume_id': volume.id, 'bdev': lvol.alias,
                    'lvol_uuid': lvol.uuid, 'access_mode': access,
                    'block_size': lvol.block_size}
            if replicated:
                data.update(self._export_copies(volume, lvol, connector, rb))
            elif self._is_local(connector):
                data['transport'] = 'local'
            else:
                data.update(self.exporter.export(
                    volume.name, lvol, export.require_host_nqn(connector),
                    rb, rekey=not self._attached(volume, connector),
                    connector=connector))
                self.pools.persist()
        return {'driver_volume_type': 'spdk_vhost', 'data': data}

    def _export_copies(self, volume, lvol, connector, rb):
        """Export a replicated volume's copies, lost ones made anew first.

        While the volume is in use (its status, or another attachment: a
        live migration's destination) a new copy is made empty, for the
        compute host to rebuild once the guest runs there, and the
        superblocks of the copies its mirror uses stay. An attach whose
        lost copies could not be made gets the copies left; so does one
        while a peer holding a copy is away, if the mirror can start
        without it (:meth:`replica_sync.Sync.check_startable`).
        """
        held, away = self.replicas.reachable(volume)
        if away:
            self.replicas.sync.check_startable(volume, lvol, held, away)
            self.replicas.warn_away(volume, away, 'attaching')
        else:
            in_use = volume.status == 'in-use' or any(
                att.attach_status in export.ATTACHED
                for att in volume.volume_attachment)
            whole = self.replicas.counts.replace_lost(
                volume, lvol, self.pools.limits(volume.volume_type_id,
                                                volume.size),
                rb, in_use=in_use)
            held = (self.replicas.every_copy(volume) if whole
                    else self.replicas.holders(volume))
        return self._export_each_copy(
            volume, lvol, held, connector, rb,
            rekey=not self._attached(volume, connector))

    def _export_each_copy(self, volume, lvol, held, connector, rb, rekey):
        """Export the own copy and ``held`` to the host.

        Returns the properties' replicas part.
        """
        host_nqn = export.require_host_nqn(connector)
        exports = [(self.pools, volume.name, lvol, self.target_id)] + [
            (peer.pools, copy.name, copy, peer.target_id)
            for peer, copy in held]
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

    @staticmethod
    def _attached(volume, connector):
        """Whether the host already has the volume open (multiattach)."""
        return bool(export.host_attachments(
            volume, export.require_host_nqn(connector), export.ATTACHED))

    @staticmethod
    def _read_only(volume):
        if not volume.obj_attr_is_set('admin_metadata'):
            return False
        return volume.admin_metadata.get('readonly') == 'True'

    def terminate(self, volume, connector):
        """Drop the host from the subsystem, and the subsystem when empty.

        ``connector`` None (force detach) removes every host. A host with
        another attachment of the volume (a multiattach volume's other
        guest there) stays admitted: True tells Cinder so.
        """
        kind = backup.staged_kind(volume, connector)
        if kind:
            return self.backups.unstage_volume(volume, kind)
        replicated = replica_type.copies(volume) > 1
        if self._is_local(connector) and not replicated:
            return
        if connector is not None:
            validation.check_connector(connector, need_nqn=False)
        host_nqn = (connector or {}).get('nqn')
        if connector and not host_nqn:
            LOG.warning('Detaching volume %s from a connector without nqn; '
                        'nothing to remove', volume.id)
            return
        with operation.running('detach volume %s' % volume.id,
                               locks.vlock(volume.id)):
            if host_nqn and len(export.host_attachments(volume,
                                                        host_nqn)) > 1:
                LOG.info('Volume %s stays exported to %s: another of its '
                         'attachments is there', volume.id, host_nqn)
                return True
            self.exporter.unexport(volume.name, host_nqn)
            self.pools.persist()
            if replicated:
                self._unexport_peers(volume, host_nqn)

    def _unexport_peers(self, volume, host_nqn):
        """Remove the host from the export of each copy on a peer.

        A peer that does not answer is logged and skipped: the host is
        gone from the others, and a dead storage target must not keep a
        guest from detaching.
        """
        name = replica_type.replica_name(volume.id)
        for peer in self.replicas.peers:
            if peer.away:
                LOG.warning('%(host)s stays in the export of volume %(vol)s '
                            'on %(peer)s, which is away, until it answers',
                            {'host': host_nqn or 'Every host',
                             'vol': volume.id, 'peer': peer})
                continue
            try:
                if peer.find(name) is not None:
                    peer.exporter.unexport(name, host_nqn)
                    peer.pools.persist()
            except rpc_exc.SpdkRpcError as err:
                LOG.warning('Could not remove %(host)s from the export of '
                            'volume %(vol)s on %(peer)s: %(err)s',
                            {'host': host_nqn or 'every host',
                             'vol': volume.id, 'peer': peer, 'err': err})
