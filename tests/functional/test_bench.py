"""The benchmark's --quick smoke run: every experiment gives its figures.

A functional check only, never a performance assertion: under TCG the
numbers mean nothing, but each must be there and be a measurement (a
positive rate, a latency, a count of RPCs). The bench starts a real
``spdk_tgt`` of its own when ``$SPDK_RPC_SOCKET`` is not set.
"""

import json
import os
import subprocess
import sys

import fixtures

from tests import base
from tools.bench import cli
from tools.bench import profiles
from tools.bench import report

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PNG = b'\x89PNG\r\n\x1a\n'


class QuickBenchTest(base.TestCase):
    """The quick run in four parts, each checked from every side.

    Four runs of the command (``--experiments``) of about the same
    length, so that two test workers share the smoke run instead of one
    carrying all of it; each part starts its own target, as the whole
    run does.
    """

    def run_bench(self, *experiments):
        self.useFixture(fixtures.Timeout(900, gentle=True))
        self.out = self.useFixture(fixtures.TempDir()).path
        env = dict(os.environ)
        env.pop('SPDK_RPC_SOCKET', None)  # a real target of its own
        proc = subprocess.run(
            [sys.executable, '-m', 'tools.bench', '--quick',
             '--output-dir', self.out, '--backing-gib', '1',
             '--experiments'] + list(experiments),
            cwd=REPO, env=env, capture_output=True, text=True, timeout=840)
        self.assertEqual(0, proc.returncode, proc.stderr[-5000:])
        with open(os.path.join(self.out, 'results.json')) as f:
            self.results = json.load(f)
        self.assertEqual({}, self.results['errors'])
        self.assertEqual(cli.TCG_LABEL, self.results['meta']['label'])
        self.assertEqual(set(experiments),
                         set(self.results) - {'meta', 'errors'})
        self.check_files(experiments)

    def test_data_plane_gives_its_figures(self):
        self.run_bench('dataplane')
        self.check_dataplane(self.results['dataplane'])

    def test_qos_gives_its_figures(self):
        self.run_bench('qos_isolation', 'qos_accuracy')
        self.check_qos(self.results)

    def test_control_plane_scale_and_attach_memory_give_their_figures(self):
        self.run_bench('control_plane', 'scale', 'attach_memory')
        self.check_control(self.results['control_plane'])
        self.check_scale(self.results['scale'])
        self.check_attach_memory(self.results['attach_memory'])

    def test_modes_give_their_figures(self):
        self.run_bench('modes')
        self.check_modes(self.results['modes'])

    def check_dataplane(self, dataplane):
        self.assertEqual(list(profiles.QUICK.jobs), dataplane['jobs'])
        for path in ('virtio-blk', 'vhost-user-blk'):
            for job in dataplane['jobs']:
                figures = dataplane[path][job]
                self.assertGreater(figures['iops'], 0, (path, job))
                self.assertGreaterEqual(figures['lat_p99.9_us'],
                                        figures['lat_p50_us'], (path, job))
                # /proc counts CPU in 10 ms ticks: QEMU's IOThread may
                # show none in a 1 s job on a busy host; SPDK's polling
                # reactor always shows some.
                cpu_floor = 1 if path == 'vhost-user-blk' else 0
                self.assertGreaterEqual(figures['cpu_io_path_us_per_io'],
                                        cpu_floor, (path, job))

    def check_qos(self, res):
        for phase in ('alone', 'no_qos', 'qos'):
            self.assertGreater(
                res['qos_isolation'][phase]['victim']['lat_p99_us'], 0)
        self.assertEqual({'rw_ios_per_sec': 1000},
                         res['qos_isolation']['aggressor_limits_set'])
        self.assertIsNotNone(
            res['qos_isolation']['victim_p99_capped_over_alone'])
        for consumer in ('front-end', 'back-end'):
            points = res['qos_accuracy'][consumer]
            self.assertEqual(list(profiles.QUICK.iops_limits),
                             [p['limit'] for p in points['iops']])
            self.assertEqual(list(profiles.QUICK.bw_limits),
                             [p['limit'] for p in points['bandwidth']])
            for point in points['iops'] + points['bandwidth']:
                self.assertGreater(point['achieved'], 0, (consumer, point))

    def check_control(self, control):
        for size in ('1', '64'):
            for op in ('create', 'snapshot', 'clone_from_snapshot',
                       'clone_volume'):
                self.assertGreater(
                    control['cinder']['by_size'][size][op]['rpc_calls'], 0)
        self.assertIn('vhost_create_blk_controller',
                      control['connector']['attach']['rpc'])
        # Round trips are figures that must hold, even under TCG.
        trips = control['round_trips']
        self.assertEqual({'attach', 'detach', 'create', 'delete',
                          'clone_from_snapshot'}, set(trips))
        self.assertEqual([], [op for op, figures in trips.items()
                              if figures['over_enforced']], trips)
        self.assertEqual([1, 2, 4], [p['volumes'] for p in
                                     control['scaling']['points']])

    def check_scale(self, scale):
        # Calls and reply bytes per operation, largest vs smallest pool
        # and controller count: figures that must hold, even under TCG
        # (the time is only reported). The baseline can only go down.
        self.assertEqual([10, 200], scale['pools'])
        self.assertEqual([1, 10], scale['controllers'])
        for pool in scale['pools']:
            held = scale['on_target'][str(pool)]
            self.assertGreaterEqual(held['bdevs'], pool)
            self.assertGreaterEqual(held['controllers'], 1)
            ops = scale['cinder'][str(pool)]
            for op in ('create', 'snapshot', 'clone_from_snapshot',
                       'delete', 'get_volume_stats', 'pool_stats'):
                self.assertGreater(ops[op]['rpc_calls'], 0, (pool, op))
                self.assertGreater(ops[op]['reply_bytes'], 0, (pool, op))
            for count in scale['controllers']:
                self.assertIn('vhost_create_blk_controller',
                              scale['connector'][str(pool)][str(count)]
                              ['attach']['rpc'])
        verdicts = scale['verdicts']
        self.assertLessEqual(
            {'create', 'snapshot', 'clone_from_snapshot', 'delete',
             'get_volume_stats', 'pool_stats', 'attach', 'detach',
             'attach_vs_controllers', 'detach_vs_controllers'},
            set(verdicts))
        self.assertEqual({}, {op: (v['over_enforced'], scale['ratios'][op])
                              for op, v in verdicts.items()
                              if v['over_enforced']})

    def check_attach_memory(self, res):
        figures = res['by_memory_mib']['512']
        self.assertNotIn('skipped', figures)
        for step in res['steps']:
            self.assertGreater(figures['%s_seconds_median' % step], 0, step)
        # The memory table was seen in the target's log, after the start.
        self.assertGreater(figures['mem_table_seconds_median'], 0)
        self.assertIn('read message VHOST_USER_SET_MEM_TABLE',
                      [m[1] for m in figures['samples'][0]['messages']])

    def check_modes(self, modes):
        self.assertEqual({'spdk_tgt', 'vhost', 'nvmf_tgt'},
                         set(modes['idle']))
        for app, by_mode in modes['idle'].items():
            # A polling reactor always runs; how much depends on the load.
            self.assertGreater(by_mode['poll']['cpu_share'], 0, app)
            self.assertGreaterEqual(by_mode['interrupt']['cpu_share'], 0,
                                    app)
            self.assertGreater(by_mode['poll']['core0_busy'], 0, app)
        for mode in ('poll', 'interrupt'):
            for job in modes['jobs']:
                figures = modes['dataplane'][mode][job]
                self.assertGreater(figures['iops'], 0, (mode, job))
                self.assertGreater(figures['cpu_target_us_per_io'], 0,
                                   (mode, job))
            self.assertGreater(
                modes['dataplane'][mode]['qos']['achieved_iops'], 0, mode)
        for job in modes['jobs']:
            self.assertIsNotNone(modes['ratios'][job]['iops'], job)
        self.assertIsNotNone(modes['ratios']['qos_achieved_iops'])

    TITLES = {'dataplane': 'Data plane', 'qos_isolation': 'QoS isolation',
              'qos_accuracy': 'QoS accuracy', 'control_plane': 'Control plane',
              'scale': 'Scale', 'attach_memory': 'Attach time vs guest memory',
              'modes': 'Poll vs interrupt mode'}

    def check_files(self, experiments):
        for name in experiments:
            if name in report.PLOTS:  # attach_memory is a table only
                with open(os.path.join(self.out, name + '.png'), 'rb') as f:
                    self.assertEqual(PNG, f.read(8), name)
        with open(os.path.join(self.out, 'summary.md')) as f:
            summary = f.read()
        self.assertIn(cli.TCG_LABEL, summary)
        for name in experiments:
            self.assertIn('## ' + self.TITLES[name], summary)
