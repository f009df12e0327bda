"""``python -m tools.chaos``: see the package's docstring."""

import argparse
import os
import signal
import sys
import tempfile
import threading
import time

from oslo_concurrency import lockutils

from testbed import spdk_target
from tools import chaos
from tools.chaos import faults
from tools.chaos import figures as figures_mod
from tools.chaos import nodes
from tools.chaos import workload


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog='python -m tools.chaos',
        description=chaos.__doc__.splitlines()[0])
    parser.add_argument('--minutes', type=float, default=30,
                        help='stop starting operations after this long')
    parser.add_argument('--operations', type=int,
                        help='end the run once each compute host did this '
                             'many operations (and --faults were caused)')
    parser.add_argument('--faults', type=int,
                        help='end the run once this many faults were '
                             'caused (and --operations done)')
    parser.add_argument('--computes', type=int, default=2)
    parser.add_argument('--storages', type=int, default=3)
    parser.add_argument('--fault-every', type=float, default=30,
                        help='mean seconds between faults')
    parser.add_argument('--hold', type=float, default=20,
                        help='seconds each guest writes before it reads back')
    parser.add_argument('--kinds', default=','.join(workload.KINDS),
                        help='the kinds of volume, comma-separated (default '
                             '%(default)s)')
    parser.add_argument('--seed', type=int, default=int(time.time()))
    args = parser.parse_args(argv)
    args.kinds = tuple(args.kinds.split(','))
    if not args.kinds or set(args.kinds) - set(workload.KINDS):
        parser.error('--kinds: some of %s' % ', '.join(workload.KINDS))
    if args.storages < 3:
        parser.error('--storages: at least 3, so that a replicated volume '
                     'can be made while one node is down')
    return args


def _start(args, workdir, stack):
    storages = [nodes.Storage('storage-%d' % i, workdir)
                for i in range(1, args.storages + 1)]
    lock_dir = os.path.join(workdir, 'locks')
    os.mkdir(lock_dir)
    lockutils.set_defaults(lock_dir)
    computes = [nodes.Compute('compute-%d' % i, workdir, lock_dir)
                for i in range(1, args.computes + 1)]
    for node in storages + computes:
        node.start()
        stack.append(node)
    return storages, computes


def _stop(stack, figures):
    for node in reversed(stack):
        crash = node.crashed()
        if crash:
            figures.crash(node.name, crash)
        try:
            node.stop()
        except spdk_target.TargetDied as died:
            figures.crash(node.name, str(died))


def _enough(args, faults_over):
    """Whether a host did its part: every bound given is reached."""
    def enough(done):
        if args.operations is None and args.faults is None:
            return False  # the time alone ends the run
        return faults_over.is_set() and (args.operations is None
                                         or done >= args.operations)
    return enough


def run(args, out):
    """The run; its :class:`figures.Figures`, printed to ``out``."""
    figures = figures_mod.Figures(log=out)
    stop = threading.Event()
    faults_over = threading.Event()
    if args.faults is None:
        faults_over.set()
    stack = []
    started = time.monotonic()
    print('chaos: seed %d' % args.seed, file=out, flush=True)
    with tempfile.TemporaryDirectory(prefix='spdk-chaos-') as workdir:
        try:
            storages, computes = _start(args, workdir, stack)
            release = storages[0].rpc('spdk_get_version')['version']
            threads = [threading.Thread(target=workload.run_compute, args=(
                compute, storages, figures, stop, args.seed + index,
                args.hold, _enough(args, faults_over), args.kinds))
                for index, compute in enumerate(computes)]
            fault_thread = threading.Thread(target=faults.run, args=(
                storages, computes, figures, stop, args.seed,
                args.fault_every, args.faults, faults_over))
            for thread in threads + [fault_thread]:
                thread.start()
            deadline = started + args.minutes * 60
            while (time.monotonic() < deadline
                   and any(t.is_alive() for t in threads)):
                stop.wait(1)
            stop.set()
            for thread in threads + [fault_thread]:
                thread.join()
            for node in storages + computes:
                figures.leaks[node.name] = (
                    node.left() if node.up else ['the whole node: down'])
        finally:
            stop.set()
            _stop(stack, figures)
    figures.report(out, (time.monotonic() - started) / 60, release)
    return figures


def main(argv=None, out=sys.stdout):
    # SIGTERM (a timeout, CI) stops the targets and guests as Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    return 0 if run(parse_args(argv), out).passed else 1


if __name__ == '__main__':
    sys.exit(main())
