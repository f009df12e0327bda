"""Data plane: QEMU virtio-blk (host block layer) vs vhost-user-blk.

Same guest (kernel, initramfs, memory, vCPUs), same backing file or
device, same fio jobs. (A) QEMU opens the backing itself (O_DIRECT,
io_uring, an IOThread). (B) the backing holds an lvol store; a thin lvol
is attached through our os-brick connector and the guest talks
vhost-user-blk to the controller it made. Host CPU is read from /proc:
``qemu`` is the whole QEMU process; ``io_path`` is what serves the I/O
(A: QEMU's IOThread; B: the whole SPDK target process, its polling
reactor included).
"""

import functools

from testbed import cpu
from testbed.guest import qemu
from tools.bench import fio
from tools.bench import guest as bench_guest
from tools.bench import runner

BASELINE = 'virtio-blk'
VHOST = 'vhost-user-blk'


def _jobs(profile):
    wanted = profile.jobs
    return [job for job in fio.DATAPLANE_JOBS
            if wanted is None or job.name in wanted]


def _run_all(vm, profile, io_path):
    sources = {'qemu': functools.partial(cpu.process_seconds, vm.pid),
               'io_path': io_path}
    runner.precondition(vm, profile)
    return {job.name: runner.run_job(vm, job, profile, cpu_sources=sources)
            for job in _jobs(profile)}


def run(bench, profile, aio='io_uring'):
    results = {'jobs': [j.name for j in _jobs(profile)],
               'baseline_aio': aio}
    # The baseline first: it writes the raw backing, the lvol store after.
    disk = bench_guest.HostBlockDisk(bench.backing, aio)
    with runner.running(bench, 'dp-baseline', host_disks=[disk]) as vm:
        results[BASELINE] = _run_all(vm, profile, functools.partial(
            cpu.thread_seconds, vm.pid, 'IO iothread'))
    lvol = bench.make_lvol('dataplane', profile.size_mib)
    info = bench.attach('bench-dataplane', lvol)
    disk = qemu.VhostUserDisk(info['path'])
    with runner.running(bench, 'dp-vhost', disks=[disk]) as vm:
        results[VHOST] = _run_all(vm, profile, bench.backend_seconds)
    return results
