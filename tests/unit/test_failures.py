"""tools/failures.py: what the end of a CI log says about a failure."""

import testtools

from tools import failures


def frame(path, line, function, code):
    return '  File "%s", line %d, in %s\n    %s\n' % (
        path, line, function, code)


ERROR = 'spdk_vhost_core.exception.ProtocolError: bdev_get_iostat failed'
TRACEBACK = ''.join([
    'Traceback (most recent call last):\n',
    frame('/build/tests/nova/test_repair.py', 260, 'test_replace',
          'self.assert_nothing_left()'),
    frame('/build/tests/nova/test_replicas.py', 112, 'assert_nothing_left',
          'self.bdev_names()'),
    frame('/build/spdk_vhost_core/spdk_rpc.py', 90, 'call',
          'raise exception.ProtocolError(method)'),
    frame('/venv/lib/python3.11/site-packages/pkg/tests/util.py', 3, 'f',
          'raise err'),
    ERROR + '\n'])


class WhereTest(testtools.TestCase):

    def test_the_deepest_frame_of_the_project_tests(self):
        self.assertEqual('tests/nova/test_replicas.py:112 in '
                         'assert_nothing_left', failures.where(TRACEBACK))

    def test_none_without_a_test_frame(self):
        self.assertIsNone(failures.where('AssertionError: 1 != 2\n'))

    def test_the_message_follows_the_last_frame(self):
        self.assertEqual([ERROR], failures.message(TRACEBACK))
