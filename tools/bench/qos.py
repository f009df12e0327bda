"""QoS experiments: isolation from a noisy neighbour, and accuracy.

Front-end limits are set the way Nova's attach sets them: through the
connector's :mod:`os_brick_connector.frontend_qos` on the bdev the
controller exposes (the volume's layer). Back-end limits, for accuracy,
go through the Cinder driver itself (its ``apply_qos``, as a retype does)
on the lvol under that layer.
"""

import concurrent.futures
import json

from os_brick_connector import frontend_qos
from spdk_vhost_core import volume_bdev
from testbed.guest import qemu
from tools.bench import control
from tools.bench import fio
from tools.bench import runner

MiB = 1024 * 1024
AGGRESSOR = fio.Job('aggressor-4k-randwrite-qd64', 'randwrite', '4k', 64)
VICTIM = fio.Job('victim-4k-randread-qd1', 'randread', '4k', 1)
SATURATE = fio.Job('4k-randread-qd64', 'randread', '4k', 64)
SEQ = fio.Job('128k-read-qd8', 'read', '128k', 8)
NO_LIMIT = {'total_iops_sec': 0, 'total_bytes_sec': 0}
#: How far an achieved rate may be from a reachable limit (issue 16).
ACCURACY = 0.05
#: How much above its p99 alone the victim's p99 may be with the
#: aggressor capped (issue 16).
ISOLATION = 0.20


def _volume_id(name):
    return 'bench-%s' % name


def _guest(bench, name, lvol):
    info = bench.attach(_volume_id(name), lvol)
    return runner.running(bench, 'qos-' + name,
                          disks=[qemu.VhostUserDisk(info['path'])])


def _set(bench, name, lvol, spec):
    """A front-end spec as Nova's attach sets it; the SPDK limits set.

    On the bdev the controller exposes: the volume's layer over its lvol.
    """
    return frontend_qos.apply(
        bench.client, volume_bdev.name(_volume_id(name)), spec)


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
                results['aggressor_limits_set'] = _set(
                    bench, 'aggressor', aggr,
                    {'total_iops_sec': profile.aggressor_limit})
            # The aggressor runs one second longer on each side.
            loud = pool.submit(runner.run_job, avm, AGGRESSOR,
                               profile._replace(runtime=profile.runtime + 2))
            quiet = runner.run_job(vvm, VICTIM, profile,
                                   rate_iops=profile.victim_rate)
            results[phase] = {'victim': quiet, 'aggressor': loud.result()}
    alone = results['alone']['victim']['lat_p99_us']
    capped = results['qos']['victim']['lat_p99_us']
    results['isolation'] = ISOLATION
    results['victim_p99_capped_over_alone'] = (
        capped / alone if alone else None)
    results['within_isolation'] = (
        capped <= alone * (1 + ISOLATION) if alone else None)
    return results


def _set_backend(bench, name, lvol, spec):
    """A back-end spec as the Cinder driver puts it in force (retype).

    Through the driver itself, in its own process: its rule for the spec
    and its way of applying it (read back, saved config).
    """
    return control.cinder_ops(bench, '--apply-qos', lvol, 1,
                              json.dumps(spec))


#: Who sets a limit: Nova's attach (front-end spec, on the bdev the
#: controller exposes) or the Cinder driver (back-end spec, on the lvol).
#: The controller's bdev is a layer over the lvol: two bdevs, two limits.
SETTERS = {'front-end': _set, 'back-end': _set_backend}


def _accuracy_point(vm, profile, job, limit, unit, unthrottled):
    got = runner.run_job(vm, job, profile)
    achieved = got['iops'] if unit == 'iops' else got['bw_mib_s']
    reachable = limit <= unthrottled
    error = achieved / limit - 1
    return {'limit': limit, 'unit': unit, 'achieved': achieved,
            'percent_of_limit': 100.0 * achieved / limit,
            'lat_p99_us': got['lat_p99_us'], 'reachable': reachable,
            'within_accuracy': abs(error) <= ACCURACY if reachable
            else None}


def _points(bench, vm, lvol, profile, setter, results):
    """Every limit of the profile set by ``setter``, IOPS then MiB/s."""
    def put(spec):
        setter(bench, 'accuracy', lvol, spec)
    for limit in profile.iops_limits:
        put(dict(NO_LIMIT, total_iops_sec=limit))
        results['iops'].append(_accuracy_point(
            vm, profile, SATURATE, limit, 'iops',
            results['unthrottled_iops']))
    for limit in profile.bw_limits:
        put(dict(NO_LIMIT, total_bytes_sec=limit * MiB))
        results['bandwidth'].append(_accuracy_point(
            vm, profile, SEQ, limit, 'MiB/s', results['unthrottled_mib_s']))
    put(NO_LIMIT)


def accuracy(bench, profile):
    """Achieved IOPS and MiB/s as % of the limit, limit by limit.

    The unthrottled rate is measured first: a limit above it cannot be
    reached, and is reported as such rather than as a QoS error. Each
    limit is set once as a front-end and once as a back-end spec.
    """
    lvol = bench.make_lvol('accuracy', profile.size_mib)
    results = {'accuracy': ACCURACY}
    with _guest(bench, 'accuracy', lvol) as vm:
        runner.precondition(vm, profile)
        unthrottled = {'unthrottled_iops': runner.run_job(
            vm, SATURATE, profile)['iops'],
            'unthrottled_mib_s': runner.run_job(vm, SEQ, profile)['bw_mib_s']}
        results.update(unthrottled)
        for consumer, setter in SETTERS.items():
            points = dict(unthrottled, iops=[], bandwidth=[])
            results[consumer] = points
            _points(bench, vm, lvol, profile, setter, points)
    reachable = [p for c in SETTERS for key in ('iops', 'bandwidth')
                 for p in results[c][key] if p['reachable']]
    results['all_reachable_within_accuracy'] = (
        all(p['within_accuracy'] for p in reachable) if reachable else None)
    return results
