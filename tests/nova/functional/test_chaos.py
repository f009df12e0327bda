"""The chaos run's short form: faults under writing guests, nothing lost.

``tools.chaos`` with real targets, guests and the watcher: two compute
hosts, three storage nodes, one operation of each kind in all, and the
faults of every kind while a guest writes. It must pass, and it must
have done what makes passing mean something: every kind of volume, and
every kind of fault under a writing guest. The long runs' figures are
in the admin guide.
"""

import io

import fixtures
from testtools import content

from tests import base
from tools.chaos import __main__ as chaos
from tools.chaos import faults
from tools.chaos import workload


class ShortChaosRunTest(base.TestCase):

    def test_short_run_passes(self):
        self.useFixture(fixtures.Timeout(900, gentle=True))
        out = io.StringIO()
        self.addDetail('figures', content.Content(
            content.UTF8_TEXT, lambda: [out.getvalue().encode()]))
        # Four faults: the fourth is a compute restart in an outage.
        args = chaos.parse_args([
            '--faults', str(faults.COMPUTE_EVERY), '--operations', '2',
            '--minutes', '10', '--fault-every', '6', '--hold', '20',
            '--seed', '1'])
        figures = chaos.run(args, out)
        self.assertTrue(figures.passed, out.getvalue())
        self.assertEqual(set(workload.KINDS), set(figures.operations))
        self.assertEqual(
            {'storage kill', 'compute restart',
             'compute restart in an outage'},
            set(figures.under_writes), out.getvalue())
