"""testbed.net.free_port: ports a listener made later can still have."""

import socket

import fixtures

from testbed import net
from tests import base


class TestFreePort(base.TestCase):

    def listening(self):
        """A port something listens on now (outside the sample's care)."""
        sock = socket.socket()
        self.addCleanup(sock.close)
        sock.bind(('127.0.0.1', 0))
        sock.listen()
        return sock.getsockname()[1]

    def test_below_the_ephemeral_range_and_bindable(self):
        first, _last = net.ephemeral_range()
        port = net.free_port()
        self.assertTrue(net.LOWEST <= port < first, port)
        with socket.socket() as sock:
            sock.bind(('127.0.0.1', port))

    def test_a_taken_port_is_passed_over(self):
        taken = self.listening()
        free = net.free_port()
        self.useFixture(fixtures.MockPatch(
            'random.sample', return_value=[taken, free]))
        self.assertEqual(free, net.free_port())

    def test_none_free_says_where_it_looked(self):
        taken = self.listening()
        self.useFixture(fixtures.MockPatch(
            'random.sample', return_value=[taken]))
        err = self.assertRaises(OSError, net.free_port)
        self.assertIn('no free port on 127.0.0.1 between 10000', str(err))

    def test_range_read_from_the_kernels_file(self):
        path = self.useFixture(fixtures.TempDir()).join('range')
        with open(path, 'w') as f:
            f.write('40000\t50000\n')
        self.assertEqual((40000, 50000), net.ephemeral_range(path))
