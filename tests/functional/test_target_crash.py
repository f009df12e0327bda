"""A target that crashes fails the test it crashed in, its core kept.

A real SPDK target ends by a crash's signal, sent here; the fixture's
cleanup (what runs when a test ends) or a later ``kill`` must fail,
naming the target and the signal, and keep the core file the kernel
wrote in the target's directory. A target a test SIGKILLs on purpose,
as the fault tests do, fails nothing.
"""

import os
import signal

import fixtures

from testbed import spdk_target
from testbed import waiting
from tests import base


def core_pattern():
    with open('/proc/sys/kernel/core_pattern') as src:
        return src.read().strip()


class TestTargetCrash(base.TestCase):

    def setUp(self):
        super().setUp()
        self.cores = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.MockPatch(
            'testbed.spdk_target.CORE_DIR', self.cores))

    def start(self):
        """A target in interrupt mode (idle), not cleaned up by the test."""
        target = spdk_target.SpdkTarget(app='vhost', interrupt_mode=True,
                                        name='compute')
        target.setUp()
        return target

    def crash(self, target, sig=signal.SIGSEGV):
        os.kill(target.pid, sig)
        waiting.wait_for('the target to end', lambda: target.process.poll()
                         is not None, 30)

    def test_crash_fails_the_cleanup_naming_it_and_keeps_its_core(self):
        target = self.start()
        pid = target.pid
        self.crash(target)
        err = self.assertRaises(spdk_target.TargetDied, target.cleanUp)
        self.assertIn('vhost compute (pid %d) died with SIGSEGV' % pid,
                      str(err))
        kept = os.path.join(self.cores, 'compute-vhost-%d.core' % pid)
        if core_pattern() == 'core':
            self.assertIn('core kept as %s' % kept, str(err))
            self.assertTrue(os.path.getsize(kept))
        else:
            # The kernel hands cores elsewhere (systemd-coredump, say).
            self.assertIn('no core file in its directory', str(err))

    def test_kill_after_a_crash_fails(self):
        target = self.start()
        self.addCleanup(target.cleanUp)
        self.crash(target, signal.SIGABRT)
        err = self.assertRaises(spdk_target.TargetDied, target.kill)
        self.assertIn('died with SIGABRT', str(err))

    def test_a_target_killed_or_stopped_on_purpose_fails_nothing(self):
        target = self.start()
        target.restart(crash=True)
        target.restart(crash=False)
        target.cleanUp()
        self.assertEqual([], os.listdir(self.cores))
