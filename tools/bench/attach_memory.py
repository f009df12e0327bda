"""Hot-attach time against guest memory.

A vhost-user attach maps all of the guest's memory into the SPDK target
(``VHOST_USER_SET_MEM_TABLE``), so the time from the attach call to the
guest seeing the disk may grow with the guest's RAM. For each size of
``profile.attach_memory_mib``: a hugepage-backed guest with no disk is
booted, then a thin lvol is hot-attached the way Nova does it, in steps
timed apart:

``connect``
    our connector's ``connect_volume`` (the controller and its socket);
``device_add``
    QEMU's ``chardev-add`` and ``device_add`` of a ``vhost-user-blk-pci``
    (what libvirt's attach sends over QMP; QEMU connects to the socket
    and negotiates features and config with SPDK);
``guest_sees_disk``
    until ``/sys/block/vda`` exists in the guest: PCI hotplug, the virtio
    driver starts the device, which is when QEMU sends the memory table
    and SPDK maps and registers it. The console's own round trip
    (measured first, ``console``) is included here and reported apart.

Then the disk is detached again (``device_del``, ``chardev-remove``,
``disconnect_volume``) and the cycle repeated. A size the host has no
free hugepages for is reported as skipped, not as a failure.
"""

import json
import os
import socket
import threading
import time
import uuid

from testbed.guest import qemu
from tools.bench import runner

LVOL_MIB = 64
HOT_ID = 'hot0'
WAIT_DISK = ('while [ ! -e /sys/block/vda ]; do usleep 10000; done')
WAIT_GONE = ('while [ -e /sys/block/vda ]; do usleep 10000; done')
STEPS = ('connect', 'device_add', 'guest_sees_disk')


class QmpError(Exception):
    """QEMU answered a QMP command with an error."""


class Qmp(object):
    """A minimal QMP client: one command at a time, events skipped."""

    def __init__(self, path, timeout=60):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.file = self.sock.makefile('rb')
        self.events = []
        json.loads(self.file.readline())  # the greeting
        self.execute('qmp_capabilities')

    def execute(self, command, arguments=None):
        request = {'execute': command}
        if arguments:
            request['arguments'] = arguments
        self.sock.sendall(json.dumps(request).encode() + b'\n')
        while True:
            reply = json.loads(self.file.readline())
            if 'event' in reply:
                self.events.append(reply)
            elif 'error' in reply:
                raise QmpError('%s: %s' % (command, reply['error']))
            else:
                return reply.get('return')

    def wait_deleted(self, device, timeout):
        """Wait for DEVICE_DELETED of ``device`` itself.

        QEMU first sends one for the device's virtio backend (a path, no
        id); only the device's own means its chardev is free.
        """
        def mine(event):
            return (event['event'] == 'DEVICE_DELETED' and
                    event.get('data', {}).get('device') == device)
        deadline = time.monotonic() + timeout
        while not any(mine(e) for e in self.events):
            self.sock.settimeout(max(deadline - time.monotonic(), 0.01))
            self.events.append(json.loads(self.file.readline()))
        self.events = [e for e in self.events if not mine(e)]

    def close(self):
        self.file.close()
        self.sock.close()


class TargetLog(object):
    """The bench's own target's log, each line stamped when it appears.

    DPDK's vhost library logs each vhost-user message as it reads it, but
    without a time: a thread polls the log and stamps the lines, so the
    gap after ``VHOST_USER_SET_MEM_TABLE`` (mapping the guest's memory)
    can be told from the rest. Nothing for an operator's target.
    """

    POLL = 0.002

    def __init__(self, bench):
        self.path = getattr(bench.target, 'log_path', None)
        self.lines = []
        self._stop = threading.Event()
        self._thread = None
        if self.path:
            self._thread = threading.Thread(target=self._follow,
                                            args=(os.path.getsize(self.path),),
                                            daemon=True)
            self._thread.start()

    def _follow(self, offset):
        with open(self.path, errors='replace') as f:
            f.seek(offset)
            rest = ''
            while not self._stop.is_set():
                data = f.read()
                if not data:
                    time.sleep(self.POLL)
                    continue
                now = time.monotonic()
                rest += data
                *whole, rest = rest.split('\n')
                self.lines += [(now, line) for line in whole]

    def stop(self):
        self._stop.set()
        if self._thread:
            self._thread.join(5)
        return self.lines


def mem_table_seconds(lines, start):
    """Seconds SPDK took over the memory table, and since ``start``.

    From the line reading ``VHOST_USER_SET_MEM_TABLE`` to the next
    message read: DPDK maps every region then, and SPDK registers them.
    """
    messages = [(t, line) for t, line in lines if 'read message' in line]
    for index, (stamp, line) in enumerate(messages[:-1]):
        if 'SET_MEM_TABLE' in line:
            return messages[index + 1][0] - stamp, stamp - start
    return None, None


def _hot_attach(bench, vm, qmp, props):
    """One attach, timed step by step; returns (device info, seconds)."""
    marks = [time.monotonic()]
    info = bench.connector.connect_volume(props)
    marks.append(time.monotonic())
    qmp.execute('chardev-add', {'id': HOT_ID, 'backend': {
        'type': 'socket', 'data': {
            'addr': {'type': 'unix', 'data': {'path': info['path']}},
            'server': False}}})
    qmp.execute('device_add', {'driver': 'vhost-user-blk-pci',
                               'chardev': HOT_ID, 'id': HOT_ID,
                               'num-queues': 1})
    marks.append(time.monotonic())
    vm.execute(WAIT_DISK, timeout=300)
    marks.append(time.monotonic())
    steps = {step: marks[i + 1] - marks[i] for i, step in enumerate(STEPS)}
    steps['total'] = marks[-1] - marks[0]
    return info, steps


def _hot_detach(bench, vm, qmp, props, info):
    qmp.execute('device_del', {'id': HOT_ID})
    qmp.wait_deleted(HOT_ID, 300)
    vm.execute(WAIT_GONE, timeout=300)
    qmp.execute('chardev-remove', {'id': HOT_ID})
    bench.connector.disconnect_volume(props, info)


def _median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2.0


def one_size(bench, profile, memory_mib, lvol):
    """Boot a guest of ``memory_mib``; attach and detach ``repeats`` times."""
    try:
        qemu.check_hugepages(memory_mib)
    except qemu.HugepagesUnavailable as err:
        return {'skipped': str(err)}
    props = bench.props('bench-attachmem-%s' % uuid.uuid4(), lvol)
    samples = []
    started = time.monotonic()
    with runner.running(bench, 'attach-mem-%d' % memory_mib,
                        memory_mib=memory_mib) as vm:
        boot = time.monotonic() - started
        qmp = Qmp(vm.qmp_socket)
        try:
            before = time.monotonic()
            vm.execute('true')
            console = time.monotonic() - before
            for _ in range(profile.repeats):
                log = TargetLog(bench)
                start = time.monotonic()
                info, steps = _hot_attach(bench, vm, qmp, props)
                time.sleep(0.1)  # the log's last lines
                lines = log.stop()
                steps['mem_table'], steps['mem_table_after'] = (
                    mem_table_seconds(lines, start))
                steps['messages'] = [
                    [round(t - start, 4), line.split(') ', 1)[-1]]
                    for t, line in lines if 'message' in line]
                samples.append(steps)
                _hot_detach(bench, vm, qmp, props, info)
        finally:
            qmp.close()
    result = {'boot_seconds': boot, 'console_seconds': console,
              'samples': samples}
    for step in STEPS + ('total', 'mem_table'):
        values = [s[step] for s in samples if s[step] is not None]
        result['%s_seconds_median' % step] = (
            _median(values) if values else None)
    return result


def run(bench, profile):
    lvol = bench.make_lvol('attachmem', LVOL_MIB)
    results = {'by_memory_mib': {}, 'steps': list(STEPS)}
    for memory_mib in profile.attach_memory_mib:
        results['by_memory_mib'][str(memory_mib)] = one_size(
            bench, profile, memory_mib, lvol)
    measured = [m for m in profile.attach_memory_mib
                if 'skipped' not in results['by_memory_mib'][str(m)]]
    if len(measured) > 1:
        small = results['by_memory_mib'][str(measured[0])]
        large = results['by_memory_mib'][str(measured[-1])]
        results['ratio_largest_smallest'] = {
            step: large['%s_seconds_median' % step]
            / small['%s_seconds_median' % step]
            for step in STEPS + ('total',)}
    return results
