#!/usr/bin/env python3
"""Time the driver's create, snapshot and clone paths at two sizes.

Prints, for 1 GiB and 64 GiB thin volumes, the wall time of create,
create_snapshot, create_volume_from_snapshot and create_cloned_volume
through the real Cinder driver, and the JSON-RPC calls each one sent.
Snapshots and clones are metadata operations, so their times should not
grow with the size. Runs against the SPDK target emulator (started here)
or a real target when SPDK_RPC_SOCKET is set. Prints; asserts nothing.

    python tools/bench_clone.py [--repeat N]
"""

import argparse
import collections
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from cinder import context  # noqa: E402
from cinder import objects  # noqa: E402
from cinder.tests.unit import fake_snapshot  # noqa: E402
from cinder.tests.unit import fake_volume  # noqa: E402
from cinder.volume import configuration  # noqa: E402
from cinder.volume import driver as cinder_driver  # noqa: E402
from oslo_config import cfg  # noqa: E402
from oslo_utils import uuidutils  # noqa: E402

from cinder_spdk_vhost import driver as spdk_driver  # noqa: E402
from os_brick_connector import spdk_rpc  # noqa: E402
from tests.emulator import fixture as emulator_fixture  # noqa: E402

LVS = 'bench_lvs'
BACKEND = 'bench'
SIZES_GIB = (1, 64)


def make_driver(socket_path, lock_path):
    cfg.CONF([], project='cinder')
    cfg.CONF.set_override('lock_path', lock_path, 'oslo_concurrency')
    conf = configuration.Configuration(cinder_driver.volume_opts,
                                       config_group=BACKEND)
    drv = spdk_driver.SpdkVhostDriver(configuration=conf, host='b@bench')
    for name, value in {'spdk_rpc_socket': socket_path,
                        'spdk_lvstores': [LVS],
                        'spdk_target_id': 'bench'}.items():
        cfg.CONF.set_override(name, value, group=BACKEND)
    drv.do_setup(None)
    drv.check_for_setup_error()
    return drv


class Recorder(object):
    """Counts the RPCs the driver's client sends, per timed operation."""

    def __init__(self):
        self.calls = collections.Counter()
        real = spdk_rpc.SpdkClient.call
        recorder = self

        def call(client, method, params=None):
            recorder.calls[method] += 1
            return real(client, method, params)
        spdk_rpc.SpdkClient.call = call

    def timed(self, func, *args):
        self.calls.clear()
        start = time.perf_counter()
        func(*args)
        return time.perf_counter() - start, dict(self.calls)


def run(drv, ctxt, size, recorder):
    def volume():
        return fake_volume.fake_volume_obj(
            ctxt, id=uuidutils.generate_uuid(), size=size,
            host='b@bench#' + LVS, volume_type_id=None)
    src = volume()
    snap = fake_snapshot.fake_snapshot_obj(
        ctxt, id=uuidutils.generate_uuid(), volume_id=src.id,
        volume_size=size)
    snap.volume = src
    from_snap, cloned = volume(), volume()
    steps = [('create_volume', drv.create_volume, src),
             ('create_snapshot', drv.create_snapshot, snap),
             ('create_volume_from_snapshot',
              drv.create_volume_from_snapshot, from_snap, snap),
             ('create_cloned_volume', drv.create_cloned_volume, cloned,
              src)]
    results = [(name,) + recorder.timed(func, *args)
               for name, func, *args in steps]
    for vol in (cloned, from_snap):
        drv.delete_volume(vol)
    drv.delete_snapshot(snap)
    drv.delete_volume(src)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--repeat', type=int, default=3)
    args = parser.parse_args()
    objects.register_all()
    target = emulator_fixture.EmulatorFixture()
    target.setUp()
    try:
        target.call('bdev_malloc_create', {'name': 'BenchBase',
                                           'num_blocks': 262144,
                                           'block_size': 512})
        target.call('bdev_lvol_create_lvstore', {
            'bdev_name': 'BenchBase', 'lvs_name': LVS,
            'cluster_sz': 1048576})
        lock_dir = os.path.join(target.state_dir or '/tmp', 'bench-locks')
        drv = make_driver(target.socket_path, lock_dir)
        recorder = Recorder()
        ctxt = context.get_admin_context()
        print('target: %s' % ('real SPDK at ' + target.socket_path
                              if target.is_real else 'SPDK emulator'))
        print('%-28s %5s %10s  %s' % ('operation', 'GiB', 'median ms',
                                      'JSON-RPC calls'))
        for size in SIZES_GIB:
            rounds = [run(drv, ctxt, size, recorder)
                      for _ in range(args.repeat)]
            for index, (name, _t, calls) in enumerate(rounds[0]):
                times = sorted(r[index][1] for r in rounds)
                print('%-28s %5d %10.1f  %d: %s' % (
                    name, size, 1000 * times[len(times) // 2],
                    sum(calls.values()),
                    ', '.join('%s x%d' % item
                              for item in sorted(calls.items()))))
        drv.client.close()
        target.call('bdev_lvol_delete_lvstore', {'lvs_name': LVS})
        target.call('bdev_malloc_delete', {'name': 'BenchBase'})
    finally:
        target.cleanUp()


if __name__ == '__main__':
    main()
