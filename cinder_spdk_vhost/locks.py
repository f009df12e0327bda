"""Named locks shared by the driver and its image paths.

Operations on one volume, snapshot or cached image base serialise on the
object's lock. cinder-volume may run active-active (several services of
one ``[DEFAULT] cluster``, on different controllers), so a host-local
file lock would let two members change one lvol at once: the locks are
``cinder.coordination``'s (tooz). With ``[coordination] backend_url`` on
etcd every member of the cluster agrees; with the default ``file://``
backend, the processes of one host do.

cinder-volume starts the coordinator before it sets up the driver. Code
that builds a driver outside cinder-volume must start
``coordination.COORDINATOR`` itself: without it every operation fails
with ``LockCreationFailed`` rather than running unlocked.
"""

import contextlib

from cinder import coordination
from oslo_config import cfg
from oslo_log import log as logging
from tooz import coordination as tooz_coordination

LOG = logging.getLogger(__name__)
#: After the coordinator's own ``cinder-``: ``cinder-spdk-vhost-volume-ID``.
LOCK_PREFIX = 'spdk-vhost-'


@contextlib.contextmanager
def locked(*names):
    """Hold the named locks: taken in the order given, released in reverse.

    Callers take a volume's lock before a snapshot's or an image base's,
    so two operations never wait on each other in opposite orders. When
    one acquire fails, the locks already taken are released.
    """
    with contextlib.ExitStack() as stack:
        for name in names:
            lock = coordination.COORDINATOR.get_lock(LOCK_PREFIX + name)
            if not lock.acquire(blocking=True):
                raise tooz_coordination.LockAcquireFailed(
                    'lock %s not acquired' % name)
            stack.callback(_release, lock, name)
        yield


@contextlib.contextmanager
def idle(*names):
    """Hold the named locks if none is held elsewhere: yields whether so.

    For housekeeping that must leave alone what a running operation (of
    this process or of another member of the cluster) uses: it takes
    nothing and yields False when any lock is busy.
    """
    with contextlib.ExitStack() as stack:
        for name in names:
            lock = coordination.COORDINATOR.get_lock(LOCK_PREFIX + name)
            if not lock.acquire(blocking=False):
                yield False
                return
            stack.callback(_release, lock, name)
        yield True


@contextlib.contextmanager
def held(name, wait=True):
    """Hold lock ``name``, waiting for it: yields True once held.

    With ``wait`` false, yields False at once when it is busy.
    """
    if wait:
        with locked(name):
            yield True
    else:
        with idle(name) as free:
            yield free


def owner_locks(scratch_name):
    """The locks an operation holds while scratch ``scratch_name`` lives.

    Scratch objects are named after the volume or snapshot they copy
    (``lvols.temp_name``): the operation holds that volume's lock, or
    the snapshot's (named by Cinder's template, as its lvol is).
    """
    obj_id = scratch_name[-36:]
    return (vlock(obj_id),
            slock(cfg.CONF.snapshot_name_template % obj_id))


def _release(lock, name):
    """Release one lock; a failure is logged, the other locks still go.

    Raising here would hide the operation's own error (Cinder's
    ``coordination.synchronized`` does the same).
    """
    try:
        if not lock.release():
            LOG.warning('Lock %s was no longer held when released', name)
    except Exception:
        LOG.exception('Failed to release lock %s', name)


def vlock(volume_id):
    return 'volume-%s' % volume_id


def slock(snapshot_name):
    return 'snapshot-%s' % snapshot_name


def block(base_name):
    """The lock of one cached image base lvol."""
    return 'image-base-%s' % base_name
