"""Adopting what a command started and left (testbed.process_group)."""

import os
import signal
import subprocess

from testbed import process_group
from testbed import waiting
from tests import base

# Starts a process in a session of its own, says its pid and exits: the
# process is orphaned, as the upgrade command leaves its new target.
LEAVE_ONE = 'setsid sleep 60 </dev/null >/dev/null 2>&1 & echo $!'


def _leave_one():
    return int(subprocess.run(['sh', '-c', LEAVE_ONE], check=True,
                              stdout=subprocess.PIPE, text=True).stdout)


def _sleeping(pid):
    """Whether ``pid`` runs sleep yet: setsid forks, then execs it."""
    return os.path.basename(os.readlink('/proc/%d/exe' % pid)) == 'sleep'


class AdoptingTest(base.TestCase):

    def test_an_orphan_left_inside_is_ours_to_stop_and_reap(self):
        before = process_group.children()
        with process_group.adopting_orphans():
            pid = _leave_one()
        self.assertEqual({pid}, process_group.children() - before)
        waiting.wait_for('the orphan to exec sleep', lambda: _sleeping(pid),
                         10, interval=0.01)
        orphan = process_group.Orphan(pid)
        self.assertEqual(['sleep', '60'], orphan.args)
        self.assertIsNone(orphan.poll())
        process_group.stop(orphan, 10)
        self.assertEqual(-signal.SIGTERM, orphan.returncode)
        self.assertNotIn(pid, process_group.children())

    def test_an_orphan_left_outside_goes_elsewhere(self):
        before = process_group.children()
        pid = _leave_one()
        self.addCleanup(_kill, pid)
        self.assertEqual(set(), process_group.children() - before)


def _kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
