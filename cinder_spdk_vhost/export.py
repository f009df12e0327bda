"""Who uses an lvol, and exporting it to a compute host.

A compute host whose SPDK target is this one gets the lvol itself
(``transport: local``): its connector builds the vhost controller on it.
Any other host gets one NVMe-oF subsystem per volume that admits only its
host NQN (``allow_any_host`` off), which it attaches with ``bdev_nvme``;
with ``spdk_nvmf_auth = dhchap`` the host must also hold a per-attachment
DH-HMAC-CHAP secret, returned as ``dhchap_key``, and the subsystem
proves itself with a second one, ``dhchap_ctrlr_key`` (see
:mod:`nvme_auth`).
SPDK does not stop an lvol in use from being deleted, so
:meth:`NvmfExport.users` lets the driver refuse that itself.
Each admitted host's NVMe-oF reconnect settings, from its connector
properties, are recorded for ``spdk-vhost-upgrade`` (:mod:`host_settings`).
Key files and that record are written on the target's host by its
``node`` (:mod:`spdk_vhost_core.node_state`), here or through its agent.
"""

import contextlib
import ipaddress

from cinder import exception
from cinder.objects import fields
from oslo_log import log

from cinder_spdk_vhost import target_rpcs
from spdk_vhost_core import exception as rpc_exc
from spdk_vhost_core import host_settings
from spdk_vhost_core import node_state
from spdk_vhost_core import nvme_auth
from spdk_vhost_core import properties
from spdk_vhost_core import reconnect

LOG = log.getLogger(__name__)

SERIAL_LEN = 20
MODEL = 'Cinder SPDK vhost'
# Connection-info fields of the host's and the subsystem's secrets.
KEY_FIELDS = ('dhchap_key', 'dhchap_ctrlr_key')
# Attachments whose host connection exists or is being made.
LIVE = (fields.VolumeAttachStatus.ATTACHING,
        fields.VolumeAttachStatus.ATTACHED)
ATTACHED = (fields.VolumeAttachStatus.ATTACHED,)


def _key_names(nqn, host_nqn):
    """Keyring names of the host's and the subsystem's secrets."""
    return (nvme_auth.key_name(nqn, host_nqn),
            nvme_auth.key_name(nqn, host_nqn, 'ctrlr'))


def _adrfam(address):
    try:
        return 'ipv%d' % ipaddress.ip_address(address).version
    except ValueError:
        return 'ipv4'


class NvmfExport(object):
    """The per-volume NVMe-oF subsystems of one backend."""

    def __init__(self, client, conf, node=None):
        self.client = client
        self._conf = conf
        self.node = node or node_state.from_conf(client, conf)
        # spdk_nvmf_transport = none: local attachments only, and a target
        # that may lack the nvmf_* RPCs (an SPDK vhost application).
        self.enabled = target_rpcs.exports(conf)
        # Whether the target has vhost controllers (not nvmf_tgt); the
        # driver sets it from the target's methods at start-up.
        self.has_vhost = True
        self.trtype = conf.spdk_nvmf_transport.upper()
        self.address = conf.spdk_nvmf_address
        self.port = str(conf.spdk_nvmf_port)
        self.prefix = conf.spdk_nvmf_nqn_prefix
        self.adrfam = _adrfam(self.address)
        self.auth = conf.spdk_nvmf_auth

    def nqn(self, volume_name):
        return '%s:%s' % (self.prefix, volume_name)

    def require(self, purpose):
        """Refuse ``purpose`` clearly when this backend has no NVMe-oF."""
        if not self.enabled:
            raise exception.VolumeBackendAPIException(
                data='%s needs an NVMe-oF export, and this backend has none '
                     '(spdk_nvmf_transport = none, local attachments only): '
                     'run spdk_tgt, which has both vhost and NVMe-oF, and '
                     'set spdk_nvmf_transport' % purpose)

    def users(self, lvol, volume_id=None):
        """What holds the lvol for a guest: [] when nothing does.

        An NVMe-oF namespace and a local attachment's layer
        (:mod:`spdk_vhost_core.volume_bdev`) both claim the lvol,
        which the lookup that found it already says, so an unused lvol
        costs no round trip here; naming the holder costs one, on the
        refusal path only. A vhost controller opened directly on the lvol
        (an attachment made before the layer existed) does not claim it,
        and SPDK would delete the lvol from under it: on a target with
        vhost, the volume's controller is looked up by its name.
        """
        found = []
        if lvol.claimed:
            found.append(self._claimant(lvol))
        if self.has_vhost and volume_id is not None:
            name = properties.controller_name(volume_id)
            if self.client.vhost_controller(name) is not None:
                found.append('vhost controller %s' % name)
        return found

    def _claimant(self, lvol):
        nqn = self.nqn(lvol.name)
        if self.enabled:
            try:
                self.client.nvmf_get_subsystems(nqn=nqn)
                return 'NVMe-oF subsystem %s' % nqn
            except rpc_exc.NotFound:
                pass
        return 'a bdev that claims it (a local attachment\'s layer)'

    def subsystems(self):
        """The target's NVMe-oF subsystems (none without NVMe-oF)."""
        return self.client.nvmf_get_subsystems() if self.enabled else []

    def ensure_transport(self):
        """Create the transport once; True if it was missing."""
        if not self.enabled:
            return False
        try:
            self.client.nvmf_create_transport(self.trtype)
        except rpc_exc.AlreadyExists:
            return False
        return True

    def _listen(self, nqn):
        """Add the listener; recreate the transport if the target lost it.

        A target restarted without a saved config comes back with no
        transport, and SPDK then refuses the listener (-32602).
        """
        args = (nqn, self.trtype, self.address, self.port)
        adrfam = self.adrfam.replace('ipv', 'IPv')
        try:
            self.client.nvmf_subsystem_add_listener(*args, adrfam=adrfam)
        except rpc_exc.InvalidParams:
            if not self.ensure_transport():
                raise
            LOG.warning('SPDK target %s had lost its %s transport (a '
                        'restart?): created it again', self.client.target,
                        self.trtype)
            self.client.nvmf_subsystem_add_listener(*args, adrfam=adrfam)

    def _subsystem(self, nqn):
        try:
            return self.client.nvmf_get_subsystems(nqn=nqn)[0]
        except (rpc_exc.NotFound, rpc_exc.InvalidParams):
            return None

    def _create(self, nqn, lvol, rollback):
        serial = lvol.uuid.replace('-', '')[:SERIAL_LEN]
        with rollback.change('delete subsystem %s' % nqn, self.delete, nqn):
            self.client.nvmf_create_subsystem(
                nqn, serial_number=serial, model_number=MODEL,
                allow_any_host=False, max_namespaces=1)
        ns_id = self.client.nvmf_subsystem_add_ns(nqn, lvol.uuid)
        self._listen(nqn)
        return {'hosts': [], 'namespaces': [{'nsid': ns_id}]}

    def export(self, volume_name, lvol, host_nqn, rollback, rekey=True,
               connector=None, mirrored=False):
        """Admit ``host_nqn`` to the volume's subsystem; return the data.

        Only what this call created is registered with ``rollback``.
        ``rekey`` False keeps an admitted host's DH-HMAC-CHAP secrets: a
        guest of that host still uses the connection they opened (a
        multiattach volume), and the host reuses it for this attachment.
        A host admitted now connects anew, with the reconnect settings
        its ``connector`` reports: they are recorded first (not for the
        driver's own one-off hosts, which have no connector), or, for a
        copy of a replicated volume (``mirrored``), that the host mirrors
        it (:data:`host_settings.MIRRORED`).
        """
        self.require('Attaching a volume to another host')
        nqn = self.nqn(volume_name)
        sub = self._subsystem(nqn)
        if sub is None:
            sub = self._create(nqn, lvol, rollback)
        admitted = host_nqn in [h['nqn'] for h in sub.get('hosts', [])]
        if admitted and self.auth == 'dhchap' and rekey:
            # Re-admitted with a new secret: the old one is not kept
            # anywhere Cinder could hand it out again.
            self.client.nvmf_subsystem_remove_host(nqn, host_nqn)
            admitted = False
        data = {'transport': self.trtype.lower(), 'nqn': nqn,
                'traddr': self.address, 'trsvcid': self.port,
                'adrfam': self.adrfam, 'host_nqn': host_nqn,
                'ns_id': (sub.get('namespaces') or [{'nsid': 1}])[0]['nsid']}
        if not admitted:
            if connector is not None:
                self._record(nqn, host_nqn, dict(host_settings.MIRRORED)
                             if mirrored else
                             reported_settings(connector, host_nqn),
                             rollback)
            data.update(self._add_host(nqn, host_nqn, rollback))
        return data

    def _record(self, nqn, host_nqn, settings, rollback):
        """Record the host's reconnect ``settings`` (None: unknown).

        A record that cannot be written only leaves the host unknown,
        which the upgrade command refuses naming it: not worth failing
        an attachment over.
        """
        before = self._put(nqn, host_nqn, settings)
        rollback.add('restore the reconnect settings of %s' % host_nqn,
                     self._put, nqn, host_nqn, before)

    def _put(self, nqn, host_nqn, settings):
        """Record ``settings``; what was recorded before (None: nothing)."""
        try:
            return self.node.record_host(host_nqn, nqn, settings)
        except (OSError, rpc_exc.SpdkRpcError) as err:
            LOG.warning('Cannot record the NVMe-oF reconnect settings of '
                        '%(host)s: %(err)s', {'host': host_nqn, 'err': err})
            return None

    def _add_host(self, nqn, host_nqn, rollback):
        """Admit the host, with fresh keys if auth is on; the key data.

        Two secrets: the host proves itself with ``dhchap_key``, and the
        subsystem proves itself to the host with ``dhchap_ctrlr_key``
        (bidirectional DH-HMAC-CHAP), so a host can refuse an impostor.
        """
        if self.auth != 'dhchap':
            self.client.nvmf_subsystem_add_host(nqn, host_nqn)
            rollback.add('remove host %s' % host_nqn,
                         self.client.nvmf_subsystem_remove_host, nqn,
                         host_nqn)
            return {}
        names = dict(zip(KEY_FIELDS, _key_names(nqn, host_nqn)))
        keys = {}
        for field, name in names.items():
            keys[field] = nvme_auth.generate_secret()
            with rollback.change('remove key %s' % name,
                                 self.node.remove_key, name):
                self.node.add_key(name, keys[field])
        with rollback.change('remove host %s' % host_nqn,
                             self.client.nvmf_subsystem_remove_host, nqn,
                             host_nqn):
            self.client.nvmf_subsystem_add_host(nqn, host_nqn, **names)
        return keys

    def admitted(self, volume_name):
        """The host NQNs the volume's export admits ([] if none)."""
        sub = self._subsystem(self.nqn(volume_name)) if self.enabled else None
        return [host['nqn'] for host in (sub or {}).get('hosts', [])]

    def unexport(self, volume_name, host_nqn):
        """Remove a host (all when None); drop the subsystem when empty."""
        if not self.enabled:
            return
        nqn = self.nqn(volume_name)
        sub = self._subsystem(nqn)
        if sub is None:
            return
        hosts = [h['nqn'] for h in sub.get('hosts', [])]
        leaving = hosts if host_nqn is None else [host_nqn]
        for host in leaving:
            if host in hosts:
                self.client.nvmf_subsystem_remove_host(nqn, host)
            if self.auth == 'dhchap':
                for name in _key_names(nqn, host):
                    self.node.remove_key(name)
        try:
            self.node.forget_hosts(nqn, leaving)
        except (OSError, rpc_exc.SpdkRpcError) as err:
            LOG.warning('Cannot forget the NVMe-oF reconnect settings of '
                        '%(hosts)s: %(err)s',
                        {'hosts': ', '.join(leaving), 'err': err})
        if not set(hosts) - set(leaving):
            self.delete(nqn)

    def delete(self, nqn):
        """Delete a subsystem; a missing one is -32602 and fine."""
        try:
            self.client.nvmf_delete_subsystem(nqn)
        except (rpc_exc.NotFound, rpc_exc.InvalidParams):
            LOG.debug('NVMe-oF subsystem %s was already gone', nqn)

    @contextlib.contextmanager
    def io_channel(self, lvol):
        """Hold an I/O channel open on ``lvol`` (see qos_apply)."""
        self.require('Changing the QoS limits of a volume no guest has open '
                     '(SPDK applies a change only through an open I/O '
                     'channel)')
        nqn = '%s:qos-%s' % (self.prefix, lvol.uuid)
        self.delete(nqn)
        try:
            self.client.nvmf_create_subsystem(nqn, allow_any_host=False,
                                              max_namespaces=1)
            self.client.nvmf_subsystem_add_ns(nqn, lvol.uuid)
            yield
        finally:
            self.delete(nqn)


def host_attachments(volume, host_nqn, statuses=LIVE):
    """The volume's attachments made with host ``host_nqn``'s connector.

    A multiattach volume may have several on one host (one per guest):
    they share that host's admission to the subsystem.
    """
    return [att for att in volume.volume_attachment
            if att.attach_status in statuses and
            (att.connector or {}).get('nqn') == host_nqn]


def reported_settings(connector, host_nqn=None):
    """The reconnect settings ``connector`` reports, or None (unknown).

    A compute host of an older release reports none; malformed ones are
    logged and count as none.
    """
    value = (connector or {}).get(reconnect.KEY)
    if value is None:
        return None
    try:
        return reconnect.check(value)
    except reconnect.Invalid as err:
        LOG.warning('Host %(host)s reported unusable NVMe-oF reconnect '
                    'settings (%(key)s: %(err)s): recorded as unknown',
                    {'host': host_nqn, 'key': reconnect.KEY, 'err': err})
        return None


def require_host_nqn(connector):
    nqn = (connector or {}).get('nqn')
    if not nqn:
        raise exception.InvalidConnectorException(missing='nqn')
    return nqn
