"""Undo what a multi-step operation did when a later step fails.

Every driver operation that makes more than one change on the target
records an undo step after each change; if anything raises, the steps
run newest first, so no lvol, snapshot or subsystem is left behind.
"""

import contextlib

from oslo_log import log

from spdk_vhost_core import exception as rpc_exc

LOG = log.getLogger(__name__)


class Rollback(object):
    """Context manager collecting undo callables."""

    def __init__(self, what):
        self.what = what
        self._steps = []

    def add(self, description, func, *args, **kwargs):
        """Register ``func(*args, **kwargs)`` to undo the last change."""
        self._steps.append((description, func, args, kwargs))

    @contextlib.contextmanager
    def change(self, description, func, *args, **kwargs):
        """Make one change inside; its undo counts even if the answer is lost.

        A transport error (timeout, connection cut) after the request was
        sent leaves it unknown whether the target made the object, so the
        undo is registered then too; undo steps treat a missing object as
        done. Any other error means SPDK refused: nothing to undo.
        """
        try:
            yield
        except rpc_exc.SpdkTransportError:
            self.add(description, func, *args, **kwargs)
            raise
        self.add(description, func, *args, **kwargs)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        if exc_type is None or not self._steps:
            return False
        LOG.warning('%(what)s failed (%(err)s); rolling back',
                    {'what': self.what, 'err': exc_value})
        self._run()
        return False

    def _run(self):
        for description, func, args, kwargs in reversed(self._steps):
            try:
                func(*args, **kwargs)
            except rpc_exc.SpdkRpcError as err:
                # The original error matters more; this one is logged so
                # an operator can clean up by hand.
                LOG.error('Rollback of %(what)s: could not %(step)s: '
                          '%(err)s', {'what': self.what,
                                      'step': description, 'err': err})


class Cleanup(Rollback):
    """Like Rollback, but the steps run on success too.

    For scratch objects (temporary lvols, aio bdevs) that must never
    outlive the operation that made them.
    """

    def __exit__(self, exc_type, exc_value, traceback):
        self._run()
        return False
