"""The stress script, short: parallel lifecycles end with no leak.

tools/stress.py runs separate processes (as cinder-volume and
nova-compute workers do) with several threads each; this CI version runs
few cycles, locally and over NVMe-oF, and requires zero failures and
zero leaked objects.
"""

import os
import subprocess
import sys

from tests import base

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))


class StressTest(base.TestCase):

    def run_stress(self, *extra):
        proc = subprocess.run(
            [sys.executable, '-m', 'tools.stress', '--cycles', '2',
             '--processes', '2', '--threads', '3'] + list(extra),
            cwd=REPO, capture_output=True, text=True, timeout=240)
        self.assertEqual(0, proc.returncode, proc.stdout + proc.stderr[-3000:])
        self.assertIn('12 of 12 cycles ok', proc.stdout)
        self.assertIn('failures: 0\n', proc.stdout)
        self.assertIn('leaks: 0\n', proc.stdout)

    def test_local(self):
        self.run_stress()

    def test_remote(self):
        self.run_stress('--remote')
