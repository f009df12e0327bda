"""One member of an active-active cinder-volume cluster, in its own process.

Run by :mod:`testbed.service_process` (``tests.cinder.cluster_member:
ClusterMember``): it reads a ``cinder.conf`` as cinder-volume does
(``[DEFAULT] host`` and ``cluster``, ``[coordination] backend_url``),
starts ``cinder.coordination`` as ``cinder.service.Service.start`` does,
and takes the driver's own locks (:func:`cinder_spdk_vhost.locks.locked`)
in threads, so it keeps answering requests while one of them waits for a
lock or holds it. Every wait is on an event with a deadline.

Not eventlet-patched (importing ``cinder.cmd.volume`` would patch it):
requests arrive on a blocking pipe, which would stall green threads.
"""

import threading

from cinder.common import config  # noqa: F401 - [DEFAULT] host
from cinder import coordination
from oslo_config import cfg
from oslo_log import log

from cinder_spdk_vhost import locks

CONF = cfg.CONF
BACKEND = 'spdk'
#: What ``cinder.cmd.volume`` registers; a member's cluster is
#: ``CLUSTER@BACKEND``, as cinder-volume names it.
CONF.register_opt(cfg.StrOpt('cluster'))


class Holder(object):
    """One thread taking ``locks.locked(*names)``, holding until told.

    Its state: ``acquiring`` (about to call ``locked``, or in it),
    ``held``, ``released`` or ``failed``, each change notified.
    """

    def __init__(self, names):
        self.names = names
        self.state = 'starting'
        self.error = None
        self.changed = threading.Condition()
        self.release = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _set(self, state):
        with self.changed:
            self.state = state
            self.changed.notify_all()

    def _run(self):
        try:
            self._set('acquiring')
            with locks.locked(*self.names):
                self._set('held')
                self.release.wait()
            self._set('released')
        except Exception as err:  # the caller is told, with its text
            self.error = '%s: %s' % (type(err).__name__, err)
            self._set('failed')

    def wait_for(self, states, timeout):
        """Whether the state is one of ``states`` within ``timeout`` s."""
        with self.changed:
            reached = self.changed.wait_for(
                lambda: self.state in states + ('failed',), timeout)
        if self.error:
            raise RuntimeError('locked(%s): %s' % (self.names, self.error))
        return bool(reached)


class ClusterMember(object):
    """The member's configuration, coordinator and lock holders."""

    def __init__(self, state_dir):
        self.state_dir = state_dir
        self.holders = {}

    def close(self):
        for holder in self.holders.values():
            holder.release.set()
        for holder in self.holders.values():
            holder.thread.join(30)
        coordination.COORDINATOR.stop()

    def do_start(self, config_file):
        """Read ``config_file`` and join the coordination backend."""
        log.register_options(CONF)
        CONF(['--config-file', config_file], project='cinder',
             default_config_files=[])
        log.setup(CONF, 'cinder')
        coordination.COORDINATOR.start()
        return {'host': '%s@%s' % (CONF.host, BACKEND),
                'cluster': '%s@%s' % (CONF.cluster, BACKEND),
                'backend_url': CONF.coordination.backend_url}

    def do_lock(self, key, names, timeout):
        """Start taking the locks; return once the thread is about to."""
        holder = self.holders[key] = Holder(names)
        if not holder.wait_for(('acquiring', 'held'), timeout):
            raise RuntimeError('lock thread %s did not start' % key)

    def do_held(self, key):
        """Whether ``key``'s locks are held now (no waiting)."""
        return self.holders[key].wait_for(('held',), 0)

    def do_wait_held(self, key, timeout):
        """Whether ``key``'s locks are held within ``timeout`` seconds."""
        return self.holders[key].wait_for(('held',), timeout)

    def do_release(self, key, timeout):
        """Leave ``key``'s locks; whether they were released in time."""
        holder = self.holders.pop(key)
        holder.release.set()
        return holder.wait_for(('released',), timeout)
