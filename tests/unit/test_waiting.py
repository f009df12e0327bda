"""The tests' one wait, and the guest writer's, on fakes."""

import itertools

from testbed.guest import qemu
from testbed.guest import writer
from testbed import waiting
from tests import base


class WaitForTest(base.TestCase):

    def test_returns_the_first_true_value(self):
        answers = iter([None, 0, 'there'])
        self.assertEqual('there', waiting.wait_for(
            'an answer', lambda: next(answers), 5, interval=0))

    def test_timeout_names_what_and_what_was_seen(self):
        polls = itertools.count()
        err = self.assertRaises(
            waiting.TimedOut, waiting.wait_for, 'the moon',
            lambda: next(polls) < 0, 0.05, interval=0.01,
            on_timeout=lambda: 'seen: clouds')
        self.assertIn('waiting for the moon', str(err))
        self.assertIn('seen: clouds', str(err))
        # Polled until the deadline, not once.
        self.assertGreater(next(polls), 1)

    def test_a_timeout_is_a_test_failure(self):
        self.assertTrue(issubclass(waiting.TimedOut, AssertionError))


class _Guest(object):
    """A guest whose writer reports the given (writes, failures)."""

    def __init__(self, *reports):
        self.reports = list(reports)
        self.commands = []

    def execute(self, command):
        self.commands.append(command)
        writes, failures = self.reports.pop(0)
        return qemu.Results(['@@RESULT writer.writes=%d' % writes,
                             '@@RESULT writer.failures=%d' % failures], 0)


class WritesAfterTest(base.TestCase):

    def test_past_the_count_it_had_when_asked(self):
        guest = _Guest((7, 0), (7, 0), (8, 0))
        self.assertEqual(8, writer.writes(writer.writes_after(guest)))
        self.assertEqual([qemu.writer_status()] * 3, guest.commands)

    def test_past_a_given_count(self):
        guest = _Guest((3, 0), (6, 0))
        self.assertEqual(6, writer.writes(writer.writes_after(guest, 5)))

    def test_a_failed_write_fails_at_once(self):
        guest = _Guest((3, 0), (4, 1))
        err = self.assertRaises(AssertionError, writer.writes_after, guest, 3)
        self.assertIn('failed writes', str(err))
