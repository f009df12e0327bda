"""Poll vs interrupt mode: what an idle target costs, and what I/O costs.

(A) Idle: for each SPDK application a role uses (``spdk_tgt``,
``vhost``, ``nvmf_tgt``), polling and with ``--interrupt-mode``, a fresh
target on core 0 holding what its role holds (an lvol store on a sparse
file through AIO, a thin lvol, a vhost-blk controller and/or an NVMe/TCP
export on loopback), then its share of a core over a few seconds with
nothing to do.

(B) Data plane: the same guest on a vhost-blk controller of a polling
and of an interrupt-mode ``vhost``, in one run: fio jobs (IOPS, latency,
target CPU per I/O) and an IOPS QoS limit; the report gives
interrupt/poll ratios.

The bench's own ``spdk_tgt`` is paused meanwhile (see
:meth:`BenchTarget.paused`), so that its polling reactor does not share
core 0 with the targets measured.
"""

import contextlib
import functools
import os
import time

from testbed import cpu
from testbed.guest import qemu
from testbed import net
from testbed import spdk_target
from tools.bench import fio
from tools.bench import qos
from tools.bench import runner

MODES = ('poll', 'interrupt')
#: Application -> what it holds besides the lvol: its roles' exports.
APPS = {'spdk_tgt': ('vhost', 'nvmf'), 'vhost': ('vhost',),
        'nvmf_tgt': ('nvmf',)}
JOBS = ('4k-randread-qd1', '4k-randwrite-qd64')
QOS_IOPS = 1000
SETTLE = 1.0  # seconds after set-up before the idle meter starts
CTRLR = 'modes.0'
NQN = 'nqn.2016-06.io.spdk:bench-modes'
#: Figures of a job compared as interrupt/poll.
RATIO_KEYS = ('iops', 'lat_mean_us', 'lat_p99_us', 'cpu_target_us_per_io')


@contextlib.contextmanager
def _target(app, mode, size_mib, exports):
    """A fresh target on core 0 with an lvol and the given exports."""
    with spdk_target.SpdkTarget(app=app, interrupt_mode=mode == 'interrupt',
                                name='modes-%s-%s' % (app, mode)) as tgt:
        tgt.aio_lvstore('modes', size_mib=size_mib + 64, block_size=512)
        lvol = tgt.rpc('bdev_lvol_create', {
            'lvol_name': 'vol', 'size_in_mib': size_mib,
            'lvs_name': 'modes', 'thin_provision': True})
        if 'vhost' in exports:
            tgt.rpc('vhost_create_blk_controller',
                    {'ctrlr': CTRLR, 'dev_name': lvol, 'cpumask': '0x1'})
        if 'nvmf' in exports:
            _export(tgt, lvol)
        yield tgt, lvol


def _export(tgt, lvol):
    tgt.rpc('nvmf_create_transport', {'trtype': 'TCP'})
    tgt.rpc('nvmf_create_subsystem', {'nqn': NQN, 'allow_any_host': True})
    tgt.rpc('nvmf_subsystem_add_ns',
            {'nqn': NQN, 'namespace': {'bdev_name': lvol}})
    tgt.rpc('nvmf_subsystem_add_listener', {'nqn': NQN, 'listen_address': {
        'trtype': 'TCP', 'adrfam': 'IPv4', 'traddr': '127.0.0.1',
        'trsvcid': str(net.free_port())}})


def core_ticks(core=0, stat='/proc/stat'):
    """(busy, total) clock ticks of one CPU so far, from /proc/stat."""
    with open(stat) as f:
        for line in f:
            fields = line.split()
            if fields[0] == 'cpu%d' % core:
                ticks = [int(v) for v in fields[1:9]]
                return sum(ticks) - ticks[3] - ticks[4], sum(ticks)
    raise ValueError('no cpu%d in %s' % (core, stat))


def idle(profile):
    """app -> mode -> figures of an idle target.

    ``cpu_share``: the target's share of a core; ``core0_busy``: how busy
    core 0 was meanwhile, all processes together. A polling target takes
    what it is given: on a core others use too, less than 1.0.
    """
    results = {}
    for app, exports in APPS.items():
        for mode in MODES:
            with _target(app, mode, profile.size_mib, exports) as (tgt, _):
                time.sleep(SETTLE)
                busy, total = core_ticks()
                share = cpu.share(tgt.pid, profile.idle_seconds)
                busy_end, total_end = core_ticks()
            results.setdefault(app, {})[mode] = {
                'cpu_share': share,
                'core0_busy': (busy_end - busy) / max(total_end - total, 1),
                'holds': ['aio lvstore', 'thin lvol'] + list(exports)}
    return results


def _jobs(profile):
    return [job for job in fio.DATAPLANE_JOBS if job.name in JOBS]


def _dataplane_one(bench, profile, mode):
    with _target('vhost', mode, profile.size_mib, ('vhost',)) as (tgt, lvol):
        disk = qemu.VhostUserDisk(os.path.join(tgt.vhost_dir, CTRLR))
        with runner.running(bench, 'modes-' + mode, disks=[disk]) as vm:
            sources = {
                'target': functools.partial(cpu.process_seconds, tgt.pid),
                'qemu': functools.partial(cpu.process_seconds, vm.pid)}
            runner.precondition(vm, profile)
            result = {job.name: runner.run_job(vm, job, profile,
                                               cpu_sources=sources)
                      for job in _jobs(profile)}
            # Set once the guest has the bdev open (SPDK wants a channel).
            tgt.rpc('bdev_set_qos_limit',
                    {'name': lvol, 'rw_ios_per_sec': QOS_IOPS})
            got = runner.run_job(vm, qos.SATURATE, profile)
            result['qos'] = {'limit_iops': QOS_IOPS, 'achieved_iops':
                             got['iops'], 'lat_p99_us': got['lat_p99_us']}
    return result


def _ratio(interrupt, poll):
    if interrupt is None or not poll:
        return None
    return interrupt / poll


def ratios(dataplane, jobs):
    """interrupt/poll of each job's RATIO_KEYS, and of the QoS rate."""
    out = {job: {key: _ratio(dataplane['interrupt'][job][key],
                             dataplane['poll'][job][key])
                 for key in RATIO_KEYS} for job in jobs}
    out['qos_achieved_iops'] = _ratio(
        dataplane['interrupt']['qos']['achieved_iops'],
        dataplane['poll']['qos']['achieved_iops'])
    return out


def run(bench, profile):
    with bench.paused():
        results = {'idle_seconds': profile.idle_seconds,
                   'idle': idle(profile),
                   'jobs': [job.name for job in _jobs(profile)]}
        results['dataplane'] = {mode: _dataplane_one(bench, profile, mode)
                                for mode in MODES}
    results['ratios'] = ratios(results['dataplane'], results['jobs'])
    return results
