"""A replicated volume's mirror on this host: its members and its state.

The compute target mirrors a replicated volume's copies in a RAID1 with
a superblock, named after the volume (:mod:`spdk_vhost_core.volume_bdev`),
so its name is the disk serial the guest sees. Each *replica* of the
connection properties (:class:`spdk_vhost_core.replicas.Replica`: one
copy's export) becomes a *member* of it: the namespace bdev of an NVMe
controller of its own, ``<volume id>.<tag of its storage target>``, so a
retry, or a list Cinder reorders, finds the same one.

What the attach, the detach, the repairs and ``spdk-vhost-replicas`` all
read of the mirror is here, so that they read it one way: which members
it uses, whether it is the volume's, its state for the operator, and
whether the guest on it runs here.
"""

import hashlib

from oslo_log import log

from os_brick_connector import conf_check
from os_brick_connector import connector_errors as errors
from os_brick_connector import nvme_initiator
from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import reconnect
from spdk_vhost_core import spdk_rpc_bdev

LOG = log.getLogger(__name__)

LEVEL = 'raid1'
_TAG_LEN = 8
ONLINE = 'online'
DEGRADED = 'degraded'
OFFLINE = 'offline'
RUNNING = 'running'
INCOMING = 'incoming'
NO_GUEST = 'no guest'

#: The NVMe-oF initiator's option -> the one a member's attach uses.
_MEMBER_OPTION = {conf_check.NVME_OPTIONS[field]:
                  conf_check.REPLICA_OPTIONS[field]
                  for field in reconnect.FIELDS}


class _ReplicaConf(object):
    """The connector's options as the attach of a member reads them."""

    def __init__(self, conf):
        self._conf = conf

    def __getattr__(self, name):
        return getattr(self._conf, _MEMBER_OPTION.get(name, name))


def replica_conf(conf):
    """``conf`` with the ``nvme_replica_*`` reconnect settings in force."""
    return _ReplicaConf(conf)


def member_controller(volume_id, target_id):
    """The NVMe controller of the member on storage target ``target_id``.

    A hash keeps it a safe SPDK and keyring name whatever the target's
    identity looks like (``tcp:<address>:<port>``).
    """
    tag = hashlib.sha256(target_id.encode('utf-8')).hexdigest()[:_TAG_LEN]
    return '%s.%s' % (volume_id, tag)


class Member(object):
    """One copy as the mirror sees it: an NVMe controller's namespace.

    ``controller`` and ``bdev`` (the RAID's base bdev); ``replica``, the
    parsed replica it attaches, or None for a member found on the target
    by its controller's name alone (namespace 1, as Cinder exports every
    lvol).
    """

    def __init__(self, controller, ns_id=1, replica=None):
        self.controller = controller
        self.bdev = nvme_initiator.namespace_bdev(controller, ns_id)
        self.replica = replica

    @classmethod
    def of(cls, volume_id, replica):
        """The member that ``replica`` of volume ``volume_id`` becomes."""
        return cls(member_controller(volume_id, replica.target_id),
                   replica.ns_id, replica)

    def initiator_props(self):
        """What the NVMe-oF initiator attaches: the replica, named."""
        return self.replica.remote(self.controller)


def members(props):
    """The :class:`Member` of each replica of ``props``, in their order."""
    return [Member.of(props.volume_id, replica) for replica in props.replicas]


def find(client, name):
    """The ``bdev_raid_get_bdevs`` entry of RAID ``name``, or None."""
    for raid in client.bdev_raid_get_bdevs():
        if raid['name'] == name:
            return raid
    return None


def mirrors(client):
    """Every replicated volume's mirror on this target, by volume id."""
    return {raid['name']: raid for raid in client.bdev_raid_get_bdevs()
            if raid.get('raid_level') == LEVEL and raid.get('superblock')}


#: The members in use: a failed or missing one has no name, or is off.
configured = spdk_rpc_bdev.raid_members


def check(raid, wanted):
    """Refuse a RAID that is not this volume's mirror of ``wanted``."""
    found = configured(raid)
    if (raid.get('raid_level') != LEVEL or not raid.get('superblock')
            or raid.get('state') != ONLINE or not found
            or not set(found) <= set(wanted)):
        raise errors.ReplicaMismatch(
            raid=raid['name'], wanted='%s over %s' % (LEVEL,
                                                      ', '.join(wanted)),
            found='%s %s over %s' % (raid.get('state'),
                                     raid.get('raid_level'),
                                     ', '.join(found) or 'nothing'))
    warn_degraded(raid, len(wanted))


def warn_degraded(raid, wanted):
    """The operator's log line: a mirror short of members in sync."""
    state = status(None, raid['name'], raid=raid)
    if state['state'] != ONLINE or len(state['members']) < wanted:
        LOG.warning('Replicated volume %(raid)s is degraded: %(found)d of '
                    '%(wanted)d members in sync in its RAID1%(rebuild)s; '
                    'see spdk-vhost-replicas',
                    {'raid': raid['name'], 'found': len(state['members']),
                     'wanted': wanted,
                     'rebuild': ' (%s rebuilding, %d%%)' % (
                         state['rebuilding']['member'],
                         state['rebuilding']['percent'])
                     if state['rebuilding'] else ''})


def _rebuilding(raid):
    """The member a rebuild writes, and how far it got, or None."""
    process = raid.get('process') or {}
    if not process.get('target'):
        return None
    return {'member': process['target'],
            'percent': int(process.get('progress', {}).get('percent', 0))}


def status(client, raid_name, raid=None):
    """The state of a replicated volume's mirror, for the operator.

    ``{'state': online|degraded|offline, 'members': [in sync],
    'replicas': <count the RAID was made with>, 'missing': <empty
    slots>, 'rebuilding': {'member', 'percent'} or None}``; None if the
    RAID is absent. A member being rebuilt is not in sync yet: the
    volume stays degraded until the rebuild ends.
    """
    if raid is None:
        raid = find(client, raid_name)
    if raid is None:
        return None
    rebuild = _rebuilding(raid)
    in_sync = [name for name in configured(raid)
               if not rebuild or name != rebuild['member']]
    total = raid.get('num_base_bdevs', len(in_sync))
    if raid.get('state') != ONLINE or not in_sync:
        state = OFFLINE
    elif len(in_sync) < total:
        state = DEGRADED
    else:
        state = ONLINE
    return {'state': state, 'members': in_sync, 'replicas': total,
            'missing': total - len(configured(raid)),
            'rebuilding': rebuild}


def serving(controllers, name):
    """The vhost controllers that expose bdev ``name``."""
    return [ctrl for ctrl in controllers
            if ctrl.get('backend_specific', {}).get('block', {}).get(
                'bdev') == name]


def guest(client, name):
    """Whether the guest on RAID ``name`` runs here, as vhost tells.

    :data:`RUNNING`: a session of its vhost controller is started, QEMU
    having started the device, which it does once the guest runs.
    :data:`INCOMING`: QEMU connected, nothing started: a live migration's
    destination before the switch, while the source still writes.
    :data:`NO_GUEST`: no QEMU connected (a guest shut off, or a live
    migration's destination before its QEMU starts).
    """
    sessions = [session
                for ctrl in serving(client.vhost_get_controllers(), name)
                for session in ctrl.get('sessions') or ()]
    if any(session.get('started') for session in sessions):
        return RUNNING
    return INCOMING if sessions else NO_GUEST


def nvme_state(client, controller):
    """NVMe controller ``controller``'s state (``enabled``: connected).

    None when SPDK has no such controller (it gave it up).
    """
    try:
        found = client.bdev_nvme_get_controllers(name=controller)[0]
    except spdk_exc.NotFound:
        return None
    return found['ctrlrs'][0].get('state', 'enabled')
