"""Lost members back into a replicated volume's mirror, or replaced.

A member is *lost* when its mirror failed it out (its storage target
died) or never took it in (a copy Cinder made anew, empty, beside copies
whose superblocks assemble the mirror without it). :func:`readd` is the
one way one comes back, for the connector's :func:`repair` and for
``spdk-vhost-replicas`` alike: its NVMe controller is attached again if
SPDK gave it up (the raid module's examine then re-adds a member whose
superblock it recognises), else the member, still a bdev while its
controller reconnects, is added with ``bdev_raid_add_base_bdev`` once
that controller is connected; either way the mirror rebuilds it.
:func:`replace` mirrors onto a copy on another storage target instead.

The caller holds the connector's lock (:mod:`host_lock`): a repair must
not race an attach or a detach of the same volume.
"""

from oslo_log import log

from os_brick_connector import connector_errors as errors
from os_brick_connector import mirror
from os_brick_connector import nvme_initiator
from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import properties
from spdk_vhost_core import replicas as wire
from spdk_vhost_core import volume_bdev

LOG = log.getLogger(__name__)


def out_of_mirror(client, volume_id, state):
    """The volume's members out of its mirror, found on the target.

    ``[(NVMe controller, its state)]`` of the controllers named after the
    volume whose namespace (1, as Cinder exports every lvol) the mirror
    does not use: what is known without the connection properties.
    ``state``: the mirror's :func:`mirror.status`. A controller SPDK gave
    up is not there any more: the mirror's empty slots count it.
    """
    prefix = volume_id + '.'
    in_raid = set(state['members'])
    if state['rebuilding']:
        in_raid.add(state['rebuilding']['member'])
    return [(ctrl['name'], ctrl['ctrlrs'][0].get('state', 'enabled'))
            for ctrl in client.bdev_nvme_get_controllers()
            if ctrl['name'].startswith(prefix)
            and mirror.Member(ctrl['name']).bdev not in in_raid]


def _lost(client, raid, state, volume_id, props):
    """The :class:`mirror.Member` s out of ``raid`` (its ``state``).

    From the connection properties when given, else as found on the
    target (:func:`out_of_mirror`).
    """
    if props is None:
        return [mirror.Member(name)
                for name, _nvme in out_of_mirror(client, volume_id, state)]
    in_raid = mirror.configured(raid)
    return [member for member in mirror.members(props)
            if member.bdev not in in_raid]


def readd(client, volume_id, props=None, conf=None, skip=()):
    """Bring the volume's lost members back into its mirror.

    With the connection properties ``props`` (and the connector's
    ``conf``), each lost member's NVMe controller is attached again
    first, in case SPDK gave it up; one whose storage target is still
    away is left as it is, with a warning. Then the first member still
    out whose controller is connected is added back (:func:`add_back`):
    SPDK rebuilds one member at a time and refuses another meanwhile, so
    the others wait for the next repair, once that rebuild ended.
    Nothing happens to a volume not attached here (detached meanwhile),
    or while a rebuild runs. Members whose bdev is in ``skip`` are left
    out (the watcher's holds, :mod:`nova_vhost_user.rebuild_failures`).
    Returns the :class:`mirror.Member` added, or None.
    """
    name = volume_bdev.name(volume_id)
    raid = mirror.find(client, name)
    if raid is None:
        return None
    state = mirror.status(None, name, raid=raid)
    if state['rebuilding']:
        return None
    lost = [member for member in _lost(client, raid, state, volume_id, props)
            if member.bdev not in skip]
    out = [member for member in lost
           if props is None or _attach_again(client, volume_id, member,
                                             conf)]
    for member in out:
        if add_back(client, name, member):
            return member
    return None


def _attach_again(client, volume_id, member, conf):
    """Attach the member's controller if SPDK gave it up; whether still out.

    False when its storage target is still away, or when examine took
    the member back from its superblock.
    """
    try:
        nvme_initiator.attach(client, member.initiator_props(),
                              mirror.replica_conf(conf))
        client.bdev_wait_for_examine()
    except spdk_exc.SpdkRpcError as err:
        LOG.warning('Member %(bdev)s of volume %(volume)s is still '
                    'unreachable: %(err)s',
                    {'bdev': member.bdev, 'volume': volume_id, 'err': err})
        return False
    raid = mirror.find(client, volume_bdev.name(volume_id))
    if member.bdev in mirror.configured(raid):
        LOG.info('Examine re-added member %(bdev)s to volume %(volume)s '
                 'from its superblock',
                 {'bdev': member.bdev, 'volume': volume_id})
        return False
    return True


def add_back(client, raid_name, member):
    """Add ``member`` back if its NVMe controller is connected.

    A member failed out of the RAID stays a bdev while its controller
    retries; once connected, ``bdev_raid_add_base_bdev`` rebuilds it.
    Returns whether it was added.
    """
    if mirror.nvme_state(client, member.controller) != 'enabled':
        LOG.warning('Member %(bdev)s of volume %(volume)s: its NVMe '
                    'controller is not connected again yet',
                    {'bdev': member.bdev, 'volume': raid_name})
        return False
    client.bdev_raid_add_base_bdev(raid_name, member.bdev)
    LOG.info('Added member %(bdev)s back to volume %(volume)s, '
             'rebuilding', {'bdev': member.bdev, 'volume': raid_name})
    return True


def _parsed(props):
    """Connection properties as given by Cinder (a dict), checked."""
    if isinstance(props, properties.ConnectionProperties):
        return props
    return properties.ConnectionProperties(props)


def attached_raid(client, props):
    """This volume's RAID1, checked; TargetError when it is not here."""
    raid = mirror.find(client, volume_bdev.name(props.volume_id))
    if raid is None:
        raise errors.TargetError(
            target='on this host', action='to find the RAID1 of volume %s'
            % props.volume_id, reason='the volume is not attached here')
    mirror.check(raid, [member.bdev for member in mirror.members(props)])
    return raid


def repair(client, props, conf):
    """Bring lost members back into the volume's mirror; its status.

    :func:`readd` from the connection properties, once the mirror is
    found to be this volume's. Idempotent; the volume must be attached
    here (it attaches nothing for a volume that is not).
    """
    props = _parsed(props)
    attached_raid(client, props)
    readd(client, props.volume_id, props, conf)
    return mirror.status(client, volume_bdev.name(props.volume_id))


def replace(client, props, old_target_id, new_export, conf):
    """Mirror onto ``new_export`` instead of the copy on the old target.

    ``new_export``: a replica dict (a fresh lvol exported by another
    storage target, with its ``target_id``). The old member leaves the
    RAID1 if it is still in it (refused when it is the last in sync),
    the new one is attached and added, and the RAID rebuilds it; the old
    one's NVMe controller is detached. Returns the volume's new
    connection properties (a dict): the attachment's record must be
    updated with them, or a detach would leave the new controller.
    """
    props = _parsed(props)
    name = volume_bdev.name(props.volume_id)
    lost = [replica for replica in props.replicas
            if replica.target_id == old_target_id]
    if not lost:
        raise errors.InvalidConnectionProperties(
            reason='no replica on storage target %s' % old_target_id)
    data = dict(props)
    data[wire.KEY] = [
        replica.to_wire() for replica in props.replicas
        if replica.target_id != old_target_id] + [dict(new_export)]
    new_props = properties.ConnectionProperties(data)
    raid = attached_raid(client, props)
    old = mirror.Member.of(props.volume_id, lost[0])
    new = mirror.Member.of(props.volume_id, new_props.replicas[-1])
    if old.bdev in mirror.configured(raid):
        if not set(mirror.status(None, name, raid=raid)['members']) - {
                old.bdev}:
            raise errors.TargetError(
                target='on this host', action='to replace member %s'
                % old.bdev, reason='it is the last one in sync')
        client.bdev_raid_remove_base_bdev(old.bdev)
    try:
        nvme_initiator.attach(client, new.initiator_props(),
                              mirror.replica_conf(conf))
        client.bdev_wait_for_examine()
        client.bdev_raid_add_base_bdev(name, new.bdev)
    except Exception:
        nvme_initiator.detach_if_unused(client, new.initiator_props(), [],
                                        conf)
        raise
    nvme_initiator.detach_if_unused(client, old.initiator_props(), [], conf)
    LOG.info('Volume %(volume)s: its copy on %(new)s replaces the one on '
             '%(old)s, rebuilding', {'volume': props.volume_id,
                                     'new': new.replica.target_id,
                                     'old': old_target_id})
    return dict(new_props)
