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
stall, no error. Detach deletes the RAID (the superblocks stay on the
replicas: they are the volume's) and then each replica's NVMe controller.
"""

import hashlib

from oslo_log import log

from os_brick_connector import connector_errors as errors
from os_brick_connector import nvme_initiator
from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import replicas as wire
from spdk_vhost_core import volume_bdev

LOG = log.getLogger(__name__)

LEVEL = 'raid1'
_TAG_LEN = 8
ONLINE = 'online'
DEGRADED = 'degraded'
OFFLINE = 'offline'


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


def _members(props):
    """(initiator properties, namespace bdev) of each replica."""
    result = []
    for replica in props.replicas:
        data = _replica_props(props, replica)
        result.append((data, nvme_initiator.namespace_bdev(
            data['volume_id'], data.get('ns_id', 1))))
    return result


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
    if len(found) < len(wanted):
        LOG.warning('Replicated volume %(raid)s is degraded: %(found)d of '
                    '%(wanted)d replicas in its RAID1',
                    {'raid': raid['name'], 'found': len(found),
                     'wanted': len(wanted)})


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
        nvme_initiator.attach(client, data, conf)
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


def _in_use(controllers, name):
    return any(ctrl.get('backend_specific', {}).get('block', {}).get(
        'bdev') == name for ctrl in controllers)


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
        try:
            client.call('bdev_raid_delete', {'name': name})
        except spdk_exc.NotFound:
            pass
    for data, _bdev in members:
        nvme_initiator.detach_if_unused(client, data, controllers, conf)
    return True


def status(client, raid_name):
    """The state of a replicated volume's RAID1, for the operator.

    ``{'state': online|degraded|offline, 'members': [...in use...],
    'replicas': <count the RAID was made with>}``; None if it is absent.
    """
    raid = find(client, raid_name)
    if raid is None:
        return None
    members = _configured(raid)
    total = raid.get('num_base_bdevs', len(members))
    if raid.get('state') != ONLINE or not members:
        state = OFFLINE
    elif len(members) < total:
        state = DEGRADED
    else:
        state = ONLINE
    return {'state': state, 'members': members, 'replicas': total}
