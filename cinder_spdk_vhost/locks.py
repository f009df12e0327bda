"""Named external locks shared by the driver and its image paths.

Operations on one volume, snapshot or cached image base serialise on the
object's lock (oslo.concurrency file locks, so several cinder-volume
workers on one host agree too).
"""

import contextlib

from oslo_concurrency import lockutils

LOCK_PREFIX = 'cinder-spdk-vhost-'


@contextlib.contextmanager
def locked(*names):
    """Hold the named external locks, in the order given.

    Callers take a volume's lock before a snapshot's or an image base's,
    so two operations never wait on each other in opposite orders.
    """
    with contextlib.ExitStack() as stack:
        for name in names:
            stack.enter_context(lockutils.lock(
                name, lock_file_prefix=LOCK_PREFIX, external=True))
        yield


def vlock(volume_id):
    return 'volume-%s' % volume_id


def slock(snapshot_name):
    return 'snapshot-%s' % snapshot_name


def block(base_name):
    """The lock of one cached image base lvol."""
    return 'image-base-%s' % base_name
