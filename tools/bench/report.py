"""Write a run's figures: results.json, one PNG per experiment, summary.md."""

import json
import os

import matplotlib
matplotlib.use('Agg')  # no display: files only
from matplotlib import pyplot  # noqa: E402,I202 (after the backend)

from tools.bench import dataplane  # noqa: E402
from tools.bench import modes  # noqa: E402
from tools.bench import qos  # noqa: E402

PATHS = (dataplane.BASELINE, dataplane.VHOST)


def write_json(results, out_dir):
    path = os.path.join(out_dir, 'results.json')
    with open(path, 'w') as f:
        json.dump(results, f, indent=2, sort_keys=True)
    return path


def _bars(ax, labels, series, ylabel):
    width = 0.8 / len(series)
    for i, (name, values) in enumerate(series.items()):
        ax.bar([x + i * width for x in range(len(labels))],
               [v or 0 for v in values], width, label=name)
    ax.set_xticks([x + width * (len(series) - 1) / 2
                   for x in range(len(labels))])
    ax.set_xticklabels(labels, rotation=30, ha='right', fontsize=7)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)


def _save(fig, out_dir, name, label):
    fig.suptitle('%s (%s)' % (name.replace('_', ' '), label), fontsize=9)
    fig.tight_layout()
    path = os.path.join(out_dir, name + '.png')
    fig.savefig(path, dpi=90)
    pyplot.close(fig)
    return path


def plot_dataplane(res, out_dir, label):
    jobs = res['jobs']
    fig, axes = pyplot.subplots(1, 3, figsize=(13, 4))
    for ax, key, ylabel in ((axes[0], 'iops', 'IOPS'),
                            (axes[1], 'lat_p99_us', 'p99 latency (us)'),
                            (axes[2], 'cpu_io_path_us_per_io',
                             'I/O path CPU per I/O (us)')):
        _bars(ax, jobs, {p: [res[p][j][key] for j in jobs] for p in PATHS},
              ylabel)
    return _save(fig, out_dir, 'dataplane', label)


def plot_isolation(res, out_dir, label):
    phases = ('alone', 'no_qos', 'qos')
    fig, ax = pyplot.subplots(figsize=(6, 4))
    _bars(ax, phases, {
        'victim p99 (us)': [res[p]['victim']['lat_p99_us'] for p in phases],
        'victim mean (us)': [res[p]['victim']['lat_mean_us']
                             for p in phases]}, 'latency (us)')
    return _save(fig, out_dir, 'qos_isolation', label)


def plot_accuracy(res, out_dir, label):
    fig, axes = pyplot.subplots(1, 2, figsize=(10, 4))
    for ax, key in zip(axes, ('iops', 'bandwidth')):
        for consumer in qos.SETTERS:
            points = res[consumer][key]
            ax.plot([p['limit'] for p in points],
                    [p['percent_of_limit'] for p in points], 'o-',
                    label=consumer)
        ax.axhline(100, color='grey', linestyle=':')
        ax.set_xscale('log')
        ax.set_xlabel('limit (%s)' % ('IOPS' if key == 'iops' else 'MiB/s'))
        ax.set_ylabel('achieved, % of limit')
        ax.legend(fontsize=7)
    return _save(fig, out_dir, 'qos_accuracy', label)


def plot_control(res, out_dir, label):
    fig, axes = pyplot.subplots(1, 3, figsize=(13, 4))
    by_size = res['cinder']['by_size']
    sizes = sorted(by_size, key=int)
    ops = list(by_size[sizes[0]])
    series = {'%s GiB' % s: [by_size[s][o]['seconds_mean'] for o in ops]
              for s in sizes}
    _bars(axes[0], ops, series, 'seconds')
    scaling = res['scaling']
    axes[1].plot(range(1, len(scaling['attach_seconds']) + 1),
                 scaling['attach_seconds'], 'o-')
    axes[1].set_xlabel('volumes attached (N)')
    axes[1].set_ylabel('time of the N-th attach (s)')
    last = scaling['points'][-1]
    cores = sorted(last['controllers_per_reactor'], key=int)
    axes[2].bar(cores, [last['controllers_per_reactor'][c] for c in cores])
    axes[2].set_xlabel('reactor (core)')
    axes[2].set_ylabel('controllers at N=%d' % last['volumes'])
    return _save(fig, out_dir, 'control_plane', label)


def plot_scale(res, out_dir, label):
    ops = sorted(res['ratios'])
    fig, ax = pyplot.subplots(figsize=(11, 4))
    _bars(ax, ops, {key: [res['ratios'][op][key] for op in ops]
                    for key in ('seconds_median', 'rpc_calls',
                                'reply_bytes')},
          'largest / smallest')
    ax.axhline(res['limit'], color='grey', linestyle=':')
    ax.set_yscale('log')
    return _save(fig, out_dir, 'scale', label)


def plot_modes(res, out_dir, label):
    fig, axes = pyplot.subplots(1, 2, figsize=(11, 4))
    apps = list(res['idle'])
    _bars(axes[0], apps, {m: [res['idle'][a][m]['cpu_share'] * 100
                              for a in apps] for m in modes.MODES},
          'idle CPU, % of a core')
    keys = list(modes.RATIO_KEYS)
    _bars(axes[1], keys, {j: [res['ratios'][j][k] for k in keys]
                          for j in res['jobs']}, 'interrupt / poll')
    axes[1].axhline(1, color='grey', linestyle=':')
    return _save(fig, out_dir, 'modes', label)


PLOTS = {'dataplane': plot_dataplane, 'qos_isolation': plot_isolation,
         'qos_accuracy': plot_accuracy, 'control_plane': plot_control,
         'scale': plot_scale, 'modes': plot_modes}


def write_plots(results, out_dir):
    label = results['meta']['label']
    return [PLOTS[name](results[name], out_dir, label)
            for name in PLOTS if name in results]


def _fmt(value, digits=1):
    if value is None:
        return '-'
    if isinstance(value, float):
        return '%.*f' % (digits, value)
    return str(value)


def _table(header, rows):
    lines = ['| ' + ' | '.join(header) + ' |',
             '|' + '---|' * len(header)]
    lines += ['| ' + ' | '.join(_fmt(c) for c in row) + ' |' for row in rows]
    return lines + ['']


def _md_dataplane(res):
    rows = [[job, path, r['iops'], r['bw_mib_s'], r['lat_mean_us'],
             r['lat_p50_us'], r['lat_p99_us'], r['lat_p99.9_us'],
             r['cpu_io_path_us_per_io'], r['cpu_qemu_us_per_io']]
            for job in res['jobs'] for path in PATHS
            for r in [res[path][job]]]
    return ['## Data plane', ''] + _table(
        ['job', 'path', 'IOPS', 'MiB/s', 'mean us', 'p50 us', 'p99 us',
         'p99.9 us', 'I/O path CPU us/IO', 'QEMU CPU us/IO'], rows)


def _md_isolation(res):
    rows = [[phase, res[phase]['victim']['lat_p99_us'],
             res[phase]['victim']['iops'],
             res[phase].get('aggressor', {}).get('iops')]
            for phase in ('alone', 'no_qos', 'qos')]
    return (['## QoS isolation', '',
             'Aggressor limit: %s IOPS; victim reads at %s IOPS. Victim '
             'p99 with the aggressor capped / alone: %s (at most %s).'
             % (res['aggressor_limit_iops'], res['victim_rate_iops'],
                _fmt(res['victim_p99_capped_over_alone'], 2),
                _fmt(1 + res['isolation'], 2)), '']
            + _table(['phase', 'victim p99 us', 'victim IOPS',
                      'aggressor IOPS'], rows))


def _md_accuracy(res):
    rows = [[consumer, p['limit'], p['unit'], p['achieved'],
             p['percent_of_limit'],
             ('yes' if p['within_accuracy'] else 'NO')
             if p['reachable'] else 'unreachable']
            for consumer in qos.SETTERS
            for p in res[consumer]['iops'] + res[consumer]['bandwidth']]
    return (['## QoS accuracy', '',
             'Unthrottled: %s IOPS, %s MiB/s.'
             % (_fmt(res['unthrottled_iops']),
                _fmt(res['unthrottled_mib_s'])), '']
            + _table(['spec', 'limit', 'unit', 'achieved', '% of limit',
                      'within %d%%' % round(res['accuracy'] * 100)], rows))


def _md_control(res):
    rows = [[op, size, r['seconds_mean'] * 1000, r['rpc_calls']]
            for size, ops in sorted(res['cinder']['by_size'].items(),
                                    key=lambda i: int(i[0]))
            for op, r in ops.items()]
    rows += [[op, '-', r['seconds_mean'] * 1000, r['rpc_calls']]
             for part in ('connection', 'connector')
             for op, r in (res['cinder'][part] if part == 'connection'
                           else res[part]).items()]
    scale = [[p['volumes'], p['last_attach_seconds'] * 1000,
              p['mean_attach_seconds'] * 1000,
              ', '.join('%s: %d' % i for i in
                        p['controllers_per_reactor'].items())]
             for p in res['scaling']['points']]
    return (['## Control plane', ''] + _table(
        ['operation', 'GiB', 'ms (mean)', 'JSON-RPC calls'], rows)
        + _table(['N volumes', 'N-th attach ms', 'mean attach ms',
                  'controllers per reactor'], scale))


def _md_scale(res):
    pools = [str(p) for p in res['pools']]
    ctrls = [str(c) for c in res['controllers']]
    rows = [[op, label, r['seconds_median'] * 1000, r['rpc_calls'],
             r['reply_bytes']]
            for op in res['cinder'][pools[0]]
            for label, r in [(p, res['cinder'][p][op]) for p in pools] + [
                ('%s, %s ctrls' % (pools[0], ctrls[-1]),
                 res['cinder_vs_controllers'][op])]]
    rows += [[op, '%s, %s ctrls' % (pool, ctrl), r['seconds_median'] * 1000,
              r['rpc_calls'], r['reply_bytes']]
             for op in ('attach', 'detach') for pool in pools
             for ctrl in ctrls for r in [res['connector'][pool][ctrl][op]]]
    ratios = [[op, _fmt(r['seconds_median'], 2), _fmt(r['rpc_calls'], 2),
               _fmt(r['reply_bytes'], 2),
               'yes' if res['verdicts'][op]['within_limit'] else 'NO',
               ', '.join('%s %d -> %d' % (m, a, b) for m, (a, b) in
                         r['growing_calls'].items()) or '-']
              for op, r in sorted(res['ratios'].items())]
    return (['## Scale', '',
             'Pools of %s volumes; %s controllers on the target.'
             % (', '.join(pools), ', '.join(ctrls)), '']
            + _table(['operation', 'pool', 'ms (median)', 'JSON-RPC calls',
                      'reply bytes'], rows)
            + ['Ratios, largest / smallest (limit %s):' % res['limit'], '']
            + _table(['operation', 'time', 'calls', 'reply bytes',
                      'within limit', 'replies that grew (bytes)'], ratios))


def _md_attach_memory(res):
    rows = []
    for size, r in sorted(res['by_memory_mib'].items(),
                          key=lambda i: int(i[0])):
        if 'skipped' in r:
            rows.append([size, 'skipped: ' + r['skipped']] + [None] * 5)
            continue
        rows.append([size, r['boot_seconds']] + [
            r['%s_seconds_median' % s] * 1000
            for s in res['steps'] + ['total']] + [r['console_seconds']
                                                  * 1000])
    return (['## Attach time vs guest memory', '']
            + _table(['guest MiB', 'boot s']
                     + ['%s ms' % s for s in res['steps']]
                     + ['total ms', 'console ms'], rows))


def _md_modes(res):
    idle = [[app, ', '.join(res['idle'][app]['poll']['holds'])]
            + [res['idle'][app][m][k] * 100
               for k in ('cpu_share', 'core0_busy') for m in modes.MODES]
            for app in res['idle']]
    plane = [[job, mode] + [res['dataplane'][mode][job][k]
                            for k in modes.RATIO_KEYS]
             for job in res['jobs'] for mode in modes.MODES]
    plane += [['qos %d IOPS' % res['dataplane'][m]['qos']['limit_iops'],
               m, res['dataplane'][m]['qos']['achieved_iops'], None,
               res['dataplane'][m]['qos']['lat_p99_us'], None]
              for m in modes.MODES]
    ratios = [[job] + [res['ratios'][job][k] for k in modes.RATIO_KEYS]
              for job in res['jobs']]
    ratios.append(['qos achieved IOPS', res['ratios']['qos_achieved_iops'],
                   None, None, None])
    header = ['IOPS', 'mean us', 'p99 us', 'target CPU us/IO']
    return (['## Poll vs interrupt mode', '',
             'Idle target on core 0, CPU over %s s, %% of a core; and how '
             'busy core 0 was meanwhile (all processes):'
             % res['idle_seconds'], '']
            + _table(['application', 'holds', 'poll %', 'interrupt %',
                      'core 0 busy (poll) %', 'core 0 busy (interrupt) %'],
                     idle)
            + ['Through a polling and an interrupt-mode `vhost`:', '']
            + _table(['job', 'mode'] + header, plane)
            + ['Ratios, interrupt / poll:', '']
            + _table(['job'] + header, [
                [r[0]] + [_fmt(v, 2) for v in r[1:]] for r in ratios]))


MARKDOWN = {'dataplane': _md_dataplane, 'qos_isolation': _md_isolation,
            'qos_accuracy': _md_accuracy, 'control_plane': _md_control,
            'scale': _md_scale, 'attach_memory': _md_attach_memory,
            'modes': _md_modes}


def write_markdown(results, out_dir):
    meta = results['meta']
    lines = ['# spdk-vhost benchmark: %s' % meta['label'], '',
             '- profile: %s; SPDK target: %s; guest accel: %s; %s'
             % (meta['profile'], meta['target'], meta['accel'],
                meta['started']), '']
    for name, render in MARKDOWN.items():
        if name in results:
            lines += render(results[name])
    for name, error in sorted(results.get('errors', {}).items()):
        lines += ['## %s: FAILED' % name, '', '```', error, '```', '']
    path = os.path.join(out_dir, 'summary.md')
    with open(path, 'w') as f:
        f.write('\n'.join(lines))
    return path
