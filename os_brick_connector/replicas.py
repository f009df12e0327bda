"""Attach and detach of a replicated volume: a mirror over its replicas.

Each replica (:mod:`spdk_vhost_core.replicas`) is attached with the
NVMe-oF initiator like a single remote volume, under the NVMe controller
of its member (:mod:`mirror`), with the replicas' own reconnect settings
(``nvme_replica_*``): when a storage target dies, I/O to its member
fails once their fast-fail timeout has passed, and SPDK's raid1 fails
that member and goes on, degraded, with the others; the guest sees a
stall of seconds, no error, while single-copy volumes keep riding out a
storage target upgrade.

The RAID1's superblock is what makes the mirror durable: SPDK writes it
to every member, and when the members are attached again (a retried
connect, a restart of this target) the raid module's examine assembles
the RAID by itself. So it is looked for after the attaches and reused
when its members are this volume's; it is created only when no member
carried one. SPDK does not write a superblock RAID into its saved config
(the superblock is its config): a restarted target replays the NVMe
attaches and the RAID comes back from them. Detach deletes the RAID (the
superblocks stay on the copies: they are the volume's) and then each
member's NVMe controller, each in its own attempt, so one that fails
does not keep the others attached. A lost member comes back with
:mod:`mirror_repair`.
"""

from oslo_log import log

from os_brick_connector import attempts
from os_brick_connector import connector_errors as errors
from os_brick_connector import mirror
from os_brick_connector import nvme_initiator
from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import volume_bdev

LOG = log.getLogger(__name__)


def served(client, props, bdev):
    """Whether ``bdev`` (a controller's) is this volume's mirror."""
    if bdev != volume_bdev.name(props.volume_id):
        return False
    raid = mirror.find(client, bdev)
    if raid is None:
        return False
    try:
        mirror.check(raid, [member.bdev for member in mirror.members(props)])
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
    members = mirror.members(props)
    for member in members:
        nvme_initiator.attach(client, member.initiator_props(),
                              mirror.replica_conf(conf))
    wanted = [member.bdev for member in members]
    # A member with a superblock is examined as it appears; let every
    # examine end before telling whether the RAID exists.
    client.bdev_wait_for_examine()
    raid = mirror.find(client, name)
    if raid is None:
        client.bdev_raid_create(name, mirror.LEVEL, wanted, superblock=True)
        LOG.info('Mirrored the %(count)d replicas of volume %(volume)s',
                 {'count': len(wanted), 'volume': props.volume_id})
    else:
        mirror.check(raid, wanted)
        LOG.info('Reusing the RAID1 of volume %s: the superblocks on '
                 'its members re-assembled it', props.volume_id)
    return name


def release(client, props, conf, controllers=None):
    """Delete the RAID1, then detach every member; unless still in use.

    ``controllers``: ``vhost_get_controllers`` after this attachment's
    controller went (asked when not given). Each member is detached in
    an attempt of its own: the first failure is raised once every member
    was tried, the others logged. A RAID that cannot be deleted keeps its
    members attached (detached under it, they would be failed out in its
    superblock). Returns whether it went.
    """
    name = volume_bdev.name(props.volume_id)
    if controllers is None:
        controllers = client.vhost_get_controllers()
    if mirror.serving(controllers, name):
        return False
    members = mirror.members(props)
    raid = mirror.find(client, name)
    foreign = raid and set(mirror.configured(raid)) - {
        member.bdev for member in members}
    if foreign:
        # Not this volume's mirror (a refused connect found it): not ours.
        LOG.warning('Leaving RAID %(raid)s in place: it mirrors %(foreign)s',
                    {'raid': name, 'foreign': ', '.join(sorted(foreign))})
    elif raid is not None:
        mirror.warn_degraded(raid, len(members))
        try:
            client.bdev_raid_delete(name)
        except spdk_exc.NotFound:
            pass
    tried = attempts.Attempts()
    for member in members:
        with tried.attempt('detaching member %s of volume %s',
                           member.controller, props.volume_id):
            nvme_initiator.detach_if_unused(client, member.initiator_props(),
                                            controllers, conf)
    tried.raise_first()
    return True
