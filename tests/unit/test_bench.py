"""Unit tests of the benchmark's parsing, counting and CPU accounting."""

import json
import os
import socket
import threading

import fixtures

from testbed import cpu
from testbed.guest import initramfs
from tests import base
from tools.bench import control
from tools.bench import fio
from tools.bench import modes
from tools.bench import report
from tools.bench import rpc_counter
from tools.bench import timing


def _side(iops, ios, bw, mean_ns, pcts):
    return {'iops': iops, 'total_ios': ios, 'bw': bw,
            'lat_ns': {'mean': mean_ns, 'percentile': pcts}}


class FioTest(base.TestCase):

    def test_figures_take_the_side_that_did_io(self):
        report = {'jobs': [{
            'jobname': 'j', 'error': 0,
            'read': _side(0, 0, 0, 0, {}),
            'write': _side(2000.0, 4000, 8000, 500000.0,
                           {'50.000000': 400000, '99.000000': 2000000,
                            '99.900000': 3000000})}]}
        got = fio.figures(report)
        self.assertEqual({'iops': 2000.0, 'bw_mib_s': 8000 / 1024.0,
                          'ios': 4000, 'lat_mean_us': 500.0,
                          'lat_p50_us': 400.0, 'lat_p99_us': 2000.0,
                          'lat_p99.9_us': 3000.0}, got)

    def test_failed_job_is_an_error(self):
        report = {'jobs': [{'jobname': 'j', 'error': 5,
                            'read': _side(0, 0, 0, 0, {}),
                            'write': _side(0, 0, 0, 0, {})}]}
        self.assertRaises(ValueError, fio.figures, report)

    def test_arguments_timed_or_one_pass(self):
        job = fio.Job('x', 'randread', '4k', 64)
        timed = fio.arguments(job, '/dev/vda', 32, runtime=5, ramp=1,
                              rate_iops=100).split()
        self.assertIn('--time_based', timed)
        self.assertIn('--runtime=5', timed)
        self.assertIn('--rate_iops=100', timed)
        self.assertIn('--iodepth=64', timed)
        once = fio.arguments(job, '/dev/vda', 32).split()
        self.assertNotIn('--time_based', once)
        self.assertIn('--size=32M', once)


class _Upstream(object):
    """A tiny JSON-RPC server answering every request with its method."""

    def __init__(self, path):
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        self.server.listen(1)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        conn, _addr = self.server.accept()
        with conn:
            decoder = json.JSONDecoder()
            buf = ''
            while True:
                data = conn.recv(4096)
                if not data:
                    return
                buf += data.decode()
                while buf:
                    try:
                        req, end = decoder.raw_decode(buf)
                    except ValueError:
                        break
                    buf = buf[end:]
                    conn.sendall(json.dumps({'id': req['id'],
                                             'result': req['method']})
                                 .encode())

    def close(self):
        self.server.close()
        self.thread.join(5)


def relayed_client(test):
    """A fake target, the counting relay before it, a client of the relay.

    Returns ``(counter, client socket)``; the test cleans all up.
    """
    tmp = test.useFixture(fixtures.TempDir()).path
    upstream = _Upstream(os.path.join(tmp, 'up.sock'))
    test.addCleanup(upstream.close)
    counter = rpc_counter.RpcCounter(os.path.join(tmp, 'up.sock'),
                                     os.path.join(tmp, 'relay.sock'))
    test.addCleanup(counter.close)
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    test.addCleanup(client.close)
    client.connect(counter.path)
    return counter, client


class RpcCounterTest(base.TestCase):

    def test_counts_requests_split_and_batched(self):
        counter, client = relayed_client(self)
        one = json.dumps({'id': 1, 'method': 'bdev_get_bdevs'})
        two = json.dumps({'id': 2, 'method': 'bdev_lvol_create'})
        with counter.measure() as calls:
            client.sendall(one[:10].encode())  # a request cut in two
            client.sendall((one[10:] + two).encode())
            replies = b''
            while replies.count(b'}') < 2:
                replies += client.recv(4096)
        self.assertEqual({'bdev_get_bdevs': 1, 'bdev_lvol_create': 1},
                         dict(calls))
        self.assertIn(b'"result": "bdev_lvol_create"', replies)

    def test_close_removes_the_socket(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        counter = rpc_counter.RpcCounter(os.path.join(tmp, 'none.sock'),
                                         os.path.join(tmp, 'relay.sock'))
        counter.close()
        self.assertFalse(os.path.exists(os.path.join(tmp, 'relay.sock')))


class TimingTest(base.TestCase):

    def test_summary_keeps_varying_rpc_counts_visible(self):
        samples = [{'seconds': 1.0, 'rpc_calls': 3, 'rpc': {'a': 3}},
                   {'seconds': 3.0, 'rpc_calls': 4, 'rpc': {'a': 4}}]
        got = timing.summarise(samples)
        self.assertEqual(2.0, got['seconds_mean'])
        self.assertEqual([3, 4], got['rpc_calls'])


class RoundTripsTest(base.TestCase):

    def test_most_calls_over_sizes_against_budgets(self):
        def op(calls):
            return {'rpc_calls': calls}
        result = {
            'cinder': {'by_size': {
                '1': {'create': op(1), 'clone_from_snapshot': op(2),
                      'delete': op(5)},
                '64': {'create': op(3), 'clone_from_snapshot': op(2),
                       'delete': op(2)}}},
            'connector': {'attach': op(4), 'detach': op(8)}}
        trips = control.round_trips(result)
        self.assertEqual({'create': 3, 'clone_from_snapshot': 2,
                          'delete': 5, 'attach': 4, 'detach': 8},
                         {k: v['calls'] for k, v in trips.items()})
        self.assertEqual(['attach', 'clone_from_snapshot'], sorted(
            k for k, v in trips.items() if v['within_budget']))
        self.assertEqual(['create', 'detach'], sorted(
            k for k, v in trips.items() if v['over_enforced']))


class CpuTest(base.TestCase):

    def test_process_and_thread_seconds(self):
        proc = self.useFixture(fixtures.TempDir()).path
        stat = ('42 (IO iothread0) S 1 1 1 0 -1 0 0 0 0 0 %d %d 0 0'
                % (3 * cpu.TICK, 2 * cpu.TICK))
        for path in ('42', '42/task/43', '42/task/44'):
            os.makedirs(os.path.join(proc, path))
            with open(os.path.join(proc, path, 'stat'), 'w') as f:
                f.write(stat)
        for tid, name in (('43', 'IO iothread0'), ('44', 'CPU 0/TCG')):
            with open(os.path.join(proc, '42/task', tid, 'comm'), 'w') as f:
                f.write(name + '\n')
        self.assertEqual(5.0, cpu.process_seconds(42, proc))
        self.assertEqual(5.0, cpu.thread_seconds(42, 'IO ', proc))
        self.assertEqual(0.0, cpu.process_seconds(7, proc))
        self.assertEqual([42], cpu.children(1, proc))


class InitramfsExtrasTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.EnvironmentVariable(
            initramfs.CACHE_ENV, self.useFixture(fixtures.TempDir()).path))

    def test_program_comes_with_its_loader_and_libraries(self):
        names = [name for name, _data, _mode
                 in initramfs.extra_files(['true'])]
        self.assertIn('bin/true', names)
        self.assertTrue(any(n.startswith('lib') and 'libc.so' in n
                            for n in names), names)
        self.assertTrue(any('ld-linux' in n for n in names), names)

    def test_extras_are_appended_only_when_asked(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        plain = initramfs.make_initrd(os.path.join(tmp, 'a'), 'true\n')
        self.useFixture(fixtures.EnvironmentVariable(initramfs.EXTRAS_ENV,
                                                     'true'))
        extra = initramfs.make_initrd(os.path.join(tmp, 'b'), 'true\n')
        with open(plain, 'rb') as f:
            plain_names = {e.name for e in initramfs.read_cpio(f.read())}
        with open(extra, 'rb') as f:
            extra_names = {e.name for e in initramfs.read_cpio(f.read())}
        self.assertNotIn('bin/true', plain_names)
        self.assertIn('bin/true', extra_names)
        self.assertIn('run.sh', extra_names)
        self.assertLessEqual(plain_names, extra_names)


def _modes_results():
    def job(iops, cpu):
        return {'iops': iops, 'lat_mean_us': 1e6 / iops,
                'lat_p99_us': 2e6 / iops, 'cpu_target_us_per_io': cpu}
    plane = {
        'poll': {'4k-randread-qd1': job(1000.0, 200.0),
                 'qos': {'limit_iops': 1000, 'achieved_iops': 1000.0,
                         'lat_p99_us': 9.0}},
        'interrupt': {'4k-randread-qd1': job(500.0, 50.0),
                      'qos': {'limit_iops': 1000, 'achieved_iops': 990.0,
                              'lat_p99_us': 9.0}}}
    idle = {app: {'poll': {'cpu_share': 1.0, 'core0_busy': 1.0,
                           'holds': ['thin lvol']},
                  'interrupt': {'cpu_share': 0.003, 'core0_busy': 0.5,
                                'holds': ['thin lvol']}}
            for app in modes.APPS}
    return {'idle_seconds': 2, 'idle': idle, 'jobs': ['4k-randread-qd1'],
            'dataplane': plane,
            'ratios': modes.ratios(plane, ['4k-randread-qd1'])}


class ModesTest(base.TestCase):

    def test_ratios_are_interrupt_over_poll(self):
        got = _modes_results()['ratios']
        self.assertEqual({'iops': 0.5, 'lat_mean_us': 2.0,
                          'lat_p99_us': 2.0, 'cpu_target_us_per_io': 0.25},
                         got['4k-randread-qd1'])
        self.assertEqual(0.99, got['qos_achieved_iops'])

    def test_core_ticks_leave_out_idle_and_iowait(self):
        stat = os.path.join(self.useFixture(fixtures.TempDir()).path, 's')
        with open(stat, 'w') as f:
            f.write('cpu  9 9 9 9 9 9 9 9 0 0\n'
                    'cpu0 10 1 5 100 7 2 3 4 0 0\n')
        self.assertEqual((25, 132), modes.core_ticks(0, stat))
        self.assertRaises(ValueError, modes.core_ticks, 1, stat)

    def test_ratio_of_a_missing_figure_is_none(self):
        self.assertIsNone(modes._ratio(None, 1.0))
        self.assertIsNone(modes._ratio(1.0, 0))

    def test_report_has_the_table_and_the_plot(self):
        out = self.useFixture(fixtures.TempDir()).path
        results = {'meta': {'label': 'L', 'profile': 'quick', 'target': 'T',
                            'accel': 'tcg', 'started': 'now'},
                   'modes': _modes_results()}
        report.write_markdown(results, out)
        self.assertEqual([os.path.join(out, 'modes.png')],
                         report.write_plots(results, out))
        with open(os.path.join(out, 'summary.md')) as f:
            summary = f.read()
        self.assertIn('## Poll vs interrupt mode', summary)
        self.assertIn('| vhost | thin lvol | 100.0 | 0.3 | 100.0 | 50.0 |',
                      summary)
        self.assertIn('| 4k-randread-qd1 | 0.50 | 2.00 | 2.00 | 0.25 |',
                      summary)
