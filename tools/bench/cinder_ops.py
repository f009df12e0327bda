"""Control plane, Cinder side: the driver's operations, timed and counted.

Run as its own process (``python -m tools.bench.cinder_ops``): Cinder
and Nova register clashing global options, so the Cinder driver cannot
be imported next to the Nova-side code of the bench. Prints one JSON
document: per operation and volume size, seconds and JSON-RPC calls,
and the connection_info of one volume for the attach measurements.
"""

import argparse
import collections
import json
import os
import sys
import tempfile
import uuid

from cinder import context
from cinder import objects
from cinder.tests.unit import fake_snapshot
from cinder.tests.unit import fake_volume
from oslo_concurrency import lockutils

from cinder_spdk_vhost import qos as spdk_qos
from testbed import cinder_standalone as standalone
from tools.bench import rpc_counter
from tools.bench import timing

TARGET_ID = 'bench-target'


def make_driver(socket_path, lvstore, saved_config):
    """The driver as deployed: it saves the target's config after changes.

    Saving is part of each operation's round trips (``save_config``).
    """
    return standalone.make_driver(
        'bench@spdk', spdk_rpc_socket=socket_path, spdk_lvstores=[lvstore],
        spdk_target_id=TARGET_ID, spdk_saved_config=saved_config)


class CinderOps(object):
    """Runs each operation on fake-DB Cinder objects (no database)."""

    def __init__(self, drv, counter, lvstore):
        self.drv = drv
        self.counter = counter
        self.ctxt = context.get_admin_context()
        self.host = 'bench@spdk#%s' % lvstore

    def volume(self, size_gib):
        return fake_volume.fake_volume_obj(
            self.ctxt, id=str(uuid.uuid4()), size=size_gib, host=self.host,
            volume_type_id=None)

    def snapshot(self, volume):
        return fake_snapshot.fake_snapshot_obj(
            self.ctxt, id=str(uuid.uuid4()), volume_id=volume.id,
            volume_size=volume.size, volume=volume, volume_type_id=None)

    def timed(self, func, *args):
        return timing.measure(self.counter, func, *args)[1]

    def sizes(self, size_gib, repeats):
        """create, snapshot, clones (of a snapshot, of a volume), delete."""
        samples = {'create': [], 'snapshot': [], 'clone_from_snapshot': [],
                   'clone_volume': [], 'delete': []}
        for _ in range(repeats):
            vol = self.volume(size_gib)
            samples['create'].append(self.timed(self.drv.create_volume, vol))
            snap = self.snapshot(vol)
            samples['snapshot'].append(
                self.timed(self.drv.create_snapshot, snap))
            clone = self.volume(size_gib)
            samples['clone_from_snapshot'].append(self.timed(
                self.drv.create_volume_from_snapshot, clone, snap))
            copy = self.volume(size_gib)
            samples['clone_volume'].append(self.timed(
                self.drv.create_cloned_volume, copy, vol))
            samples['delete'].append(self.timed(self.drv.delete_volume,
                                                clone))
            self.drv.delete_volume(copy)
            self.drv.delete_snapshot(snap)
            self.drv.delete_volume(vol)
        return {op: timing.summarise(s) for op, s in samples.items()}

    def at_scale(self, repeats):
        """Each operation at the pool as it is, and get_volume_stats.

        The pool's other volumes were made before (not measured); what
        is made here is deleted again, so the pool is left as found.
        """
        samples = collections.defaultdict(list)
        connector = {'spdk_target_id': TARGET_ID, 'host': 'bench'}
        # pool_stats: the tally's stats (Pools.stats). Its first call
        # after a start counts every lvol, as get_volume_stats does
        # each time: that one is not the steady state, so not timed.
        self.drv.pools.stats(TARGET_ID)
        for _ in range(repeats):
            vol = self.volume(1)
            samples['create'].append(self.timed(self.drv.create_volume, vol))
            snap = self.snapshot(vol)
            samples['snapshot'].append(
                self.timed(self.drv.create_snapshot, snap))
            clone = self.volume(1)
            samples['clone_from_snapshot'].append(self.timed(
                self.drv.create_volume_from_snapshot, clone, snap))
            samples['initialize_connection'].append(self.timed(
                self.drv.initialize_connection, clone, connector))
            samples['terminate_connection'].append(self.timed(
                self.drv.terminate_connection, clone, connector))
            samples['get_volume_stats'].append(self.timed(
                self.drv.get_volume_stats, True))
            samples['pool_stats'].append(self.timed(
                self.drv.pools.stats, TARGET_ID))
            samples['delete'].append(self.timed(self.drv.delete_volume,
                                                clone))
            samples['delete_snapshot'].append(self.timed(
                self.drv.delete_snapshot, snap))
            self.drv.delete_volume(vol)
        return {op: timing.summarise(s) for op, s in samples.items()}

    def connection(self, size_gib, repeats):
        """initialize/terminate_connection for a local (same-target) host."""
        vol = self.volume(size_gib)
        self.drv.create_volume(vol)
        connector = {'spdk_target_id': TARGET_ID, 'host': 'bench'}
        init, term = [], []
        for _ in range(repeats):
            info, sample = timing.measure(
                self.counter, self.drv.initialize_connection, vol, connector)
            init.append(sample)
            term.append(self.timed(self.drv.terminate_connection, vol,
                                   connector))
        return info, {'initialize_connection': timing.summarise(init),
                      'terminate_connection': timing.summarise(term)}


def _measure(ops, args):
    if args.apply_qos:
        alias, size, spec = args.apply_qos
        limits = spdk_qos.to_limits(json.loads(spec), int(size))
        ops.drv.pools.apply_qos(alias, limits)
        return limits
    if args.at_scale:
        return ops.at_scale(args.repeats)
    result = {'by_size': {str(size): ops.sizes(size, args.repeats)
                          for size in args.sizes}}
    info, result['connection'] = ops.connection(args.sizes[0], args.repeats)
    result['connection_info'] = info
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--socket', required=True,
                        help='the SPDK target JSON-RPC socket')
    parser.add_argument('--lvstore', required=True)
    parser.add_argument('--sizes', type=int, nargs='+', default=[1, 64],
                        help='volume sizes in GiB')
    parser.add_argument('--repeats', type=int, default=1)
    parser.add_argument('--apply-qos', nargs=3,
                        metavar=('LVOL', 'SIZE_GIB', 'SPEC_JSON'),
                        help='only put a back-end QoS spec in force on an '
                             'lvol, as retype does (tools.bench.qos)')
    parser.add_argument('--at-scale', action='store_true',
                        help='only the operations at the pool as it is '
                             '(tools.bench.scale fills it)')
    args = parser.parse_args(argv)
    objects.register_all()
    with tempfile.TemporaryDirectory(prefix='bench-cinder-') as tmp:
        lockutils.set_defaults(tmp)
        # The driver's locks: cinder-volume would have started them.
        coordinator = standalone.Coordination()
        with coordinator, rpc_counter.RpcCounter(
                args.socket, os.path.join(tmp, 'rpc.sock')) as counter:
            drv = make_driver(counter.path, args.lvstore,
                              os.path.join(tmp, 'spdk-config.json'))
            try:
                drv.pools.node.save()  # a deployed target has its file
                result = _measure(CinderOps(drv, counter, args.lvstore),
                                  args)
            finally:
                drv.client.close()
    json.dump(result, sys.stdout)
    return 0


if __name__ == '__main__':
    sys.exit(main())
