"""Control plane: driver operations, attach/detach, many volumes per host.

The Cinder part runs in a subprocess (:mod:`tools.bench.cinder_ops`);
attach and detach go through our os-brick connector in this process,
which is what Nova's volume driver calls. Attaching N volumes to one
host shows how controllers spread over the reactors and whether the
time of one attach grows with N.
"""

import collections
import json
import os
import subprocess
import sys

from os_brick_connector import numa
from tools.bench import timing

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


class ControlPlaneError(Exception):
    """The Cinder-side subprocess failed."""


def cinder_side(bench, profile):
    cmd = [sys.executable, '-m', 'tools.bench.cinder_ops',
           '--socket', bench.target.socket_path,
           '--lvstore', bench.ensure_lvstore(),
           '--repeats', str(profile.repeats), '--sizes'] + [
               str(s) for s in profile.volume_sizes_gib]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    if proc.returncode:
        raise ControlPlaneError('cinder_ops failed (rc=%d): %s'
                                % (proc.returncode, proc.stderr[-3000:]))
    return json.loads(proc.stdout)


def attach_detach(bench, props, repeats):
    """connect_volume / disconnect_volume of one volume, no guest."""
    connect, disconnect = [], []
    for _ in range(repeats):
        info, sample = timing.measure(bench.counter,
                                      bench.connector.connect_volume, props)
        connect.append(sample)
        disconnect.append(timing.measure(
            bench.counter, bench.connector.disconnect_volume, props,
            info)[1])
    return {'attach': timing.summarise(connect),
            'detach': timing.summarise(disconnect)}


def scaling(bench, counts):
    """Attach up to max(counts) volumes one by one; time and placement."""
    total = max(counts)
    attach = []
    placed = []
    for index in range(total):
        lvol = bench.make_lvol('scale%d' % index, 16)
        props = bench.props('bench-scale%d' % index, lvol)
        info, sample = timing.measure(
            bench.counter, bench.connector.connect_volume, props)
        bench.addCleanup(bench.connector.disconnect_volume, props, info,
                         force=True)
        attach.append(sample)
        placed.append(info['cpumask'])
    points = []
    for count in counts:
        per_reactor = collections.Counter(
            core for mask in placed[:count]
            for core in numa.cpumask_cores(mask))
        window = attach[:count]
        points.append({
            'volumes': count,
            'last_attach_seconds': window[-1]['seconds'],
            'mean_attach_seconds': sum(s['seconds'] for s in window)
            / count,
            'last_attach_rpc_calls': window[-1]['rpc_calls'],
            'controllers_per_reactor': {str(core): n for core, n in
                                        sorted(per_reactor.items())}})
    return {'attach_seconds': [s['seconds'] for s in attach],
            'attach_rpc_calls': [s['rpc_calls'] for s in attach],
            'points': points}


def run(bench, profile):
    cinder = cinder_side(bench, profile)
    props = cinder.pop('connection_info')['data']
    return {'cinder': cinder,
            'connector': attach_detach(bench, props, profile.repeats),
            'scaling': scaling(bench, profile.attach_counts)}
