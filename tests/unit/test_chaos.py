"""The chaos run's bookkeeping: what passes, what ends the run."""

import io
import threading

from tests import base
from tools.chaos import __main__ as chaos
from tools.chaos import figures as figures_mod


def result(kind='remote', failed=(), **values):
    found = {'kind': kind, 'failed': list(failed)}
    found.update(values)
    return found


class FiguresTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.figures = self.clean_run()

    @staticmethod
    def clean_run():
        figures = figures_mod.Figures()
        figures.operation('compute-1', result(
            'local', io_errors=0, stall_ms=120, data_ok=True))
        figures.operation('compute-2', result(
            'replicated', io_errors=0, stall_ms=2780, data_ok=True))
        figures.leaks = {'storage-1': [], 'compute-1': []}
        return figures

    def report(self):
        out = io.StringIO()
        passed = self.figures.report(out, 1.5, 'SPDK v26.05')
        return passed, out.getvalue()

    def test_a_clean_run_passes(self):
        passed, text = self.report()
        self.assertTrue(passed)
        self.assertIn('operations: 2 done (local 1, replicated 1), 0 failed '
                      'steps', text)
        self.assertIn('longest guest write stall: 2780 ms (replicated '
                      'volume)', text)
        self.assertTrue(text.endswith('PASSED\n'))

    def test_each_finding_fails_the_run(self):
        findings = {
            'failed step': lambda f: f.operation('compute-1', result(
                failed=['attach: TargetError: refused'])),
            'I/O error': lambda f: f.operation('compute-1', result(
                io_errors=3, data_ok=True)),
            'wrong read': lambda f: f.operation('compute-1', result(
                io_errors=0, data_ok=False)),
            'crash': lambda f: f.crash('compute-2', 'vhost died of SIGSEGV'),
            'leak': lambda f: f.leaks.update({'compute-1': ['nvme x']}),
            'fault thread': lambda f: f.failure('fault thread: OSError'),
        }
        for name, finding in findings.items():
            self.figures = self.clean_run()
            finding(self.figures)
            passed, text = self.report()
            self.assertFalse(passed, name)
            self.assertTrue(text.endswith('FAILED\n'), name)

    def test_faults_counted_under_a_writing_guest_only(self):
        self.figures.began('storage kill')
        self.figures.fault('storage kill', 'storage-1', 4.5)
        with self.figures.writing():
            self.figures.began('compute restart')
        self.figures.fault('compute restart', 'compute-2', 1.0)
        self.assertEqual({'storage kill': 1, 'compute restart': 1},
                         dict(self.figures.faults))
        self.assertEqual({'compute restart': 1},
                         dict(self.figures.under_writes))
        self.assertEqual(4.5, self.figures.longest_outage)

    def test_wait_writing_returns_when_a_guest_writes(self):
        stop = threading.Event()
        writing = threading.Event()
        done = threading.Event()

        def guest():
            with self.figures.writing():
                writing.set()
                done.wait(10)
        thread = threading.Thread(target=guest)
        thread.start()
        self.addCleanup(thread.join)
        self.addCleanup(done.set)
        writing.wait(10)
        self.figures.wait_writing(stop)
        self.figures.began('storage kill')
        self.assertEqual({'storage kill': 1},
                         dict(self.figures.under_writes))


class BoundsTest(base.TestCase):

    def enough(self, *argv):
        over = threading.Event()
        return chaos._enough(chaos.parse_args(list(argv)), over), over

    def test_time_alone(self):
        enough, over = self.enough('--minutes', '1')
        over.set()
        self.assertFalse(enough(1000))

    def test_operations_and_faults_both_needed(self):
        enough, over = self.enough('--operations', '2', '--faults', '4')
        self.assertFalse(enough(5))
        over.set()
        self.assertFalse(enough(1))
        self.assertTrue(enough(2))

    def test_faults_alone(self):
        enough, over = self.enough('--faults', '4')
        self.assertFalse(enough(9))
        over.set()
        self.assertTrue(enough(0))

    def test_fewer_than_three_storage_nodes_refused(self):
        self.assertRaises(SystemExit, chaos.parse_args, ['--storages', '2'])

    def test_kinds(self):
        self.assertEqual(('local', 'remote', 'replicated'),
                         chaos.parse_args([]).kinds)
        self.assertEqual(('replicated',),
                         chaos.parse_args(['--kinds', 'replicated']).kinds)
        self.assertRaises(SystemExit, chaos.parse_args, ['--kinds', 'nfs'])
