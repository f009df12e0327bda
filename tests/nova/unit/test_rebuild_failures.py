"""The watcher holds off a member whose rebuild failed.

SPDK's raid, when a rebuild's write fails, ends the rebuild, empties the
member's slot and resets its NVMe controller, which is connected again
at once (``module/bdev/raid/bdev_raid.c``: ``raid_bdev_process_finish``,
then ``_raid_bdev_remove_base_bdev``): the answers below do the same.
"""

import io
import os
import re
import stat

import fixtures

from nova_vhost_user import rebuild_failures
from nova_vhost_user import replicas_cmd
from tests import base
from tests.nova.unit import test_replicas

VOLUME = test_replicas.VOLUME
FIRST, SECOND = VOLUME + '.0123abcd', VOLUME + '.89abcdef'


class RebuildAnswers(test_replicas.CommandAnswers):
    """Rebuilds that get somewhere, then fail or end in sync."""

    fail_at_once = False

    def _add_base_bdev(self, params):
        added = super()._add_base_bdev(params)
        if self.fail_at_once:
            self.rebuild_failed()
        return added

    def progress(self, percent):
        for raid in self.raids:
            raid['process']['progress']['percent'] = percent

    def rebuild_failed(self):
        for raid in self.raids:
            target = raid.pop('process')['target']
            for slot in raid['base_bdevs_list']:
                if slot['name'] == target:
                    slot.update(name=None, is_configured=False)


class TestHeldOff(base.TestCase):

    def setUp(self):
        super().setUp()
        self.now = 1000.0
        self.failures = rebuild_failures.RebuildFailures(
            clock=lambda: self.now)
        self.out, self.seen = io.StringIO(), {}

    def watch(self, client):
        replicas_cmd.watch_once(client, self.out, self.seen,
                                failures=self.failures)

    def added(self, client):
        return [params['base_bdev'] for method, params in client.calls
                if method == 'bdev_raid_add_base_bdev']

    @staticmethod
    def one_lost():
        """A 2-copy mirror whose lost member's controller is connected."""
        return RebuildAnswers([test_replicas.raid('a', None)],
                              [(FIRST, 'enabled')])

    def assert_counted_anew(self, client):
        """Out of the mirror again after one in sync: 1 in a row."""
        client.raids[0]['base_bdevs_list'][1].update(name=None,
                                                     is_configured=False)
        self.watch(client)
        self.fail_after(client, 10)
        self.assertIn('(10% done when last seen; 1 in a row)',
                      self.out.getvalue())

    def added_after(self, client, seconds):
        """How many members were added once ``seconds`` more passed."""
        self.now += seconds
        self.watch(client)
        return len(self.added(client))

    def rebuilt(self, client):
        """The rebuild ends in sync, seen so by two rounds."""
        client.rebuilt()
        self.watch(client)
        self.watch(client)

    def fail_after(self, client, percent):
        client.progress(percent)
        self.watch(client)
        client.rebuild_failed()
        self.watch(client)

    def test_longer_after_each_failure_until_one_ends_in_sync(self):
        client = self.one_lost()
        self.watch(client)
        self.assertEqual([FIRST + 'n1'], self.added(client))

        self.fail_after(client, 40)
        said = self.out.getvalue()
        self.assertIn('%s: the rebuild of %sn1 failed (40%% done when last '
                      'seen; 1 in a row)' % (VOLUME, FIRST), said)
        self.assertIn('adds it again in 60 s, "spdk-vhost-replicas repair '
                      '%s" at once' % VOLUME, said)
        self.assertTrue(said.endswith(
            '%s degraded 1/2 in sync; 1 missing; %s enabled; %sn1 held '
            'after a failed rebuild\n' % (VOLUME, FIRST, FIRST)))
        self.assertEqual(1, len(self.added(client)))

        self.assertEqual(1, self.added_after(client, 59))
        self.assertEqual(2, self.added_after(client, 2))

        self.fail_after(client, 97)
        self.assertIn('(97% done when last seen; 2 in a row)',
                      self.out.getvalue())
        self.assertIn('adds it again in 120 s', self.out.getvalue())
        self.assertEqual(2, self.added_after(client, 119))
        self.assertEqual(3, self.added_after(client, 2))

        self.rebuilt(client)
        self.assertTrue(self.out.getvalue().endswith(
            '%s online 2/2 in sync\n' % VOLUME))
        # In sync again: a later failure starts from the first wait.
        self.assert_counted_anew(client)
        self.assertEqual(4, len(self.added(client)))

    def test_waits_no_longer_than_an_hour(self):
        client = self.one_lost()
        self.watch(client)
        for _ in range(9):
            self.fail_after(client, 50)
            self.now += rebuild_failures.LONGEST_WAIT + 1
            self.watch(client)
        self.assertEqual(
            ['60', '120', '240', '480', '960', '1920', '3600', '3600',
             '3600'],
            re.findall(r'adds it again in (\d+) s', self.out.getvalue()))
        self.assertEqual(10, len(self.added(client)))

    def test_one_that_fails_before_the_watcher_looks(self):
        """A store with no room left fails the rebuild at once."""
        client = self.one_lost()
        client.fail_at_once = True
        self.watch(client)
        self.assertIn('the rebuild of %sn1 failed (0%% done when last seen; '
                      '1 in a row)' % FIRST, self.out.getvalue())
        self.watch(client)
        self.assertEqual([FIRST + 'n1'], self.added(client))

    def test_a_failure_that_looked_in_sync_for_a_moment(self):
        """SPDK ends a failed rebuild a moment before it drops the member."""
        client = self.one_lost()
        self.watch(client)
        client.progress(70)
        self.watch(client)
        client.rebuilt()
        self.watch(client)
        client.raids[0]['base_bdevs_list'][1].update(name=None,
                                                     is_configured=False)
        self.watch(client)
        self.assertIn('the rebuild of %sn1 failed (70%% done when last '
                      'seen; 1 in a row)' % FIRST, self.out.getvalue())
        self.assertEqual({FIRST + 'n1'}, self.failures.held(VOLUME))

    def test_the_others_are_not_held(self):
        client = RebuildAnswers(
            [test_replicas.raid('a', None, None, total=3)],
            [(FIRST, 'enabled'), (SECOND, 'enabled')])
        self.watch(client)
        self.fail_after(client, 30)
        self.assertEqual([FIRST + 'n1', SECOND + 'n1'], self.added(client))

    def test_repair_by_hand_does_not_wait(self):
        client = self.one_lost()
        self.watch(client)
        self.fail_after(client, 40)
        code, _said = test_replicas.run_command(client, 'repair', VOLUME)
        self.assertEqual((0, [FIRST + 'n1'] * 2), (code, self.added(client)))
        # The watcher sees the operator's rebuild; one in sync ends the
        # hold.
        self.watch(client)
        self.rebuilt(client)
        self.assert_counted_anew(client)

    def test_a_detached_volume_is_forgotten(self):
        client = self.one_lost()
        self.watch(client)
        self.fail_after(client, 40)
        self.watch(test_replicas.CommandAnswers([]))
        self.assertEqual(set(), self.failures.held(VOLUME))


class TestHoldsKept(TestHeldOff):
    """Holds in a file of the compute host: a restarted watcher keeps them."""

    def setUp(self):
        super().setUp()
        self.path = rebuild_failures.holds_path(
            self.useFixture(fixtures.TempDir()).join('spdk_tgt.json'))
        self.failures = self.restarted()

    def restarted(self):
        return rebuild_failures.RebuildFailures(clock=lambda: self.now,
                                                path=self.path)

    def test_a_restarted_watcher_holds_the_member_off(self):
        client = self.one_lost()
        self.watch(client)
        self.fail_after(client, 40)
        self.assertEqual(0o600, stat.S_IMODE(os.stat(self.path).st_mode))
        self.failures, self.seen = self.restarted(), {}
        self.assertEqual(1, self.added_after(client, 30))
        self.assertEqual(2, self.added_after(client, 31))
        # Its count survived too: the next wait is twice the first.
        self.fail_after(client, 50)
        self.assertIn('adds it again in 120 s', self.out.getvalue())

    def test_one_in_sync_ends_the_kept_hold(self):
        client = self.one_lost()
        self.watch(client)
        self.fail_after(client, 40)
        self.now += 61
        self.watch(client)
        client.rebuilt()
        self.watch(client)
        self.assertEqual(set(), self.restarted().held(VOLUME))

    def test_a_detached_volume_is_forgotten_in_the_file(self):
        client = self.one_lost()
        self.watch(client)
        self.fail_after(client, 40)
        self.watch(test_replicas.CommandAnswers([]))
        self.assertEqual(set(), self.restarted().held(VOLUME))

    def test_an_unreadable_file_holds_nothing(self):
        with open(self.path, 'w') as bad:
            bad.write('{"holds": [{"volume": 1}]}')
        logger = self.useFixture(fixtures.FakeLogger(
            name='nova_vhost_user.rebuild_failures'))
        self.assertEqual(set(), self.restarted().held(VOLUME))
        self.assertIn('Ignoring the rebuild holds in %s' % self.path,
                      logger.output)

    def test_no_saved_config_no_file(self):
        self.assertIsNone(rebuild_failures.holds_path(''))
