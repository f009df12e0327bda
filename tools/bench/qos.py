"""QoS experiments: isolation from a noisy neighbour, and accuracy.

Limits are set the way Nova's attach sets a front-end QoS spec: through
the connector's :mod:`os_brick_connector.frontend_qos` on the bdev the
controller exposes (the Cinder driver sets back-end specs the same way,
with ``bdev_set_qos_limit`` on the lvol).
"""

import concurrent.futures

from os_brick_connector import frontend_qos
from testbed.guest import qemu
from tools.bench import fio
from tools.bench import runner

MiB = 1024 * 1024
AGGRESSOR = fio.Job('aggressor-4k-randwrite-qd64', 'randwrite', '4k', 64)
VICTIM = fio.Job('victim-4k-randread-qd1', 'randread', '4k', 1)
SATURATE = fio.Job('4k-randread-qd64', 'randread', '4k', 64)
SEQ = fio.Job('128k-read-qd8', 'read', '128k', 8)
NO_LIMIT = {'total_iops_sec': 0, 'total_bytes_sec': 0}


def _guest(bench, name, lvol):
    info = bench.attach('bench-%s' % name, lvol)
    return runner.running(bench, 'qos-' + name,
                          disks=[qemu.VhostUserDisk(info['path'])])


def _set(bench, lvol, spec):
    """Set a Cinder-style spec on the lvol's bdev; the SPDK limits set."""
    return frontend_qos.apply(bench.client, lvol, spec)


def isolation(bench, profile):
    """Victim p99 alone, next to an aggressor, and with the aggressor capped.

    The victim does light random reads (rate-limited in fio); the
    aggressor saturates random writes on another volume of the same
    target, from another guest.
    """
    aggr = bench.make_lvol('aggressor', profile.size_mib)
    victim = bench.make_lvol('victim', profile.size_mib)
    results = {'aggressor_limit_iops': profile.aggressor_limit,
               'victim_rate_iops': profile.victim_rate}
    with _guest(bench, 'aggressor', aggr) as avm, \
            _guest(bench, 'victim', victim) as vvm, \
            concurrent.futures.ThreadPoolExecutor(2) as pool:
        runner.precondition(vvm, profile)
        results['alone'] = {'victim': runner.run_job(
            vvm, VICTIM, profile, rate_iops=profile.victim_rate)}
        for phase in ('no_qos', 'qos'):
            if phase == 'qos':
                results['aggressor_limits_set'] = _set(bench, aggr, {
                    'total_iops_sec': profile.aggressor_limit})
            # The aggressor runs one second longer on each side.
            loud = pool.submit(runner.run_job, avm, AGGRESSOR,
                               profile._replace(runtime=profile.runtime + 2))
            quiet = runner.run_job(vvm, VICTIM, profile,
                                   rate_iops=profile.victim_rate)
            results[phase] = {'victim': quiet, 'aggressor': loud.result()}
    return results


def _accuracy_point(bench, vm, lvol, profile, job, spec, limit, unit):
    _set(bench, lvol, spec)
    got = runner.run_job(vm, job, profile)
    achieved = got['iops'] if unit == 'iops' else got['bw_mib_s']
    return {'limit': limit, 'unit': unit, 'achieved': achieved,
            'percent_of_limit': 100.0 * achieved / limit,
            'lat_p99_us': got['lat_p99_us']}


def accuracy(bench, profile):
    """Achieved IOPS and MiB/s as % of the limit, limit by limit.

    The unthrottled rate is measured first: a limit above it cannot be
    reached, and is reported as such rather than as a QoS error.
    """
    lvol = bench.make_lvol('accuracy', profile.size_mib)
    results = {'iops': [], 'bandwidth': []}
    with _guest(bench, 'accuracy', lvol) as vm:
        runner.precondition(vm, profile)
        results['unthrottled_iops'] = runner.run_job(
            vm, SATURATE, profile)['iops']
        results['unthrottled_mib_s'] = runner.run_job(
            vm, SEQ, profile)['bw_mib_s']
        for limit in profile.iops_limits:
            point = _accuracy_point(
                bench, vm, lvol, profile, SATURATE,
                dict(NO_LIMIT, total_iops_sec=limit), limit, 'iops')
            point['reachable'] = limit <= results['unthrottled_iops']
            results['iops'].append(point)
        for limit in profile.bw_limits:
            point = _accuracy_point(
                bench, vm, lvol, profile, SEQ,
                dict(NO_LIMIT, total_bytes_sec=limit * MiB), limit, 'MiB/s')
            point['reachable'] = limit <= results['unthrottled_mib_s']
            results['bandwidth'].append(point)
        _set(bench, lvol, NO_LIMIT)
    return results
