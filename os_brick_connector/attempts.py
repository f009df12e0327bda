"""Steps that must each be tried, whatever the others do.

os-brick's ``ExceptionChainer`` pattern (its NVMe-oF connector's
``_try_disconnect_all`` gives each target its own ``context``), for
callers that must still see the error a step raised: the connector's
undo catches the core's :class:`~spdk_vhost_core.exception.SpdkRpcError`,
and its public methods translate it into os-brick's. So each failure is
logged as it happens, and the first is raised again once every step ran.
"""

import contextlib

from oslo_log import log

LOG = log.getLogger(__name__)


class Attempts(object):
    """Run each step in :meth:`attempt`; then :meth:`raise_first`."""

    def __init__(self):
        self.failures = []

    def __bool__(self):
        return bool(self.failures)

    @contextlib.contextmanager
    def attempt(self, what, *args):
        """One step, ``what % args``; a failure is kept, not raised."""
        try:
            yield
        except Exception as err:
            LOG.warning('%s failed: %s', what % args, err)
            self.failures.append(err)

    def raise_first(self):
        """Raise the first failure, if any; the others are in the log."""
        if self.failures:
            raise self.failures[0]
