"""Stress the drivers: parallel volume lifecycles on one SPDK target.

cinder-volume and nova-compute run many operations at once, in threads
and in several processes; this runs ``--processes`` x ``--threads``
workers, each doing ``--cycles`` times: create a volume, clone it,
snapshot it and make a volume from the snapshot, attach the clone to a
guest host (Cinder's initialize_connection, then the connector builds
the vhost controller: locally, or over NVMe-oF from a second target with
``--remote``), detach, delete all. At the end the targets must hold
exactly what they held before. Prints the failures and the leaks, and
exits non-zero if there is any.

    python -m tools.stress --cycles 20 --processes 4 --threads 4 --remote

It starts real SPDK targets of its own (``testbed.spdk_target``, on core
0): the storage target is a ``spdk_tgt`` (the Cinder driver wants its
vhost and NVMe-oF RPCs) with an lvol store on a sparse file; with
``--remote`` the compute target is a ``vhost`` app, polling, since the
NVMe-oF initiator refuses interrupt mode.
"""

import argparse
import collections
import multiprocessing
import os
import queue as queue_mod
import sys
import tempfile
import threading
import time
import traceback
import uuid

from testbed import net

LVS = 'stress_lvs'
LVS_MIB = 16384  # a sparse file; the volumes are thin
STORAGE_ID = 'stress-storage'
HOST_NQN = ('nqn.2014-08.org.nvmexpress:uuid:'
            '5d7a4e2c-93b1-4f60-8d2e-0c1b2a3f4e5d')


def _driver(socket_path, lock_dir, port):
    """A set-up Cinder driver, as one cinder-volume process has it."""
    from cinder import objects
    from oslo_concurrency import lockutils

    from testbed import cinder_standalone as standalone

    objects.register_all()
    lockutils.set_defaults(lock_dir)
    # The driver's locks, on a file backend all the processes share; the
    # process's for as long as it lives, as in cinder-volume.
    standalone.Coordination(
        directory=os.path.join(lock_dir, 'coordination')).setUp()
    return standalone.make_driver(
        'stress@spdk', spdk_rpc_socket=socket_path, spdk_lvstores=[LVS],
        spdk_target_id=STORAGE_ID, spdk_nvmf_port=port)


def _connector(socket_path):
    """An os-brick connector, as one nova-compute process has it."""
    from oslo_config import cfg

    from os_brick_connector import connector
    from os_brick_connector import options
    from os_brick_connector import privileged

    conf = cfg.ConfigOpts()
    options.register_opts(conf)
    conf([], project='spdk-vhost-stress')
    for name, value in (('spdk_rpc_socket', socket_path),
                        ('numa_policy', 'none'), ('host_nqn', HOST_NQN),
                        ('disconnect_retry_interval', 0.1),
                        ('spdk_saved_config', '')):
        conf.set_override(name, value, group='spdk_vhost')
    privileged.socket_access.set_client_mode(False)
    return connector.SpdkVhostConnector(None, conf=conf.spdk_vhost)


class Worker(object):
    """One thread's cycles; records failures by step."""

    def __init__(self, drv, conn, remote):
        from cinder import context
        self.drv = drv
        self.conn = conn
        self.ctxt = context.get_admin_context()
        self.connector = ({'host': 'compute', 'nqn': HOST_NQN,
                           'spdk_target_id': 'stress-compute'} if remote
                          else {'host': 'storage', 'nqn': HOST_NQN,
                                'spdk_target_id': STORAGE_ID})
        self.failures = []
        self.cycles = 0

    # Objects without a database (cinder.tests.unit's fakes would
    # monkey-patch threading with eventlet), with the fields the driver
    # reads that a database row always has.
    def _volume(self):
        from cinder import objects
        return objects.Volume(context=self.ctxt, id=str(uuid.uuid4()),
                              size=1, host='stress@spdk#%s' % LVS,
                              volume_type_id=None, _name_id=None,
                              migration_status=None, status='available',
                              volume_attachment=objects.VolumeAttachmentList(
                                  objects=[]))

    def _snapshot(self, volume):
        from cinder import objects
        return objects.Snapshot(context=self.ctxt, id=str(uuid.uuid4()),
                                volume_id=volume.id, volume_size=1,
                                volume=volume, volume_type_id=None)

    def _step(self, name, func, *args):
        try:
            return func(*args)
        except Exception as err:  # noqa: B902 - counted and reported
            self.failures.append('%s: %s: %s' % (
                name, type(err).__name__, err))
            traceback.print_exc(file=sys.stderr)
            raise

    def cycle(self):
        vol, clone, from_snap = (self._volume(), self._volume(),
                                 self._volume())
        snap = self._snapshot(vol)
        undo = []
        try:
            self._step('create', self.drv.create_volume, vol)
            undo.append(('delete volume', self.drv.delete_volume, vol))
            self._step('clone', self.drv.create_cloned_volume, clone, vol)
            undo.append(('delete clone', self.drv.delete_volume, clone))
            self._step('snapshot', self.drv.create_snapshot, snap)
            undo.append(('delete snapshot', self.drv.delete_snapshot, snap))
            self._step('from snapshot', self.drv.create_volume_from_snapshot,
                       from_snap, snap)
            undo.append(('delete from snapshot', self.drv.delete_volume,
                         from_snap))
            self._attach(clone)
            self.cycles += 1
        except Exception:  # noqa: B902 - already counted in _step
            pass
        for name, func, arg in reversed(undo):
            try:
                self._step(name, func, arg)
            except Exception:  # noqa: B902 - counted in _step
                continue

    def _attach(self, volume):
        info = self._step('initialize_connection',
                          self.drv.initialize_connection, volume,
                          self.connector)
        try:
            device = self._step('connect_volume', self.conn.connect_volume,
                                info['data'])
            self._step('disconnect_volume', self.conn.disconnect_volume,
                       info['data'], device)
        finally:
            self._step('terminate_connection',
                       self.drv.terminate_connection, volume,
                       self.connector)


def run_process(args, sockets, lock_dir, port, queue):
    """One "service process": its own driver, connector and threads."""
    storage_socket, compute_socket = sockets
    drv = _driver(storage_socket, lock_dir, port)
    conn = _connector(compute_socket)
    workers = [Worker(drv, conn, args.remote)
               for _ in range(args.threads)]

    def loop(worker):
        for _ in range(args.cycles):
            worker.cycle()
    threads = [threading.Thread(target=loop, args=(w,)) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    drv.client.close()
    conn.client.close()
    queue.put((sum(w.cycles for w in workers),
               [f for w in workers for f in w.failures]))


def _collect(procs, queue):
    """Each process's result; a process that died gives none."""
    results = []
    while len(results) < len(procs):
        try:
            results.append(queue.get(timeout=1))
        except queue_mod.Empty:
            if not any(proc.is_alive() for proc in procs) and \
                    queue.empty():
                break
    for proc in procs:
        proc.join()
    return results


def leaks(storage, compute):
    """What is left on the targets, by kind."""
    found = collections.OrderedDict()
    found['lvols'] = [lv['name'] for lv in storage.call(
        'bdev_lvol_get_lvols', {'lvs_name': LVS})]
    found['subsystems'] = [s['nqn'] for s in storage.nvmf_get_subsystems()
                           if s.get('subtype') == 'NVMe']
    found['vhost controllers'] = [
        c['ctrlr'] for c in compute.vhost_get_controllers()]
    found['nvme controllers'] = [
        c['name'] for c in compute.bdev_nvme_get_controllers()]
    # The single-member raid0 a local attach puts in front of an lvol.
    found['raid bdevs'] = [r['name'] for r in compute.bdev_raid_get_bdevs()]
    return found


def _start_targets(stack, args):
    """Real targets (storage, and compute with --remote), their clients."""
    from spdk_vhost_core import spdk_rpc
    from testbed import spdk_target

    def target(app, name):
        fixture = spdk_target.SpdkTarget(app=app, name=name)
        fixture.setUp()
        stack.append(fixture.cleanUp)
        client = spdk_rpc.SpdkClient(fixture.socket_path, timeout=60)
        stack.append(client.close)
        return fixture, client

    storage_target, storage = target('spdk_tgt', 'stress-storage')
    storage_target.aio_lvstore(LVS, size_mib=LVS_MIB)
    if args.remote:
        compute_target, compute = target('vhost', 'stress-compute')
    else:
        compute_target, compute = storage_target, storage
    return (storage_target.socket_path, storage,
            compute_target.socket_path, compute)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--cycles', type=int, default=10,
                        help='lifecycles per worker thread')
    parser.add_argument('--processes', type=int, default=2)
    parser.add_argument('--threads', type=int, default=4,
                        help='worker threads per process')
    parser.add_argument('--remote', action='store_true',
                        help='attach over NVMe-oF/TCP from a second target')
    args = parser.parse_args(argv)
    stack = []
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix='spdk-stress-') as locks:
            (storage_socket, storage, compute_socket,
             compute) = _start_targets(stack, args)
            ctx = multiprocessing.get_context('spawn')
            queue = ctx.Queue()
            port = net.free_port()
            procs = [ctx.Process(target=run_process, args=(
                args, (storage_socket, compute_socket), locks, port, queue))
                for _ in range(args.processes)]
            for proc in procs:
                proc.start()
            results = _collect(procs, queue)
            left = leaks(storage, compute)
    finally:
        for undo in reversed(stack):
            undo()
    cycles = sum(r[0] for r in results)
    failures = [f for r in results for f in r[1]]
    crashed = [p.exitcode for p in procs if p.exitcode]
    wanted = args.cycles * args.threads * args.processes
    leaked = sum(len(v) for v in left.values())
    print('stress: %d of %d cycles ok in %.1fs (%d processes x %d threads, '
          '%s)' % (cycles, wanted, time.monotonic() - started,
                   args.processes, args.threads,
                   'NVMe-oF' if args.remote else 'local'))
    print('failures: %d' % len(failures))
    for failure in failures:
        print('  ' + failure)
    print('leaks: %d' % leaked)
    for kind, names in left.items():
        if names:
            print('  %s: %s' % (kind, ', '.join(names)))
    ok = not failures and not leaked and not crashed and cycles == wanted
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
