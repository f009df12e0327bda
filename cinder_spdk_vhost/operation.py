"""The frame of every driver operation: lock, translate, roll back.

Each public driver method that changes the target takes the locks of
the objects it touches, reports SPDK failures as the Cinder exceptions
the volume manager knows, and undoes its own changes when a later step
fails. One context manager, so no method writes that triple by hand.
"""

import contextlib

from oslo_log import log

from cinder_spdk_vhost import errors
from cinder_spdk_vhost import locks
from cinder_spdk_vhost import rollback

LOG = log.getLogger(__name__)


@contextlib.contextmanager
def running(what, *lock_names):
    """Hold ``lock_names``; yield a Rollback that runs if ``what`` fails.

    The undo steps run before the error is translated, still under the
    locks, so no other operation sees a half-made object. Its start is
    logged once the locks are held: which member of a cluster ran what.
    """
    with locks.locked(*lock_names), errors.translated(what), \
            rollback.Rollback(what) as rb:
        LOG.debug('Started: %s', what)
        yield rb
