"""Leftovers of interrupted work, swept while nothing uses them.

An image, backup or replica copy that was interrupted (its cinder-volume
died) leaves scratch lvols and NVMe-oF exports on the targets. Each is
named after the volume or snapshot it copied, whose lock the copy held
(:func:`locks.owner_locks`): a sweep deletes only what no running
operation holds, of this process or of another member of the cluster.
A dead member's locks expire with its coordination lease, so the
survivors sweep its leftovers at their next round: at start-up, then
every ``spdk_sweep_interval`` seconds in a task of its own (never inside
a stats report or an operation). Each round also catches up the copies
on peers that were away (:mod:`replica_catchup`).
"""

from cinder import exception
from oslo_log import log
from oslo_service import loopingcall

from cinder_spdk_vhost import dd
from spdk_vhost_core import exception as rpc_exc

LOG = log.getLogger(__name__)


class Sweeper(object):
    """The sweeps of one backend: its target's and its peers'."""

    def __init__(self, images, pools, peers, catchup):
        self.images = images
        self.pools = pools
        self.peers = peers
        self.catchup = catchup
        self._task = None

    def sweep(self):
        """One round; a target that fails is logged, the others swept."""
        rounds = [('scratch lvols and exports', self.images.sweep_scratch),
                  ('hidden snapshots', self.pools.sweep)]
        rounds += [('scratch exports on %s' % peer,
                    lambda peer=peer: dd.sweep_exports(peer.exporter))
                   for peer in self.peers]
        for what, sweep in rounds:
            self._run(what, sweep)
        for peer in self.peers:
            self.catch_up(peer)

    def catch_up(self, peer):
        """Catch up the copies on ``peer`` now (it answers again)."""
        self._run('the copies on %s' % peer,
                  lambda: self.catchup.peer(peer))

    @staticmethod
    def _run(what, sweep):
        try:
            sweep()
        except (exception.CinderException, rpc_exc.SpdkRpcError) as err:
            LOG.warning('Sweeping %(what)s failed, next round in a '
                        'while: %(err)s', {'what': what, 'err': err})

    def start(self, interval):
        """Sweep every ``interval`` seconds from now on (0: never)."""
        if not interval or self._task is not None:
            return
        self._task = loopingcall.FixedIntervalLoopingCall(self.sweep)
        self._task.start(interval=interval, initial_delay=interval,
                         stop_on_exception=False)

    def stop(self):
        if self._task is not None:
            self._task.stop()
            self._task = None
