"""Run fio jobs in a bench guest and measure the host CPU they cost."""

import contextlib
import time

from testbed import cpu
from tools.bench import fio
from tools.bench import guest as bench_guest

FIO_SLACK = 120  # seconds on top of a job's runtime (TCG is slow to start)


@contextlib.contextmanager
def running(bench, name, **kwargs):
    """A started BenchGuest, always stopped (and its QEMU reaped)."""
    vm = bench_guest.BenchGuest(workdir=bench.workdir_for(name),
                                accel=bench.accel, **kwargs)
    try:
        vm.start()
        yield vm
    finally:
        vm.stop()


def run_job(vm, job, profile, device='/dev/vda', rate_iops=None,
            cpu_sources=None):
    """fio figures of one job, plus CPU per I/O when sources are given.

    cpu_sources: name -> callable giving CPU seconds so far; reported as
    ``cpu_<name>_us_per_io`` and ``cpu_<name>_cores`` (share of a core).
    """
    meter = cpu.CpuMeter(cpu_sources or {})
    meter.start()
    started = time.monotonic()
    report = vm.fio(fio.arguments(job, device, profile.size_mib,
                                  profile.runtime, profile.ramp,
                                  rate_iops),
                    timeout=profile.runtime + profile.ramp + FIO_SLACK)
    wall = time.monotonic() - started
    used = meter.stop()
    result = fio.figures(report)
    for name, seconds in used.items():
        result['cpu_%s_us_per_io' % name] = (
            seconds * 1e6 / result['ios'] if result['ios'] else None)
        result['cpu_%s_cores' % name] = seconds / wall
    return result


def precondition(vm, profile, device='/dev/vda'):
    """Write the tested region once, so reads hit allocated data.

    A thin lvol (or sparse file) answers reads of never-written blocks
    without I/O, which would flatter whichever path reads more holes.
    """
    job = fio.Job('precondition', 'write', '1m', 4)
    vm.fio(fio.arguments(job, device, profile.size_mib),
           timeout=FIO_SLACK * 2)
