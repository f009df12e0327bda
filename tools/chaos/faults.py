"""The chaos run's faults: storage nodes killed, compute targets restarted.

Every ``--fault-every`` seconds (drawn around it) one fault: a storage
node SIGKILLed and brought back after an outage of a few seconds. The
second of every :data:`COMPUTE_EVERY` faults is a compute target
SIGKILLed instead and started again at once from its saved config under
its guests, as a crash and systemd's restart would; the last of them
does both, the compute target's restart inside the storage node's
outage (it comes back without that node's controllers, which the
watcher restores once the node is back).

Before each fault every target is checked: one that died of itself is
a crash the run did not cause; it is counted, its core kept
(``testbed.spdk_target``), and it is brought back so the run goes on.

One storage node is down at a time, and only while every mirror on the
compute hosts is whole: losing a second copy of a volume, or the source
of a rebuild, loses the volume's data by design (the admin guide's
"Not protected against"), so the run never causes it.
"""

import random
import time

from os_brick_connector import mirror
from spdk_vhost_core import spdk_rpc

#: A compute target restart is one fault in this many.
COMPUTE_EVERY = 4
OUTAGE = (2.0, 12.0)
#: How long a storage kill waits for every mirror to be whole.
WHOLE_WAIT = 60


def check(node, figures):
    """Count and bring back ``node`` if it died of itself.

    One whose start failed (reported by the fault that restarted it) is
    started again.
    """
    crash = node.crashed()
    if crash:
        figures.crash(node.name, crash)
    if not node.up:
        node.bring_back()


def _mirrors_whole(computes):
    for compute in computes:
        with compute.lock:
            if not compute.up:
                return False
            with spdk_rpc.SpdkClient(compute.target.socket_path) as client:
                for volume_id, raid in mirror.mirrors(client).items():
                    state = mirror.status(client, volume_id, raid)['state']
                    if state != mirror.ONLINE:
                        return False
    return True


def _wait_whole(computes, stop):
    deadline = time.monotonic() + WHOLE_WAIT
    while not stop.is_set() and time.monotonic() < deadline:
        if _mirrors_whole(computes):
            return True
        stop.wait(1)
    return False


def kill_storage(storage, computes, figures, rng, stop, restart=None):
    """Kill ``storage``; with ``restart``, restart it in the outage."""
    if not _wait_whole(computes, stop):
        figures.fault('storage kill skipped: a mirror not whole',
                      storage.name)
        return
    figures.wait_writing(stop)
    figures.began('storage kill')
    crash = storage.kill()
    if crash:
        figures.crash(storage.name, crash)
    started = time.monotonic()
    outage = rng.uniform(*OUTAGE)
    try:
        stop.wait(outage / 2)
        if restart is not None:
            restart_compute(restart, figures, stop,
                            'compute restart in an outage')
        stop.wait(outage - (time.monotonic() - started))
    finally:
        storage.bring_back()
    figures.fault('storage kill', storage.name, time.monotonic() - started)


def restart_compute(compute, figures, stop, kind='compute restart'):
    figures.wait_writing(stop)
    started = time.monotonic()
    with compute.lock:
        figures.began(kind)
        crash = compute.kill()
        if crash:
            figures.crash(compute.name, crash)
        compute.bring_back()
    figures.fault(kind, compute.name, time.monotonic() - started)


def run(storages, computes, figures, stop, seed, every, limit=None,
        over=None):
    """Faults until ``stop`` is set, or ``limit`` of them (then ``over``)."""
    rng = random.Random(seed)
    count = 0
    while not stop.wait(rng.uniform(every / 2, every * 3 / 2)):
        if limit is not None and count >= limit:
            over.set()
            break
        count += 1
        try:
            check_all(storages + computes, figures)
            compute = rng.choice(computes)
            if count % COMPUTE_EVERY == 2:
                restart_compute(compute, figures, stop)
            else:
                kill_storage(rng.choice(storages), computes, figures, rng,
                             stop, compute if count % COMPUTE_EVERY == 0
                             else None)
        except Exception as err:  # noqa: B902 - reported, the run goes on
            _failed(figures, err)
    check_all(storages + computes, figures)


def check_all(nodes, figures):
    """:func:`check` each node; one that cannot start is reported."""
    for node in nodes:
        try:
            check(node, figures)
        except Exception as err:  # noqa: B902 - reported, the run goes on
            _failed(figures, err)


def _failed(figures, err):
    figures.failure('fault thread: %s: %s' % (type(err).__name__, err))
