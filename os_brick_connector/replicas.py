"""A replicated volume on the compute target: a RAID1 over its replicas.

Each replica (:mod:`spdk_vhost_core.replicas`) is attached with the
NVMe-oF initiator like a single remote volume, under an NVMe controller
of its own, ``<volume id>.<tag of its storage target>``: a retry, or a
list Cinder reorders, finds the same one. Their namespaces are mirrored
by a RAID1 *with a superblock* named after the volume, so its name is
the disk serial the guest sees (:mod:`spdk_vhost_core.volume_bdev`).

The superblock is what makes the mirror durable: SPDK writes it to every
member, and when the members are attached again (a retried connect, a
restart of this target) the raid module's examine assembles the RAID by
itself. So it is looked for after the attaches and reused when its
members are this volume's replicas; it is created only when no member
carried one. SPDK does not write a superblock RAID into its saved config
(the superblock is its config): a restarted target replays the NVMe
attaches and the RAID comes back from them.

When a storage target dies, I/O to its replica fails once
``nvme_fast_io_fail_timeout_sec`` has passed; SPDK's raid1 then fails
that member and goes on, degraded, with the others: the guest sees a
stall, no error. Replicas are attached with their own reconnect settings
(``nvme_replica_*``), so that this takes seconds while single-copy
volumes keep riding out a storage target upgrade. Detach deletes the RAID
(the superblocks stay on the replicas: they are the volume's) and then
each replica's NVMe controller.

A lost replica comes back with :func:`repair` once its storage target is
back: its controller is attached again if SPDK gave it up (the raid
module's examine then re-adds the member from its superblock by itself),
else the member, failed out but still there, is added with
``bdev_raid_add_base_bdev``; either way the RAID rebuilds it.
:func:`replace` mirrors onto a replica on another storage target instead.
A replica with no superblock beside others that have one (a copy Cinder
made anew, empty, at a live migration) is attached but left out of the
mirror their superblock assembles: it is added, and rebuilt, only where
the guest runs (:func:`guest`), by ``spdk-vhost-replicas``.
"""

import hashlib

from oslo_log import log

from os_brick_connector import conf_check
from os_brick_connector import connector_errors as errors
from os_brick_connector import nvme_initiator
from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import properties
from spdk_vhost_core import reconnect
from spdk_vhost_core import replicas as wire
from spdk_vhost_core import volume_bdev

LOG = log.getLogger(__name__)

LEVEL = 'raid1'
_TAG_LEN = 8
ONLINE = 'online'
DEGRADED = 'degraded'
OFFLINE = 'offline'
RUNNING = 'running'
INCOMING = 'incoming'
NO_GUEST = 'no guest'


#: The NVMe-oF initiator's option -> the one a replica's attach uses.
_REPLICA_OPTION = {conf_check.NVME_OPTIONS[field]:
                   conf_check.REPLICA_OPTIONS[field]
                   for field in reconnect.FIELDS}


class _ReplicaConf(object):
    """The connector's options as the attach of a replica reads them."""

    def __init__(self, conf):
        self._conf = conf

    def __getattr__(self, name):
        return getattr(self._conf, _REPLICA_OPTION.get(name, name))


def replica_conf(conf):
    """``conf`` with the ``nvme_replica_*`` reconnect settings in force."""
    return _ReplicaConf(conf)


def member_controller(volume_id, target_id):
    """The NVMe controller of the replica on storage target ``target_id``.

    A hash keeps it a safe SPDK and keyring name whatever the target's
    identity looks like (``tcp:<address>:<port>``).
    """
    tag = hashlib.sha256(target_id.encode('utf-8')).hexdigest()[:_TAG_LEN]
    return '%s.%s' % (volume_id, tag)


def _replica_props(props, replica):
    """What the NVMe-oF initiator takes for one replica: its own name."""
    data = dict(replica)
    data['volume_id'] = member_controller(props.volume_id,
                                          replica[wire.TARGET_ID])
    return data


def _member(props, replica):
    """(initiator properties, namespace bdev) of one replica."""
    data = _replica_props(props, replica)
    return data, nvme_initiator.namespace_bdev(data['volume_id'],
                                               data.get('ns_id', 1))


def _members(props):
    return [_member(props, replica) for replica in props.replicas]


def find(client, name):
    """The ``bdev_raid_get_bdevs`` entry of RAID ``name``, or None."""
    for raid in client.call('bdev_raid_get_bdevs', {'category': 'all'}):
        if raid['name'] == name:
            return raid
    return None


def _configured(raid):
    """The members in use: a failed or missing one has no name, or is off."""
    return [base['name'] for base in raid.get('base_bdevs_list') or ()
            if base.get('name') and base.get('is_configured', True)]


def _check(raid, wanted):
    """Refuse a RAID that is not this volume's mirror of its replicas."""
    found = _configured(raid)
    if (raid.get('raid_level') != LEVEL or not raid.get('superblock')
            or raid.get('state') != ONLINE or not found
            or not set(found) <= set(wanted)):
        raise errors.ReplicaMismatch(
            raid=raid['name'], wanted='%s over %s' % (LEVEL,
                                                      ', '.join(wanted)),
            found='%s %s over %s' % (raid.get('state'),
                                     raid.get('raid_level'),
                                     ', '.join(found) or 'nothing'))
    _warn_degraded(raid, len(wanted))


def _warn_degraded(raid, wanted):
    """The operator's log line: a mirror short of replicas."""
    state = status(None, raid['name'], raid=raid)
    if state['state'] != ONLINE or len(state['members']) < wanted:
        LOG.warning('Replicated volume %(raid)s is degraded: %(found)d of '
                    '%(wanted)d replicas in sync in its RAID1%(rebuild)s; '
                    'see spdk-vhost-replicas',
                    {'raid': raid['name'], 'found': len(state['members']),
                     'wanted': wanted,
                     'rebuild': ' (%s rebuilding, %d%%)' % (
                         state['rebuilding']['member'],
                         state['rebuilding']['percent'])
                     if state['rebuilding'] else ''})


def served(client, props, bdev):
    """Whether ``bdev`` (a controller's) is this volume's RAID1."""
    if bdev != volume_bdev.name(props.volume_id):
        return False
    raid = find(client, bdev)
    if raid is None:
        return False
    try:
        _check(raid, [name for _data, name in _members(props)])
    except errors.ReplicaMismatch:
        return False
    return True


def assemble(client, props, conf, undo):
    """Attach every replica and mirror them; the RAID1's name.

    Reuses the RAID the superblock re-assembled, if it is this volume's.
    What a failure leaves (of this call or of a later step of the
    connect) is taken apart by the one ``undo`` step added first, which
    spares everything while a vhost controller uses the RAID.
    """
    name = volume_bdev.name(props.volume_id)
    undo.append(lambda: release(client, props, conf))
    members = _members(props)
    for data, _bdev in members:
        nvme_initiator.attach(client, data, replica_conf(conf))
    wanted = [bdev for _data, bdev in members]
    # A member with a superblock is examined as it appears; let every
    # examine end before telling whether the RAID exists.
    client.call('bdev_wait_for_examine')
    raid = find(client, name)
    if raid is None:
        client.call('bdev_raid_create', {
            'name': name, 'raid_level': LEVEL, 'base_bdevs': wanted,
            'superblock': True})
        LOG.info('Mirrored the %(count)d replicas of volume %(volume)s',
                 {'count': len(wanted), 'volume': props.volume_id})
    else:
        _check(raid, wanted)
        LOG.info('Reusing the RAID1 of volume %s: the superblocks on '
                 'its replicas re-assembled it', props.volume_id)
    return name


def _serving(controllers, name):
    """The vhost controllers that expose bdev ``name``."""
    return [ctrl for ctrl in controllers
            if ctrl.get('backend_specific', {}).get('block', {}).get(
                'bdev') == name]


def _in_use(controllers, name):
    return bool(_serving(controllers, name))


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
                for ctrl in _serving(client.vhost_get_controllers(), name)
                for session in ctrl.get('sessions') or ()]
    if any(session.get('started') for session in sessions):
        return RUNNING
    return INCOMING if sessions else NO_GUEST


def release(client, props, conf, controllers=None):
    """Delete the RAID1, then detach every replica; unless still in use.

    ``controllers``: ``vhost_get_controllers`` after this attachment's
    controller went (asked when not given). Returns whether it went.
    """
    name = volume_bdev.name(props.volume_id)
    if controllers is None:
        controllers = client.vhost_get_controllers()
    if _in_use(controllers, name):
        return False
    members = _members(props)
    raid = find(client, name)
    foreign = raid and set(_configured(raid)) - {bdev for _d, bdev in members}
    if foreign:
        # Not this volume's mirror (a refused connect found it): not ours.
        LOG.warning('Leaving RAID %(raid)s in place: it mirrors %(foreign)s',
                    {'raid': name, 'foreign': ', '.join(sorted(foreign))})
    elif raid is not None:
        _warn_degraded(raid, len(members))
        try:
            client.call('bdev_raid_delete', {'name': name})
        except spdk_exc.NotFound:
            pass
    for data, _bdev in members:
        nvme_initiator.detach_if_unused(client, data, controllers, conf)
    return True


def _rebuilding(raid):
    """The member a rebuild writes, and how far it got, or None."""
    process = raid.get('process') or {}
    if not process.get('target'):
        return None
    return {'member': process['target'],
            'percent': int(process.get('progress', {}).get('percent', 0))}


def status(client, raid_name, raid=None):
    """The state of a replicated volume's RAID1, for the operator.

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
    members = [name for name in _configured(raid)
               if not rebuild or name != rebuild['member']]
    total = raid.get('num_base_bdevs', len(members))
    if raid.get('state') != ONLINE or not members:
        state = OFFLINE
    elif len(members) < total:
        state = DEGRADED
    else:
        state = ONLINE
    return {'state': state, 'members': members, 'replicas': total,
            'missing': total - len(_configured(raid)),
            'rebuilding': rebuild}


def _enabled(client, name):
    """Whether NVMe controller ``name`` is connected (not reconnecting)."""
    try:
        found = client.bdev_nvme_get_controllers(name=name)[0]
    except spdk_exc.NotFound:
        return False
    return found['ctrlrs'][0].get('state', 'enabled') == 'enabled'


def _parsed(props):
    """Connection properties as given by Cinder (a dict), checked."""
    if isinstance(props, properties.ConnectionProperties):
        return props
    return properties.ConnectionProperties(props)


def _attached_raid(client, props):
    """This volume's RAID1, checked; TargetError when it is not here."""
    name = volume_bdev.name(props.volume_id)
    raid = find(client, name)
    if raid is None:
        raise errors.TargetError(
            target='on this host', action='to find the RAID1 of volume %s'
            % props.volume_id, reason='the volume is not attached here')
    return raid


def repair(client, props, conf):
    """Bring lost replicas back into the volume's RAID1; its status.

    For each replica out of the mirror: attach its NVMe controller again
    if SPDK gave it up (examine re-adds a member whose superblock it
    recognises), then add a member still out whose controller is
    connected. A replica whose storage target is still away is left as
    it is, with a warning. Idempotent; the volume must be attached here
    (it attaches nothing for a volume that is not).
    """
    props = _parsed(props)
    name = volume_bdev.name(props.volume_id)
    members = _members(props)
    _check(_attached_raid(client, props), [bdev for _d, bdev in members])
    rconf = replica_conf(conf)
    for data, bdev in members:
        if bdev in _configured(find(client, name)):
            continue
        try:
            nvme_initiator.attach(client, data, rconf)
            client.call('bdev_wait_for_examine')
        except spdk_exc.SpdkRpcError as err:
            LOG.warning('Replica %(bdev)s of volume %(volume)s is still '
                        'unreachable: %(err)s',
                        {'bdev': bdev, 'volume': props.volume_id,
                         'err': err})
            continue
        if bdev in _configured(find(client, name)):
            LOG.info('Examine re-added replica %(bdev)s to volume '
                     '%(volume)s from its superblock',
                     {'bdev': bdev, 'volume': props.volume_id})
        else:
            add_back(client, name, data['volume_id'], bdev)
    return status(client, name)


def add_back(client, raid_name, controller, bdev):
    """Add member ``bdev`` back if its NVMe controller is connected.

    A member failed out of the RAID stays a bdev while its controller
    retries; once connected, ``bdev_raid_add_base_bdev`` rebuilds it.
    Returns whether it was added.
    """
    if not _enabled(client, controller):
        LOG.warning('Replica %(bdev)s of volume %(volume)s: its NVMe '
                    'controller is not connected again yet',
                    {'bdev': bdev, 'volume': raid_name})
        return False
    client.call('bdev_raid_add_base_bdev',
                {'raid_bdev': raid_name, 'base_bdev': bdev})
    LOG.info('Added replica %(bdev)s back to volume %(volume)s, '
             'rebuilding', {'bdev': bdev, 'volume': raid_name})
    return True


def replace(client, props, old_target_id, new_export, conf):
    """Mirror onto ``new_export`` instead of the replica on the old target.

    ``new_export``: a replica dict (a fresh lvol exported by another
    storage target, with its ``target_id``). The old replica leaves the
    RAID1 if it is still in it (refused when it is the last in sync),
    the new one is attached and added, and the RAID rebuilds it; the old
    one's NVMe controller is detached. Returns the volume's new
    connection properties (a dict): the attachment's record must be
    updated with them, or a detach would leave the new controller.
    """
    props = _parsed(props)
    name = volume_bdev.name(props.volume_id)
    data = dict(props)
    data[wire.KEY] = [replica for replica in props.replicas
                      if replica[wire.TARGET_ID] != old_target_id]
    lost = [replica for replica in props.replicas
            if replica[wire.TARGET_ID] == old_target_id]
    if not lost:
        raise errors.InvalidConnectionProperties(
            reason='no replica on storage target %s' % old_target_id)
    data[wire.KEY].append(dict(new_export))
    new_props = properties.ConnectionProperties(data)
    raid = _attached_raid(client, props)
    _check(raid, [bdev for _d, bdev in _members(props)])
    old, old_bdev = _member(props, lost[0])
    new, new_bdev = _member(new_props, new_export)
    if old_bdev in _configured(raid):
        if not set(status(None, name, raid=raid)['members']) - {old_bdev}:
            raise errors.TargetError(
                target='on this host', action='to replace replica %s'
                % old_bdev, reason='it is the last one in sync')
        client.call('bdev_raid_remove_base_bdev', {'name': old_bdev})
    rconf = replica_conf(conf)
    try:
        nvme_initiator.attach(client, new, rconf)
        client.call('bdev_wait_for_examine')
        client.call('bdev_raid_add_base_bdev',
                    {'raid_bdev': name, 'base_bdev': new_bdev})
    except Exception:
        nvme_initiator.detach_if_unused(client, new, [], conf)
        raise
    nvme_initiator.detach_if_unused(client, old, [], conf)
    LOG.info('Volume %(volume)s: replica on %(new)s replaces the one on '
             '%(old)s, rebuilding', {'volume': props.volume_id,
                                     'new': new_export[wire.TARGET_ID],
                                     'old': old_target_id})
    return dict(new_props)
