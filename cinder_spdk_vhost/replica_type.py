"""What a volume type's ``spdk:replicas`` asks for, and what it implies.

Every part of the driver asks these of a volume (or a snapshot, or a
clone's source) before it touches one of its copies: how many copies,
the name of a copy on a peer, each copy's size, where the guest's disk
starts in it, and what a replicated volume refuses. They depend on the
volume type alone, so they are functions, and ask no target anything.
"""

import uuid

from cinder import exception
from cinder.volume import volume_types

from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import superblock
from spdk_vhost_core import replicas as wire

EXTRA_SPEC = 'spdk:replicas'
PREFIX = 'replica-'


def copies_of_type(volume_type_id):
    """How many copies a volume type asks for: 1 (unset) to 3."""
    if not volume_type_id:
        return 1
    value = volume_types.get_volume_type_extra_specs(
        volume_type_id).get(EXTRA_SPEC)
    if value is None:
        return 1
    if not str(value).isdigit() or not 1 <= int(value) <= wire.MAX_REPLICAS:
        raise exception.InvalidVolumeType(
            reason='%s=%r: must be a whole number from 1 to %d'
                   % (EXTRA_SPEC, value, wire.MAX_REPLICAS))
    return int(value)


def copies(obj):
    """How many copies volume or snapshot ``obj`` has (its type's)."""
    return copies_of_type(obj.volume_type_id)


def replica_name(volume_id):
    """The lvol of a volume's copy on a peer."""
    return PREFIX + volume_id


def is_replica(name):
    return bool(name) and name.startswith(PREFIX)


def volume_of(name):
    """The volume id whose copy lvol ``name`` is, or None."""
    rest = name[len(PREFIX):] if is_replica(name) else ''
    try:
        return rest if str(uuid.UUID(rest)) == rest else None
    except ValueError:
        return None  # a copy set aside (``<name>-<why>``)


def lvol_mib(volume, size_gb=None):
    """The size of each copy: the volume's, plus the superblock's room.

    The compute host's RAID starts the guest's disk 1 MiB into each
    copy (:data:`superblock.DATA_OFFSET`): without that room a
    replicated volume would look 1 MiB smaller than it is.
    """
    size_mib = lvols.size_in_mib(size_gb or volume.size)
    if copies(volume) > 1:
        size_mib += superblock.DATA_OFFSET // lvols.MIB
    return size_mib


def data_offset(obj):
    """Where the guest's disk starts in each lvol of a volume or snapshot."""
    return superblock.DATA_OFFSET if copies(obj) > 1 else 0


def refuse(volume, what):
    """Refuse ``what`` for a replicated volume.

    What would read or write the guest's bytes in one copy (manage,
    unmanage, moves between pools), which begin after the compute
    host's RAID1 superblock.
    """
    if copies(volume) > 1:
        raise exception.VolumeDriverException(
            message='%s is not supported for volume %s: it is '
                    'replicated (%s), and its copies hold the compute '
                    'host\'s RAID1 superblock'
                    % (what, volume.id, EXTRA_SPEC))


def check_layout(source, volume):
    """Refuse a clone between a replicated and a single-copy volume."""
    if (copies(source) > 1) != (copies(volume) > 1):
        raise exception.VolumeDriverException(
            message='volume %s cannot be made from volume %s: one is '
                    'replicated (%s) and the other is not, and a '
                    'replicated volume\'s data starts after the compute '
                    'host\'s RAID1 superblock' % (volume.id, source.id,
                                                  EXTRA_SPEC))
