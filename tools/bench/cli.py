"""``python -m tools.bench``: run the experiments, write the figures.

Each experiment is independent; one that fails is reported (in the JSON
and the summary) and the others still run, but the exit status says so.
"""

import argparse
import datetime
import os
import sys
import tempfile
import traceback

from tools.bench import attach_memory
from tools.bench import control
from tools.bench import dataplane
from tools.bench import guest
from tools.bench import modes
from tools.bench import profiles
from tools.bench import qos
from tools.bench import report
from tools.bench import scale
from tools.bench import target

EXPERIMENTS = {
    'dataplane': dataplane.run,
    'qos_isolation': qos.isolation,
    'qos_accuracy': qos.accuracy,
    'control_plane': control.run,
    'scale': scale.run,
    'attach_memory': attach_memory.run,
    'modes': modes.run,
}
TCG_LABEL = 'real SPDK target, TCG guest: not hardware numbers'


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog='python -m tools.bench',
        description='spdk-vhost benchmark: data plane, QoS, control plane, '
                    'poll vs interrupt mode.')
    parser.add_argument('--quick', action='store_true',
                        help='a short smoke run (a few minutes): '
                             'checks that every experiment gives figures')
    parser.add_argument('--output-dir', required=True,
                        help='where results.json, *.png and summary.md go')
    parser.add_argument('--experiments', nargs='+',
                        choices=sorted(EXPERIMENTS),
                        default=list(EXPERIMENTS))
    parser.add_argument('--backing',
                        help='file or block device backing both data paths '
                             '(OVERWRITTEN); default: a sparse file in the '
                             'work directory')
    parser.add_argument('--backing-gib', type=int, default=4,
                        help='size of the default backing file')
    parser.add_argument('--aio', choices=('io_uring', 'native'),
                        default='io_uring',
                        help='AIO engine of the virtio-blk baseline')
    parser.add_argument('--accel', choices=('auto', 'kvm', 'tcg'),
                        default='auto',
                        help='guest accelerator; auto: KVM when '
                             'SPDK_RPC_SOCKET is set (an operator\'s '
                             'target) and /dev/kvm is usable, else TCG')
    parser.add_argument('--target-pid', type=int,
                        help='PID of the target at SPDK_RPC_SOCKET, for '
                             'its CPU time (else the bench starts its own '
                             'spdk_tgt)')
    parser.add_argument('--workdir',
                        help='scratch directory (default: a temporary one)')
    return parser.parse_args(argv)


def _accel(choice):
    """auto: KVM with an operator's target on a host with usable /dev/kvm.

    With a target of the bench's own, TCG: that is a CI or developer
    machine, where nested KVM is not dependable (guests hang at boot).
    """
    if choice == 'auto':
        real = bool(os.environ.get('SPDK_RPC_SOCKET'))
        return 'kvm' if real and guest.kvm_usable() else 'tcg'
    return choice


def _label(bench):
    if bench.accel == 'tcg':
        return TCG_LABEL
    return 'real SPDK target + KVM'


def _run_experiments(args, workdir, profile, results):
    with target.BenchTarget(workdir, args.backing_gib, args.backing,
                            args.target_pid, _accel(args.accel)) as bench:
        results['meta'] = {
            'label': _label(bench), 'profile': profile.name,
            'target': '%s %s' % (
                bench.target.app,
                bench.admin.spdk_get_version()['version']),
            'accel': bench.accel, 'profile_settings': profile._asdict(),
            'started': datetime.datetime.now(
                datetime.timezone.utc).isoformat(timespec='seconds')}
        # In this order: the baseline must use the raw backing first.
        for name in [n for n in EXPERIMENTS if n in args.experiments]:
            print('== %s' % name, flush=True)
            try:
                if name == 'dataplane':
                    results[name] = dataplane.run(bench, profile, args.aio)
                else:
                    results[name] = EXPERIMENTS[name](bench, profile)
            except Exception:  # reported, and the run fails at the end
                results['errors'][name] = traceback.format_exc()
                print(results['errors'][name], file=sys.stderr, flush=True)


def run(args, workdir):
    profile = profiles.QUICK if args.quick else profiles.FULL
    guest.want_fio()
    results = {'errors': {}}
    try:
        _run_experiments(args, workdir, profile, results)
    except Exception:  # e.g. a failed clean-up: the figures still count
        results['errors']['teardown'] = traceback.format_exc()
        print(results['errors']['teardown'], file=sys.stderr, flush=True)
    if 'meta' not in results:
        return 1  # no target, no figures
    os.makedirs(args.output_dir, exist_ok=True)
    paths = [report.write_json(results, args.output_dir),
             report.write_markdown(results, args.output_dir)]
    paths += report.write_plots(results, args.output_dir)
    for path in paths:
        print('wrote %s' % path)
    return 1 if results['errors'] else 0


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.workdir:
        os.makedirs(args.workdir, exist_ok=True)
        return run(args, args.workdir)
    with tempfile.TemporaryDirectory(prefix='spdk-vhost-bench-') as workdir:
        return run(args, workdir)
