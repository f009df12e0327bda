"""make demo: a Cinder volume attached to a libvirt guest through SPDK vhost.

What a cloud does, with each OpenStack side in its own process (Nova and
Cinder cannot share one; they exchange JSON, as through their APIs):

* an SPDK target: a real ``spdk_tgt`` of its own (built by
  ``tools/build-spdk.sh``) with an lvol store on a sparse file, or the
  one whose JSON-RPC socket is ``SPDK_RPC_SOCKET`` (vhost sockets in
  ``SPDK_VHOST_DIR``);
* Cinder (cinder-volume's manager with ``SpdkVhostDriver``): a
  ``high-iops`` volume type with a QoS spec, a volume, a snapshot of it,
  a clone of the snapshot, and the clone's ``connection_info`` for this
  host's volume connector;
* Nova (the ``LibvirtVhostUserDriver`` compute driver, its volume driver
  and the SPDK connector) on the real libvirtd: a guest booted under QEMU
  TCG, the clone hot-attached, written and read back by the guest, then
  detached.

Prints each step with its time, then what was attached and how, read back
from SPDK. Hyperconverged (one target): the transport is ``local``.
Run from the repository root with it on PYTHONPATH (the Makefile does).
"""

import collections
import contextlib
import hashlib
import os
import sys
import tempfile
import time

from spdk_vhost_core import spdk_rpc
from testbed.guest import qemu
from testbed import service_process
from testbed import spdk_target

MiB = 1024 * 1024
LVS = 'demo_lvs'
BASE = 'demo_base'
LVS_MIB = 4096  # a sparse file: only what is written takes disk space
TARGET_ID = 'demo-compute-host'
VOLUME_TYPE = 'high-iops'
QOS = {'total_iops_sec': '5000', 'total_bytes_sec': str(200 * MiB)}
OFFSET, LENGTH, TOKEN = 16 * MiB, MiB, 'spdk-vhost-demo'

Step = collections.namedtuple('Step', 'name seconds detail')


class Demo(object):
    """The steps, their timings, and what the table shows at the end."""

    def __init__(self, stack):
        self.stack = stack
        self.steps = []
        self.facts = collections.OrderedDict()

    @contextlib.contextmanager
    def step(self, name):
        start = time.monotonic()
        detail = []
        yield detail
        self.steps.append(Step(name, time.monotonic() - start,
                               ' '.join(detail)))

    def run(self):
        with self.step('SPDK target') as detail:
            target = self._target()
            self.spdk = spdk_rpc.SpdkClient(target.socket_path, timeout=30)
            self.stack.callback(self.spdk.close)
            detail.append('%s (%s) at %s' % (
                self.spdk.spdk_get_version()['version'], target.app,
                target.socket_path))
        with self.step('lvol store') as detail:
            self._lvstore(target)
            detail.append('%s on a %d MiB sparse file (AIO bdev)'
                          % (LVS, LVS_MIB))
        self._cinder_and_nova(target)

    def _target(self):
        """The target at $SPDK_RPC_SOCKET, else a fresh spdk_tgt of our own.

        spdk_tgt: this one host is both sides, so the target serves the
        connector's vhost controllers and the NVMe-oF export the Cinder
        driver uses to change QoS on an idle volume; on core 0, as every
        test target.
        """
        socket = os.environ.get('SPDK_RPC_SOCKET')
        if not socket:
            return self.stack.enter_context(spdk_target.SpdkTarget(
                app='spdk_tgt', name='demo'))
        workdir = self.stack.enter_context(tempfile.TemporaryDirectory(
            prefix='spdk-vhost-demo-'))
        return ExternalTarget(socket, os.environ.get('SPDK_VHOST_DIR',
                                                     '/var/tmp'), workdir)

    def _lvstore(self, target):
        if isinstance(target, spdk_target.SpdkTarget):
            # Goes with the target.
            target.aio_lvstore(LVS, size_mib=LVS_MIB)
            return
        path = os.path.join(target.workdir, 'demo_lvs.img')
        with open(path, 'wb') as image:
            image.truncate(LVS_MIB * MiB)
        self.spdk.bdev_aio_create(path, BASE, block_size=4096)
        self.stack.callback(self.spdk.bdev_aio_delete, BASE)
        self.spdk.call('bdev_lvol_create_lvstore', {
            'bdev_name': BASE, 'lvs_name': LVS, 'cluster_sz': MiB})
        self.stack.callback(self.spdk.call, 'bdev_lvol_delete_lvstore',
                            {'lvs_name': LVS})

    def _start_sides(self, target):
        with self.step('start Cinder, Nova') as detail:
            cinder = self.stack.enter_context(service_process.ServiceProcess(
                service_process.CINDER))
            nova = self.stack.enter_context(service_process.ServiceProcess(
                service_process.NOVA))
            cinder.call('start', rpc_socket=target.socket_path,
                        target_id=TARGET_ID, lvstore=LVS)
            inst = nova.call(
                'start', rpc_socket=target.socket_path, target_id=TARGET_ID,
                vhost_dir=target.vhost_dir,
            )['instance']
            detail.append('cinder-volume manager + SpdkVhostDriver; '
                          'LibvirtVhostUserDriver, guest %s' % inst)
        return cinder, nova

    def _cinder_and_nova(self, target):
        cinder, nova = self._start_sides(target)
        with self.step('volume type') as detail:
            type_id = cinder.call('create_type', name=VOLUME_TYPE, qos=QOS,
                                  consumer='both')
            detail.append('%s, QoS %s (consumer both)' % (
                VOLUME_TYPE, ', '.join('%s=%s' % kv
                                       for kv in sorted(QOS.items()))))
        with self.step('create volume') as detail:
            vol = cinder.call('create_volume', size=1, type_id=type_id)
            self.stack.callback(cinder.call, 'delete_volume',
                                volume_id=vol['id'])
            detail.append('%s, 1 GiB thin' % vol['name'])
        with self.step('snapshot') as detail:
            snap = cinder.call('create_snapshot', volume_id=vol['id'])
            self.stack.callback(cinder.call, 'delete_snapshot',
                                snapshot_id=snap['id'])
            detail.append(snap['name'])
        with self.step('clone') as detail:
            clone = cinder.call('create_volume_from_snapshot',
                                snapshot_id=snap['id'], type_id=type_id)
            self.stack.callback(cinder.call, 'delete_volume',
                                volume_id=clone['id'])
            detail.append('%s from %s' % (clone['name'], snap['name']))
        self._attach(cinder, nova, clone)

    def _attach(self, cinder, nova, clone):
        with self.step('boot guest') as detail:
            nova.call('boot', offset=OFFSET, length=LENGTH, token=TOKEN)
            detail.append('QEMU TCG, shared hugepage memory, no disk yet')
        with self.step('initialize_connection') as detail:
            connector = nova.call('connector')
            conn = cinder.call('initialize_connection',
                               volume_id=clone['id'], connector=connector)
            self.stack.callback(cinder.call, 'terminate_connection',
                                volume_id=clone['id'], connector=connector)
            detail.append('transport %s' % conn['data']['transport'])
        with self.step('attach') as detail:
            disk = nova.call('attach', connection_info=conn)
            detail.append('%s hot-plugged, %d queues' % (
                ','.join(disk['disks']), disk['queues']))
        self._read_spdk(clone, conn, disk)
        with self.step('guest write + read') as detail:
            io = nova.call('guest_io')
            detail.append('%d KiB at %d MiB' % (LENGTH // 1024,
                                                OFFSET // MiB))
        with self.step('detach') as detail:
            gone = nova.call('detach')
            detail.append('guest disks now [%s], controller deleted'
                          % ','.join(gone['disks']))
        self._judge(io, gone)

    def _read_spdk(self, clone, conn, disk):
        """What SPDK itself says is in force for the attached clone."""
        [bdev] = self.spdk.bdev_get_bdevs(name=conn['data']['bdev'])
        [ctrl] = self.spdk.vhost_get_controllers(name=disk['controller'])
        layout = self.spdk.call('framework_get_reactors')
        self.facts['volume'] = '%s (%s, 1 GiB, clone of a snapshot)' % (
            clone['id'], VOLUME_TYPE)
        lvol = bdev['driver_specific']['lvol']
        self.facts['lvol'] = '%s = %s (%s, base %s)' % (
            conn['data']['bdev'], bdev['name'],
            'thin' if lvol['thin_provision'] else 'thick',
            lvol.get('base_snapshot'))
        self.controller = ctrl['ctrlr']
        self.facts['controller'] = '%s, socket %s' % (ctrl['ctrlr'],
                                                      ctrl['socket'])
        self.facts['cpumask'] = '%s, NUMA node %s' % (
            ctrl['cpumask'], _node_of(layout, ctrl['cpumask']))
        self.facts['QoS in force'] = ', '.join(
            '%s=%s' % kv for kv in sorted(
                bdev['assigned_rate_limits'].items()) if kv[1])

    def _judge(self, io, gone):
        expected = hashlib.sha256(qemu.pattern_bytes(TOKEN, LENGTH))
        expected = expected.hexdigest()
        self.checks = [
            ('guest sees the 1 GiB volume',
             io.get('vda.size') == str(1024 * MiB)),
            ('guest wrote the pattern',
             io.get('vda.wrote@%d' % OFFSET) == expected),
            ('guest read the same bytes back',
             io.get('vda.read@%d' % OFFSET) == expected),
            ('detached: disk and vhost socket gone',
             gone['disks'] == [] and not gone['socket_left']),
            ('detached: SPDK has no controller for it',
             self.controller not in [
                 c['ctrlr'] for c in self.spdk.vhost_get_controllers()]),
        ]
        self.facts['guest I/O'] = '%s (sha256 %s...)' % (
            'ok' if all(ok for _n, ok in self.checks[:3]) else 'FAILED',
            expected[:16])

    def report(self):
        print('%-22s %8s  %s' % ('step', 'seconds', 'detail'))
        for step in self.steps:
            print('%-22s %8.2f  %s' % step)
        print()
        for key, value in self.facts.items():
            print('%-14s %s' % (key, value))
        print()
        for name, ok in self.checks:
            print('%-4s %s' % ('ok' if ok else 'FAIL', name))
        return 0 if all(ok for _n, ok in self.checks) else 1


ExternalTarget = collections.namedtuple('ExternalTarget',
                                        'socket_path vhost_dir workdir')
ExternalTarget.app = '$SPDK_RPC_SOCKET'


def _node_of(layout, cpumask):
    """The NUMA node of the reactor(s) in cpumask, as SPDK reports it."""
    mask = int(cpumask, 16)
    nodes = {r.get('numa_id', r.get('socket_id'))
             for r in layout['reactors'] if mask >> r['lcore'] & 1}
    return nodes.pop() if len(nodes) == 1 else sorted(nodes)


def main():
    try:
        import libvirt  # noqa: F401  (the Nova side needs it)
    except ImportError:
        print('libvirt-python is missing: run make demo (it installs it)')
        return 2
    with contextlib.ExitStack() as stack:
        demo = Demo(stack)
        try:
            demo.run()
        except service_process.ServiceError as err:
            print('FAILED: %s' % err)
            demo.checks = [('all steps', False)]
    return demo.report()


if __name__ == '__main__':
    sys.exit(main())
