# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""The emulator's NVMe-oF link, over real loopback and unix sockets.

The storage-side NBD server is stood in for by a small unix socket server
that greets (as NBD servers speak first) and then echoes, so the splice
is checked byte for byte in both directions without qemu.
"""

import errno
import json
import os
import socket
import socketserver
import threading
import time

import fixtures

from tests import base
from tests.emulator import nvmf_link

SUBNQN = 'nqn.2016-06.io.spdk:vol-test'
HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-5555'
OTHER_HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:99999999-0000'
GREETING = b'NBDMAGIC-stand-in\n'
UUID = '0d2f6c3e-2b1a-4c55-9d8e-1f2a3b4c5d6e'


def _has_ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(('::1', 0))
    except OSError:
        return False
    return True


def _wait_for(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _link_threads():
    return [t for t in threading.enumerate() if t.name.startswith('nvmf-')]


def _recv_exactly(sock, size):
    data = b''
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


class _GreetEcho(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.sendall(GREETING)
        while True:
            data = self.request.recv(65536)
            if not data:
                return
            self.request.sendall(data)


class Subsystems(object):
    """The target's state as the admit callback sees it."""

    def __init__(self, nbd_socket):
        self.hosts = {HOSTNQN}
        self.namespaces = [{'nsid': 1, 'uuid': UUID, 'num_blocks': 16384,
                            'block_size': 512, 'nbd_socket': nbd_socket,
                            'nbd_export': 'lvol-export'}]
        self.calls = []

    def admit(self, subnqn, hostnqn):
        self.calls.append((subnqn, hostnqn))
        if subnqn != SUBNQN or hostnqn not in self.hosts:
            return None
        return self.namespaces


class LinkTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        # Registered first, so it runs after every other cleanup.
        self.addCleanup(self._check_no_threads_left)
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.nbd_socket = os.path.join(self.tmp, 'nbd.sock')
        self.subsystems = Subsystems(self.nbd_socket)

    def _check_no_threads_left(self):
        self.assertTrue(_wait_for(lambda: not _link_threads()),
                        'link threads left: %s' % _link_threads())

    def start_backend(self):
        server = socketserver.ThreadingUnixStreamServer(self.nbd_socket,
                                                        _GreetEcho)
        server.block_on_close = True
        thread = threading.Thread(target=server.serve_forever,
                                  kwargs={'poll_interval': 0.05})
        thread.start()
        self.addCleanup(thread.join)
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)

    def start_listener(self, traddr='127.0.0.1'):
        listener = nvmf_link.Listener(traddr, 0, self.subsystems.admit)
        listener.start()
        self.addCleanup(listener.close)
        return listener

    def start_proxy(self, listener, nsid=1, hostnqn=HOSTNQN):
        path = os.path.join(self.tmp, 'proxy-%d.sock' % nsid)
        proxy = nvmf_link.InitiatorProxy(path, listener.traddr,
                                         listener.trsvcid, SUBNQN, hostnqn,
                                         nsid)
        proxy.start()
        self.addCleanup(proxy.close)
        return proxy

    def open_unix(self, path):
        sock = socket.socket(socket.AF_UNIX)
        self.addCleanup(sock.close)
        sock.settimeout(5)
        sock.connect(path)
        return sock

    def open_tcp(self, listener):
        sock = socket.create_connection((listener.traddr,
                                         int(listener.trsvcid)), timeout=5)
        self.addCleanup(sock.close)
        return sock

    def assertEchoes(self, sock, payload):
        """The greeting, then payload sent back, through the link."""
        self.assertEqual(GREETING, _recv_exactly(sock, len(GREETING)))
        sender = threading.Thread(target=sock.sendall, args=(payload,))
        sender.start()
        self.addCleanup(sender.join)
        self.assertEqual(payload, _recv_exactly(sock, len(payload)))

    def assertClosedByPeer(self, sock):
        try:
            self.assertEqual(b'', sock.recv(1))
        except ConnectionResetError:
            pass


class TestProbe(LinkTestCase):

    def test_probe_returns_namespaces_without_local_paths(self):
        listener = self.start_listener()
        namespaces = nvmf_link.probe('127.0.0.1', listener.trsvcid, SUBNQN,
                                     HOSTNQN)
        self.assertEqual([{'nsid': 1, 'uuid': UUID, 'num_blocks': 16384,
                           'block_size': 512}], namespaces)
        self.assertEqual([(SUBNQN, HOSTNQN)], self.subsystems.calls)

    def test_probe_ipv6(self):
        if not _has_ipv6_loopback():
            self.skipTest('no IPv6 loopback here')
        listener = self.start_listener('::1')
        namespaces = nvmf_link.probe('::1', listener.trsvcid, SUBNQN,
                                     HOSTNQN)
        self.assertEqual(1, namespaces[0]['nsid'])
        # As with SPDK, the same port on another address is another
        # listener.
        self.assertRaises(ConnectionRefusedError, nvmf_link.probe,
                          '127.0.0.1', listener.trsvcid, SUBNQN, HOSTNQN)
        ipv4 = nvmf_link.Listener('127.0.0.1', listener.trsvcid,
                                  self.subsystems.admit)
        self.addCleanup(ipv4.close)
        ipv4.start()

    def test_refused_host(self):
        listener = self.start_listener()
        self.assertRaises(PermissionError, nvmf_link.probe, '127.0.0.1',
                          listener.trsvcid, SUBNQN, OTHER_HOSTNQN)
        self.assertEqual([(SUBNQN, OTHER_HOSTNQN)], self.subsystems.calls)

    def test_unknown_subsystem(self):
        listener = self.start_listener()
        self.assertRaises(PermissionError, nvmf_link.probe, '127.0.0.1',
                          listener.trsvcid, SUBNQN + '-gone', HOSTNQN)

    def test_nothing_listening(self):
        listener = self.start_listener()
        port = listener.trsvcid
        listener.close()
        self.assertRaises(ConnectionRefusedError, nvmf_link.probe,
                          '127.0.0.1', port, SUBNQN, HOSTNQN)

    def test_host_removed_refuses_next_probe(self):
        listener = self.start_listener()
        nvmf_link.probe('127.0.0.1', listener.trsvcid, SUBNQN, HOSTNQN)
        self.subsystems.hosts.clear()
        self.assertRaises(PermissionError, nvmf_link.probe, '127.0.0.1',
                          listener.trsvcid, SUBNQN, HOSTNQN)


class TestListener(LinkTestCase):

    def test_bind_conflict(self):
        first = self.start_listener()
        second = nvmf_link.Listener('127.0.0.1', first.trsvcid,
                                    self.subsystems.admit)
        self.addCleanup(second.close)
        err = self.assertRaises(OSError, second.start)
        self.assertEqual(errno.EADDRINUSE, err.errno)

    def test_close_frees_the_port(self):
        listener = self.start_listener()
        listener.close()
        again = nvmf_link.Listener('127.0.0.1', listener.trsvcid,
                                   self.subsystems.admit)
        again.start()
        again.close()

    def test_close_is_idempotent_and_safe_before_start(self):
        listener = nvmf_link.Listener('127.0.0.1', 0, self.subsystems.admit)
        listener.close()
        listener.close()
        self.assertRaises(RuntimeError, listener.start)

    def test_peer_dropped_mid_handshake(self):
        listener = self.start_listener()
        sock = self.open_tcp(listener)
        sock.sendall(b'{"proto": "spdk-emu')
        sock.close()
        self.assertTrue(_wait_for(
            lambda: not [t for t in _link_threads()
                         if t.name == 'nvmf-listener-conn']))
        self.assertEqual([], self.subsystems.calls)
        # The listener still serves the next initiator.
        nvmf_link.probe('127.0.0.1', listener.trsvcid, SUBNQN, HOSTNQN)

    def test_silent_peer_times_out(self):
        listener = self.start_listener()
        listener.timeout = 0.2
        sock = self.open_tcp(listener)
        self.assertClosedByPeer(sock)
        self.assertEqual([], self.subsystems.calls)

    def test_garbage_handshake(self):
        listener = self.start_listener()
        good = {'proto': nvmf_link.PROTO, 'op': 'connect',
                'subnqn': SUBNQN, 'hostnqn': HOSTNQN, 'nsid': 1}
        garbage = [
            b'\x00\xff not json\n',
            b'[1, 2]\n',
            json.dumps(dict(good, proto='nvme-tcp')).encode() + b'\n',
            json.dumps(dict(good, op='format')).encode() + b'\n',
            json.dumps(dict(good, hostnqn='')).encode() + b'\n',
            json.dumps(dict(good, nsid='1')).encode() + b'\n',
            json.dumps(dict(good, nsid=True)).encode() + b'\n',
            b'x' * (nvmf_link.MAX_LINE + 10),
        ]
        for line in garbage:
            sock = self.open_tcp(listener)
            sock.sendall(line)
            reply, rest = nvmf_link._recv_msg(sock)
            self.assertEqual('error', reply['status'], line[:40])
            self.assertEqual(b'', rest)
            self.assertClosedByPeer(sock)
        self.assertEqual([], self.subsystems.calls)

    def test_connect_missing_namespace(self):
        listener = self.start_listener()
        sock = self.open_tcp(listener)
        nvmf_link._send_msg(sock, {'proto': nvmf_link.PROTO,
                                   'op': 'connect', 'subnqn': SUBNQN,
                                   'hostnqn': HOSTNQN, 'nsid': 2})
        reply, _rest = nvmf_link._recv_msg(sock)
        self.assertEqual('error', reply['status'])
        self.assertClosedByPeer(sock)

    def test_connect_namespace_without_server(self):
        # The storage side's NBD server is gone: an error, not a hang.
        listener = self.start_listener()
        sock = self.open_tcp(listener)
        nvmf_link._send_msg(sock, {'proto': nvmf_link.PROTO,
                                   'op': 'connect', 'subnqn': SUBNQN,
                                   'hostnqn': HOSTNQN, 'nsid': 1})
        reply, _rest = nvmf_link._recv_msg(sock)
        self.assertEqual('error', reply['status'])
        self.assertIn('unavailable', reply['reason'])
        self.assertClosedByPeer(sock)

    def test_bytes_sent_with_the_handshake_are_kept(self):
        self.start_backend()
        listener = self.start_listener()
        sock = self.open_tcp(listener)
        request = {'proto': nvmf_link.PROTO, 'op': 'connect',
                   'subnqn': SUBNQN, 'hostnqn': HOSTNQN, 'nsid': 1}
        sock.sendall(json.dumps(request).encode() + b'\nearly bytes')
        reply, rest = nvmf_link._recv_msg(sock)
        self.assertEqual({'status': 'ok'}, reply)
        expected = GREETING + b'early bytes'
        data = rest + _recv_exactly(sock, len(expected) - len(rest))
        self.assertEqual(expected, data)


class TestInitiatorProxy(LinkTestCase):

    def test_splice_both_ways(self):
        self.start_backend()
        listener = self.start_listener()
        proxy = self.start_proxy(listener)
        self.assertEqual('lvol-export', proxy.export_name)
        sock = self.open_unix(proxy.unix_path)
        payload = os.urandom(4 * 1024 * 1024)
        self.assertEchoes(sock, payload)

    def test_bytes_sent_with_the_reply_are_kept(self):
        # An NBD server speaks first, so its greeting may reach the
        # initiator in the same segment as the handshake reply.
        target = socket.create_server(('127.0.0.1', 0))
        self.addCleanup(target.close)
        target.settimeout(5)
        served = threading.Thread(target=self._answer_in_one_segment,
                                  args=(target,))
        served.start()
        self.addCleanup(served.join)
        proxy = nvmf_link.InitiatorProxy(
            os.path.join(self.tmp, 'proxy.sock'), '127.0.0.1',
            target.getsockname()[1], SUBNQN, HOSTNQN, 1)
        proxy.start()
        self.addCleanup(proxy.close)
        self.assertEchoes(self.open_unix(proxy.unix_path), b'payload')

    def _answer_in_one_segment(self, target):
        """A target that sends its reply and the greeting in one send."""
        for reply in (
                {'status': 'ok', 'namespaces': [
                    dict(self.subsystems.namespaces[0])]},
                {'status': 'ok'}):
            conn, _addr = target.accept()
            conn.settimeout(5)
            with conn:
                nvmf_link._recv_msg(conn)
                conn.sendall(json.dumps(reply).encode() + b'\n' + GREETING)
                if 'namespaces' not in reply:
                    conn.sendall(_recv_exactly(conn, len(b'payload')))

    def test_start_refused_host(self):
        listener = self.start_listener()
        path = os.path.join(self.tmp, 'proxy.sock')
        proxy = nvmf_link.InitiatorProxy(path, '127.0.0.1', listener.trsvcid,
                                         SUBNQN, OTHER_HOSTNQN, 1)
        self.addCleanup(proxy.close)
        self.assertRaises(PermissionError, proxy.start)
        self.assertFalse(os.path.exists(path))

    def test_start_nothing_listening(self):
        listener = self.start_listener()
        listener.close()
        proxy = nvmf_link.InitiatorProxy(
            os.path.join(self.tmp, 'proxy.sock'), '127.0.0.1',
            listener.trsvcid, SUBNQN, HOSTNQN, 1)
        self.addCleanup(proxy.close)
        self.assertRaises(ConnectionRefusedError, proxy.start)

    def test_start_unknown_namespace(self):
        listener = self.start_listener()
        self.assertRaises(LookupError, self.start_proxy, listener, nsid=7)

    def test_unix_path_in_use(self):
        listener = self.start_listener()
        proxy = self.start_proxy(listener)
        twin = nvmf_link.InitiatorProxy(proxy.unix_path, '127.0.0.1',
                                        listener.trsvcid, SUBNQN, HOSTNQN, 1)
        self.addCleanup(twin.close)
        err = self.assertRaises(OSError, twin.start)
        self.assertEqual(errno.EADDRINUSE, err.errno)

    def test_admit_runs_per_connection(self):
        self.start_backend()
        listener = self.start_listener()
        proxy = self.start_proxy(listener)
        first = self.open_unix(proxy.unix_path)
        self.assertEchoes(first, b'before')
        self.subsystems.hosts.clear()
        # The next connection is refused: the NBD client sees it closed.
        second = self.open_unix(proxy.unix_path)
        self.assertClosedByPeer(second)
        # The established one carries on, as with NVMe-oF.
        first.sendall(b'after')
        self.assertEqual(b'after', _recv_exactly(first, 5))
        self.assertEqual(3, len(self.subsystems.calls))

    def test_close_with_live_connections(self):
        self.start_backend()
        listener = self.start_listener()
        proxy = self.start_proxy(listener)
        socks = [self.open_unix(proxy.unix_path) for _ in range(3)]
        for sock in socks:
            self.assertEchoes(sock, b'live')
        started = time.monotonic()
        listener.close()
        for sock in socks:
            self.assertClosedByPeer(sock)
        proxy.close()
        self.assertLess(time.monotonic() - started, 5)
        self.assertFalse(os.path.exists(proxy.unix_path))
        self.assertRaises(ConnectionRefusedError, nvmf_link.probe,
                          '127.0.0.1', listener.trsvcid, SUBNQN, HOSTNQN)

    def test_proxy_close_drops_its_connections(self):
        self.start_backend()
        listener = self.start_listener()
        proxy = self.start_proxy(listener)
        sock = self.open_unix(proxy.unix_path)
        self.assertEchoes(sock, b'live')
        proxy.close()
        self.assertClosedByPeer(sock)
        self.assertRaises(FileNotFoundError, self.open_unix, proxy.unix_path)
        # The target is untouched and serves the next initiator.
        nvmf_link.probe('127.0.0.1', listener.trsvcid, SUBNQN, HOSTNQN)
