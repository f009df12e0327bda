"""Errors of the vhost-user-blk connector, as os-brick exceptions.

Nova catches :class:`os_brick.exception.BrickException` around connector
calls, so everything the connector raises is one: its refusals, and the
shared core's errors translated by :func:`from_core` (``TargetError``
for a failure of the target), with the core's error as the cause.
"""

from os_brick import exception

from spdk_vhost_core import exception as core_exception


class TargetError(exception.BrickException):
    """The SPDK target failed a call; the SpdkRpcError is the cause."""
    message = 'SPDK target %(target)s failed %(action)s: %(reason)s'


class InvalidConnectionProperties(exception.BrickException):
    message = 'Invalid spdk_vhost connection properties: %(reason)s'


class NumaPlacementError(exception.BrickException):
    message = ('No SPDK reactor may poll a controller for a guest on NUMA '
               'node %(node)s: %(reason)s')


class InvalidQoSSpec(exception.BrickException):
    message = 'Front-end QoS spec cannot be applied in SPDK: %(reason)s'


class QoSNotApplied(exception.BrickException):
    message = ('SPDK did not apply the front-end QoS limits %(limits)s '
               'on bdev %(bdev)s: %(reason)s')


class ControllerConflict(exception.BrickException):
    message = ('vhost-blk controller %(ctrlr)s already exists but serves '
               '%(found)s, not %(wanted)s; refusing to reuse it')


class NvmeConflict(exception.BrickException):
    message = ('NVMe-oF controller %(name)s already exists for another '
               'subsystem (%(found)s, wanted %(wanted)s)')


class VolumeStillInUse(exception.BrickException):
    message = ('vhost-blk controller %(ctrlr)s still has a guest connected '
               'after %(attempts)d attempt(s) to delete it; stop the guest '
               '(or detach the disk from it) first')


class RemoteAttachUnsupported(exception.BrickException):
    message = ('This host\'s SPDK target cannot attach volumes over '
               '%(transport)s: %(reason)s')


class HostNqnMissing(exception.BrickException):
    message = ('This host has no NVMe host NQN: set [spdk_vhost] host_nqn, '
               'or create %(path)s (nvme gen-hostnqn)')


class InvalidConnectorConfig(exception.BrickException):
    message = ('Invalid [spdk_vhost] option %(option)s=%(value)r: '
               '%(reason)s')


class TargetConfigNotSaved(exception.BrickException):
    message = ('The SPDK target\'s config could not be saved to %(path)s, '
               'so the attachment would not survive a target restart: '
               '%(reason)s')


class TargetRestarted(exception.BrickException):
    message = ('The SPDK target restarted during the operation on '
               'vhost-blk controller %(ctrlr)s and came back '
               '%(state)s; retry the operation')


class NvmePathInUse(exception.BrickException):
    message = ('This host already has NVMe controller %(name)s on '
               'subsystem %(nqn)s, used by %(users)s; SPDK allows one '
               'controller per subsystem, address and host NQN')


class BdevConflict(exception.BrickException):
    message = ('bdev %(bdev)s already exists but is not the layer over '
               '%(wanted)s that the connector names after the volume; '
               'refusing to use it')


class ReplicaMismatch(exception.BrickException):
    message = ('RAID1 %(raid)s of a replicated volume is not the mirror of '
               'its replicas the connector would make (%(found)s, wanted '
               '%(wanted)s); refusing to use it')


class VolumeClaimed(exception.BrickException):
    message = ('lvol %(bdev)s is held by another SPDK module (an NVMe-oF '
               'export to another host, or another layer): it cannot be '
               'attached on its own host at the same time: %(reason)s')


def from_core(err, target, action):
    """The os-brick exception for a :mod:`spdk_vhost_core` error."""
    if isinstance(err, core_exception.InvalidProperties):
        return InvalidConnectionProperties(reason=err.reason)
    if isinstance(err, core_exception.ConfigNotSaved):
        return TargetConfigNotSaved(path=err.path, reason=err.reason)
    return TargetError(target=target, action=action, reason=err)
