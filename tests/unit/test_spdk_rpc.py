"""SpdkClient against a scripted SPDK JSON-RPC server on a real socket."""

import json
import os
import select
import socket
import threading
import time

import fixtures
from oslo_config import cfg

from os_brick_connector import opts
from spdk_vhost_core import exception as exc
from spdk_vhost_core import options as rpc_options
from spdk_vhost_core import spdk_rpc
from tests import base
from tests.unit import test_exception


def _reply(request, **fields):
    return dict({'jsonrpc': '2.0', 'id': request['id']}, **fields)


def _dump(obj):
    return json.dumps(obj).encode('utf-8')


# Scripted behaviours. Each takes (server, conn, request) and returns
# False when the connection must be closed afterwards.

def answer(result):
    def act(server, conn, request):
        conn.sendall(_dump(_reply(request, result=result)))
        return True
    return act


def echo(server, conn, request):
    """Answer with the request's own params (the default behaviour)."""
    return answer(request.get('params'))(server, conn, request)


def error(code, message):
    def act(server, conn, request):
        conn.sendall(_dump(_reply(request, error={'code': code,
                                                  'message': message})))
        return True
    return act


def late(delay, result):
    def act(server, conn, request):
        server.stopping.wait(delay)
        return answer(result)(server, conn, request)
    return act


def pieces(result, size=3, pause=0.005):
    def act(server, conn, request):
        data = _dump(_reply(request, result=result))
        for start in range(0, len(data), size):
            conn.sendall(data[start:start + size])
            time.sleep(pause)
        return True
    return act


def raw(data):
    def act(server, conn, request):
        conn.sendall(data)
        return True
    return act


def reply_object(obj):
    """Send ``obj`` (a dict given the request) as the whole reply."""
    def act(server, conn, request):
        return raw(_dump(obj(request)))(server, conn, request)
    return act


def close_mid_reply(server, conn, request):
    data = _dump(_reply(request, result='truncated'))
    conn.sendall(data[:len(data) // 2])
    return False


def close_after(act):
    def wrapped(server, conn, request):
        act(server, conn, request)
        return False
    return wrapped


def reset_next_unread(result):
    """Answer, then close with the next request unread (a restarting target).

    Closing a socket with unread data resets it: the client sees
    ECONNRESET, not a reply, and the request was never run.
    """
    def act(server, conn, request):
        answer(result)(server, conn, request)
        select.select([conn], [], [], 5)
        return False
    return act


def silent(server, conn, request):
    server.stopping.wait()
    return False


def trickle(period):
    """Send a never-ending valid JSON prefix, one byte per period."""
    def act(server, conn, request):
        conn.sendall(b'{"jsonrpc": "2.0", "id": %d, "result": "'
                     % request['id'])
        while not server.stopping.wait(period):
            conn.sendall(b'x')
        return False
    return act


class FakeSpdkServer(fixtures.Fixture):
    """A JSON-RPC server on a real socket answering from a script.

    Requests are decoded like SPDK does (a stream of JSON objects), each is
    recorded, and answered by the next scripted behaviour, or echoed.
    """

    def __init__(self, tcp=False, path=None):
        super().__init__()
        self.tcp = tcp
        self.path = path
        self.script = []
        self.requests = []
        self.connections = 0
        self.stopping = threading.Event()
        self.listener = None
        self._lock = threading.Lock()
        self._threads = []
        self._conns = []

    def _setUp(self):
        if self.tcp:
            self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.listener.bind(('127.0.0.1', 0))
            self.port = self.listener.getsockname()[1]
        else:
            if self.path is None:
                tmp = self.useFixture(fixtures.TempDir()).path
                self.path = os.path.join(tmp, 'spdk.sock')
            self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.listener.bind(self.path)
        self.addCleanup(self.stop)
        self.listener.listen(16)
        self._spawn(self._accept_loop)

    def client(self, **kwargs):
        kwargs.setdefault('timeout', 5)
        kwargs.setdefault('connect_retries', 0)
        if self.tcp:
            kwargs.setdefault('address', '127.0.0.1')
            kwargs.setdefault('port', self.port)
        else:
            kwargs.setdefault('socket_path', self.path)
        client = spdk_rpc.SpdkClient(**kwargs)
        self.addCleanup(client.close)
        return client

    def then(self, *acts):
        with self._lock:
            self.script.extend(acts)

    def _spawn(self, target, *args):
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def stop(self):
        """Stop serving, as a target that exits; safe to call twice."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        if self.listener is not None:
            self.listener.close()
            if not self.tcp:
                os.unlink(self.path)
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by the peer
            conn.close()
        for thread in self._threads:
            thread.join(5)

    def _accept_loop(self):
        self.listener.settimeout(0.05)
        while not self.stopping.is_set():
            try:
                conn, _addr = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self._conns.append(conn)
            self._spawn(self._serve, conn)

    def _requests(self, conn):
        decoder = json.JSONDecoder()
        buf = ''
        while True:
            try:
                data = conn.recv(4096)
            except OSError:
                return
            if not data:
                return
            buf += data.decode('utf-8')
            while True:
                buf = buf.lstrip()
                try:
                    request, end = decoder.raw_decode(buf)
                except ValueError:
                    break
                buf = buf[end:]
                yield request

    def _serve(self, conn):
        with conn:
            for request in self._requests(conn):
                with self._lock:
                    self.requests.append(request)
                    act = self.script.pop(0) if self.script else echo
                if not act(self, conn, request):
                    return


class ClientTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.server = self.useFixture(FakeSpdkServer())
        self.client = self.server.client()

    def sent(self):
        return [(r['method'], r.get('params'))
                for r in self.server.requests]


class HelperTest(ClientTestCase):
    """Every helper sends exactly SPDK v26's method and params."""

    # (helper, args, kwargs, expected params); params as recorded from
    # real SPDK in tests/functional/transcripts where the RPC appears there.
    CASES = [
        ('spdk_get_version', (), {}, None),
        ('rpc_get_methods', (), {}, None),
        ('rpc_get_methods', (), {'current': True}, {'current': True}),
        ('framework_get_reactors', (), {}, None),
        ('framework_get_subsystems', (), {}, None),
        ('framework_get_config', ('bdev',), {}, {'name': 'bdev'}),
        ('bdev_get_bdevs', (), {}, None),
        ('bdev_get_bdevs', ('lvs0/vol',), {}, {'name': 'lvs0/vol'}),
        ('bdev_aio_create', ('/w/image.raw', 'img0'),
         {'block_size': 512, 'readonly': True},
         {'name': 'img0', 'filename': '/w/image.raw', 'block_size': 512,
          'readonly': True}),
        ('bdev_aio_delete', ('img0',), {}, {'name': 'img0'}),
        ('bdev_set_qos_limit', ('lvs0/vol',),
         {'rw_ios_per_sec': 20000, 'rw_mbytes_per_sec': 100},
         {'name': 'lvs0/vol', 'rw_ios_per_sec': 20000,
          'rw_mbytes_per_sec': 100}),
        ('bdev_set_qos_limit', ('lvs0/vol',),
         {'rw_ios_per_sec': 0, 'w_mbytes_per_sec': 40,
          'r_mbytes_per_sec': 0, 'rw_mbytes_per_sec': 0},
         {'name': 'lvs0/vol', 'rw_ios_per_sec': 0, 'w_mbytes_per_sec': 40,
          'r_mbytes_per_sec': 0, 'rw_mbytes_per_sec': 0}),
        ('bdev_lvol_get_lvstores', (), {'lvs_name': 'lvs0'},
         {'lvs_name': 'lvs0'}),
        ('bdev_lvol_get_lvstores', (), {}, None),
        ('bdev_lvol_get_lvols', (), {'lvs_name': 'lvs0'},
         {'lvs_name': 'lvs0'}),
        ('bdev_lvol_create', ('vol-a', 8),
         {'lvs_name': 'lvs0', 'thin_provision': True},
         {'lvol_name': 'vol-a', 'size_in_mib': 8, 'lvs_name': 'lvs0',
          'thin_provision': True}),
        ('bdev_lvol_create', ('vol-b', 4),
         {'lvs_name': 'lvs0', 'thin_provision': False,
          'clear_method': 'unmap'},
         {'lvol_name': 'vol-b', 'size_in_mib': 4, 'lvs_name': 'lvs0',
          'thin_provision': False, 'clear_method': 'unmap'}),
        ('bdev_lvol_delete', ('lvs0/vol',), {}, {'name': 'lvs0/vol'}),
        ('bdev_lvol_resize', ('lvs0/vol-a', 16), {},
         {'name': 'lvs0/vol-a', 'size_in_mib': 16}),
        ('bdev_lvol_snapshot', ('lvs0/vol', 'snap1'), {},
         {'lvol_name': 'lvs0/vol', 'snapshot_name': 'snap1'}),
        ('bdev_lvol_clone', ('lvs0/snap1', 'clone1'), {},
         {'snapshot_name': 'lvs0/snap1', 'clone_name': 'clone1'}),
        ('bdev_lvol_inflate', ('lvs0/clone1',), {}, {'name': 'lvs0/clone1'}),
        ('bdev_lvol_decouple_parent', ('lvs0/clone2',), {},
         {'name': 'lvs0/clone2'}),
        ('bdev_lvol_set_read_only', ('lvs0/v',), {}, {'name': 'lvs0/v'}),
        ('bdev_lvol_rename', ('lvs0/vol-b', 'vol-b2'), {},
         {'old_name': 'lvs0/vol-b', 'new_name': 'vol-b2'}),
        ('bdev_lvol_start_shallow_copy', ('lvs0/fromimg', 'out0'), {},
         {'src_lvol_name': 'lvs0/fromimg', 'dst_bdev_name': 'out0'}),
        ('bdev_lvol_check_shallow_copy', (2,), {}, {'operation_id': 2}),
        ('vhost_create_blk_controller', ('vhost.0', 'lvs0/vol'),
         {'cpumask': '0x1'},
         {'ctrlr': 'vhost.0', 'dev_name': 'lvs0/vol', 'cpumask': '0x1'}),
        ('vhost_create_blk_controller', ('vhost.4', 'lvs0/vol2'),
         {'readonly': True, 'packed_ring': True, 'cpumask': '0x2'},
         {'ctrlr': 'vhost.4', 'dev_name': 'lvs0/vol2', 'readonly': True,
          'packed_ring': True, 'cpumask': '0x2'}),
        ('vhost_get_controllers', (), {}, None),
        ('vhost_get_controllers', ('vhost.0',), {}, {'name': 'vhost.0'}),
        ('vhost_delete_controller', ('vhost.0',), {}, {'ctrlr': 'vhost.0'}),
        ('vhost_controller_set_coalescing', ('vhost.0', 50, 60000), {},
         {'ctrlr': 'vhost.0', 'delay_base_us': 50, 'iops_threshold': 60000}),
        ('nvmf_create_transport', ('TCP',), {}, {'trtype': 'TCP'}),
        ('nvmf_create_transport', ('TCP',), {'max_queue_depth': 128},
         {'trtype': 'TCP', 'max_queue_depth': 128}),
        ('nvmf_create_subsystem', ('nqn.2016-06.io.spdk:vol-test',),
         {'serial_number': 'SPDK0001', 'allow_any_host': False},
         {'nqn': 'nqn.2016-06.io.spdk:vol-test',
          'serial_number': 'SPDK0001', 'allow_any_host': False}),
        ('nvmf_delete_subsystem', ('nqn.x',), {}, {'nqn': 'nqn.x'}),
        ('nvmf_get_subsystems', ('nqn.x',), {}, {'nqn': 'nqn.x'}),
        ('nvmf_get_subsystems', (), {}, None),
        ('nvmf_subsystem_add_listener',
         ('nqn.x', 'TCP', '127.0.0.1', '4420'), {'adrfam': 'IPv4'},
         {'nqn': 'nqn.x', 'listen_address': {
             'trtype': 'TCP', 'adrfam': 'IPv4', 'traddr': '127.0.0.1',
             'trsvcid': '4420'}}),
        ('nvmf_subsystem_add_ns', ('nqn.x', 'lvs0/vol'), {},
         {'nqn': 'nqn.x', 'namespace': {'bdev_name': 'lvs0/vol'}}),
        ('nvmf_subsystem_add_host', ('nqn.x', 'nqn.host'), {},
         {'nqn': 'nqn.x', 'host': 'nqn.host'}),
        ('nvmf_subsystem_remove_host', ('nqn.x', 'nqn.host'), {},
         {'nqn': 'nqn.x', 'host': 'nqn.host'}),
        ('bdev_nvme_attach_controller',
         ('Remote0', 'tcp', '127.0.0.1', 'nqn.x'),
         {'adrfam': 'ipv4', 'trsvcid': '4420', 'hostnqn': 'nqn.host',
          'ctrlr_loss_timeout_sec': 30, 'reconnect_delay_sec': 2,
          'fast_io_fail_timeout_sec': 10},
         {'name': 'Remote0', 'trtype': 'tcp', 'adrfam': 'ipv4',
          'traddr': '127.0.0.1', 'trsvcid': '4420', 'subnqn': 'nqn.x',
          'hostnqn': 'nqn.host', 'ctrlr_loss_timeout_sec': 30,
          'reconnect_delay_sec': 2, 'fast_io_fail_timeout_sec': 10}),
        ('bdev_nvme_detach_controller', ('Remote0',), {},
         {'name': 'Remote0'}),
        ('bdev_nvme_get_controllers', ('Remote0',), {}, {'name': 'Remote0'}),
        ('bdev_nvme_get_controllers', (), {}, None),
    ]

    def test_helpers_send_spdk_method_and_params(self):
        for name, args, kwargs, params in self.CASES:
            self.server.then(answer(['result of', name]))
            result = getattr(self.client, name)(*args, **kwargs)
            self.assertEqual(['result of', name], result, name)
            self.assertEqual((name, params), self.sent()[-1], name)
        self.assertEqual(len(self.CASES), len(self.server.requests))

    def test_observers_see_every_call_failed_ones_too(self):
        seen = []
        self.client.observe(lambda *call: seen.append(call))
        self.server.then(answer('lvol-uuid'), error(-17, 'File exists'))
        self.client.call('bdev_lvol_create', {'lvol_name': 'a'})
        self.assertRaises(exc.AlreadyExists, self.client.call,
                          'bdev_lvol_create', {'lvol_name': 'a'})
        self.assertEqual(
            [('bdev_lvol_create', {'lvol_name': 'a'}, 'lvol-uuid'),
             ('bdev_lvol_create', {'lvol_name': 'a'}, None)], seen)

    def test_a_failing_observer_hides_neither_result_nor_error(self):
        def broken(*call):
            raise ValueError('observer bug')

        seen = []
        self.client.observe(broken)
        self.client.observe(lambda *call: seen.append(call[2]))
        self.server.then(answer('lvol-uuid'), error(-17, 'File exists'))
        self.assertEqual('lvol-uuid', self.client.call('bdev_lvol_create'))
        self.assertRaises(exc.AlreadyExists, self.client.call,
                          'bdev_lvol_create')
        self.assertEqual(['lvol-uuid', None], seen)

    def test_vhost_controller_by_name_or_none(self):
        self.server.then(answer([{'ctrlr': 'vhost-a'}]),
                         error(-32602, 'No such device'))
        self.assertEqual({'ctrlr': 'vhost-a'},
                         self.client.vhost_controller('vhost-a'))
        self.assertIsNone(self.client.vhost_controller('vhost-b'))
        self.assertEqual([('vhost_get_controllers', {'name': 'vhost-a'}),
                          ('vhost_get_controllers', {'name': 'vhost-b'})],
                         self.sent())

    def test_bdev_get_bdevs_empty_answer_is_not_found(self):
        self.server.then(answer([]))
        self.assertRaises(exc.NotFound, self.client.bdev_get_bdevs, 'x')
        self.server.then(answer([]))
        self.assertEqual([], self.client.bdev_get_bdevs())

    def test_save_config_is_built_from_two_rpcs(self):
        with open(os.path.join(test_exception.TRANSCRIPTS,
                               'save_config.json')) as f:
            calls = json.load(f)['calls']
        with open(os.path.join(test_exception.TRANSCRIPTS,
                               'save_config.full.json')) as f:
            full = json.load(f)
        recorded = [c for c in calls if c['method'].startswith('framework')]
        self.server.then(*[answer(c['result']) for c in recorded])
        self.assertEqual(full, self.client.save_config())
        self.assertEqual([(c['method'], c.get('params')) for c in recorded],
                         self.sent())


class ErrorTest(ClientTestCase):
    """Errors are raised as the right class, with SPDK's code kept."""

    def test_transcript_errors_raise_their_class(self):
        errors = list(test_exception.transcript_errors())
        for _name, method, params, err in errors:
            self.server.then(error(err['code'], err['message']))
            raised = self.assertRaises(exc.SpdkRpcError, self.client.call,
                                       method, params)
            key = (err['code'], err['message'])
            self.assertIs(test_exception.EXPECTED[key], type(raised))
            self.assertEqual(err['code'], raised.code)
            self.assertEqual(err['message'], raised.message)
        # An error answer leaves the connection usable.
        self.assertEqual(1, self.server.connections)
        self.assertEqual(len(errors), len(self.server.requests))

    def test_reply_without_result_or_error(self):
        self.server.then(reply_object(lambda r: {'jsonrpc': '2.0',
                                                 'id': r['id']}))
        self.assertRaises(exc.ProtocolError, self.client.spdk_get_version)

    def test_reply_with_wrong_id(self):
        self.server.then(reply_object(lambda r: {'id': r['id'] + 7,
                                                 'result': True}))
        self.assertRaises(exc.ProtocolError, self.client.spdk_get_version)
        # The desynchronised connection was dropped; a new one works.
        self.assertEqual({'a': 1}, self.client.call('echo', {'a': 1}))
        self.assertEqual(2, self.server.connections)

    def test_reply_that_is_not_an_object(self):
        self.server.then(raw(b'["x"]'))
        self.assertRaises(exc.ProtocolError, self.client.spdk_get_version)

    def test_garbage_is_detected_without_waiting(self):
        self.server.then(raw(b'HTTP/1.1 400 Bad Request\r\n\r\n'))
        start = time.monotonic()
        self.assertRaises(exc.ProtocolError, self.client.spdk_get_version)
        self.assertLess(time.monotonic() - start, 1)

    def test_error_object_is_malformed(self):
        self.server.then(reply_object(lambda r: {'id': r['id'],
                                                 'error': 'boom'}))
        self.assertRaises(exc.ProtocolError, self.client.spdk_get_version)

    def test_nothing_else_escapes(self):
        # Whatever the server does, only SpdkRpcError reaches the caller.
        for act in (close_mid_reply, raw(b'}{'), raw(b'\xff\xfe'),
                    reply_object(lambda r: {'id': r['id']}),
                    reply_object(lambda r: {'result': 1}),
                    close_after(raw(b''))):
            self.server.then(act)
            self.assertRaises(exc.SpdkRpcError, self.client.call, 'm')


class TransportTest(ClientTestCase):

    def test_answer_in_pieces(self):
        result = {'name': 'vol-é€', 'blocks': list(range(50))}
        self.server.then(pieces(result, size=1))
        self.assertEqual(result, self.client.call('bdev_get_bdevs'))

    def test_multibyte_characters_across_recv_chunks(self):
        # 4 KiB reads of the spdk client would split these characters.
        result = '€' * 5000
        self.server.then(answer(result))
        self.assertEqual(result, self.client.call('m'))

    def test_late_answer_within_timeout(self):
        client = self.server.client(timeout=3)
        self.server.then(late(0.3, 'late'))
        self.assertEqual('late', client.call('m'))

    def assertTimesOut(self, client, bound):
        """The call fails with Timeout within ``bound`` wall seconds.

        Run in a thread so that a client that hangs fails the test instead
        of hanging it; stopping the server then releases the thread.
        """
        raised = []

        def run():
            try:
                client.call('m')
            except exc.SpdkRpcError as err:
                raised.append(err)

        thread = threading.Thread(target=run, daemon=True)
        self.addCleanup(thread.join, 5)
        self.addCleanup(self.server.stop)
        thread.start()
        thread.join(bound)
        self.assertFalse(thread.is_alive(), 'no timeout after %ss' % bound)
        self.assertEqual([exc.Timeout], [type(err) for err in raised])

    def test_silent_target_times_out_on_wall_clock(self):
        self.server.then(silent)
        self.assertTimesOut(self.server.client(timeout=0.5), 2)

    def test_trickling_target_times_out_on_wall_clock(self):
        # Each byte arrives within the timeout; spdk's own CPU-time based
        # recv() would wait forever here.
        self.server.then(trickle(0.1))
        self.assertTimesOut(self.server.client(timeout=0.5), 2)

    def test_call_after_timeout_uses_new_connection(self):
        client = self.server.client(timeout=0.3)
        self.server.then(silent)
        self.assertRaises(exc.Timeout, client.call, 'm')
        self.assertEqual({'n': 2}, client.call('m', {'n': 2}))
        self.assertEqual(2, self.server.connections)

    def test_closed_mid_reply(self):
        self.server.then(close_mid_reply)
        err = self.assertRaises(exc.ProtocolError, self.client.call, 'm')
        self.assertIn('closed', str(err))

    def test_reconnect_after_dropped_connection(self):
        self.server.then(close_after(answer('first')))
        self.assertEqual('first', self.client.call('m'))
        self.assertEqual('second', self.client.call('m', 'second'))
        self.assertEqual(2, self.server.connections)

    def test_request_reset_unread_is_sent_again(self):
        self.server.then(reset_next_unread('first'))
        self.assertEqual('first', self.client.call('m'))
        self.assertEqual('second', self.client.call('m', 'second'))
        self.assertEqual(2, self.server.connections)
        # The reset request was not read, so the target ran it once.
        self.assertEqual(['m', 'm'],
                         [r['method'] for r in self.server.requests])

    def test_reconnect_after_close_mid_reply(self):
        self.server.then(close_mid_reply)
        self.assertRaises(exc.ProtocolError, self.client.call, 'm')
        self.assertEqual('again', self.client.call('m', 'again'))
        self.assertEqual(2, self.server.connections)

    def test_connection_is_reused(self):
        for i in range(5):
            self.assertEqual([i], self.client.call('m', [i]))
        self.assertEqual(1, self.server.connections)

    def test_concurrent_calls_from_threads(self):
        results = {}
        failures = []

        def worker(n):
            try:
                for i in range(20):
                    params = {'thread': n, 'i': i}
                    results[(n, i)] = self.client.call('echo', params)
            except exc.SpdkRpcError as err:
                failures.append(err)

        threads = [threading.Thread(target=worker, args=(n,))
                   for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        self.assertEqual([], failures)
        self.assertEqual(160, len(results))
        for (n, i), result in results.items():
            self.assertEqual({'thread': n, 'i': i}, result)
        self.assertEqual(1, self.server.connections)

    def test_close_then_call_reconnects(self):
        self.client.call('m')
        self.client.close()
        self.client.call('m')
        self.assertEqual(2, self.server.connections)


class ConnectTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.tmp, 'spdk.sock')

    def _client(self, **kwargs):
        client = spdk_rpc.SpdkClient(socket_path=self.path, **kwargs)
        self.addCleanup(client.close)
        return client

    def test_missing_socket_after_retries(self):
        client = self._client(connect_retries=3, retry_interval=0.1)
        start = time.monotonic()
        err = self.assertRaises(exc.TargetUnreachable,
                                client.spdk_get_version)
        self.assertGreaterEqual(time.monotonic() - start, 0.3)
        self.assertIn('4 attempt', str(err))
        self.assertIn(self.path, str(err))
        self.assertIsNotNone(err.__cause__)

    def test_connection_refused(self):
        # A socket file nobody listens on, as a crashed target leaves.
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(self.path)
        stale.close()
        client = self._client(connect_retries=0)
        self.assertRaises(exc.TargetUnreachable, client.spdk_get_version)

    def test_target_appearing_during_retries(self):
        server = FakeSpdkServer(path=self.path)
        self.addCleanup(server.cleanUp)
        timer = threading.Timer(0.3, server.setUp)
        timer.start()
        self.addCleanup(timer.join)
        client = self._client(connect_retries=50, retry_interval=0.05)
        self.assertEqual({'x': 1}, client.call('m', {'x': 1}))

    def test_target_restart_between_calls(self):
        server = FakeSpdkServer(path=self.path)
        self.useFixture(server)
        client = self._client(connect_retries=0)
        self.assertEqual(1, client.call('m', 1))
        server.stop()
        self.useFixture(FakeSpdkServer(path=self.path))
        self.assertEqual(2, client.call('m', 2))

    def test_address_needs_port(self):
        self.assertRaises(ValueError, spdk_rpc.SpdkClient,
                          address='127.0.0.1')

    def test_timeout_must_be_positive(self):
        self.assertRaises(ValueError, spdk_rpc.SpdkClient, timeout=0)


class TcpTest(base.TestCase):

    def test_tcp_by_address(self):
        server = self.useFixture(FakeSpdkServer(tcp=True))
        client = server.client()
        self.assertEqual({'a': 1}, client.call('m', {'a': 1}))
        self.assertEqual('tcp:127.0.0.1:%d' % server.port, client.target)

    def test_tcp_by_host_name(self):
        server = self.useFixture(FakeSpdkServer(tcp=True))
        client = server.client(address='localhost')
        server.then(error(-19, 'No such device'))
        self.assertRaises(exc.NotFound, client.bdev_get_bdevs, 'x')
        self.assertEqual(['ok'], client.call('m', ['ok']))

    def test_tcp_refused(self):
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        probe.bind(('127.0.0.1', 0))
        port = probe.getsockname()[1]
        probe.close()
        client = spdk_rpc.SpdkClient(address='127.0.0.1', port=port,
                                     connect_retries=1, retry_interval=0.01)
        self.addCleanup(client.close)
        self.assertRaises(exc.TargetUnreachable, client.spdk_get_version)


class ConfTest(base.TestCase):

    def test_list_opts(self):
        ((group, options),) = opts.list_opts()
        self.assertEqual('spdk_vhost', group)
        names = {o.name for o in options}
        self.assertLessEqual({'spdk_rpc_socket', 'spdk_rpc_address',
                              'spdk_rpc_port', 'spdk_rpc_timeout',
                              'spdk_rpc_connect_retries',
                              'spdk_rpc_retry_interval'}, names)
        self.assertEqual(len(options), len(names))
        for option in options:
            self.assertTrue(option.help, option.name)

    def test_from_conf(self):
        server = self.useFixture(FakeSpdkServer())
        conf = cfg.ConfigOpts()
        conf([], project='test')
        rpc_options.register_opts(conf, 'spdk_vhost')
        conf.set_override('spdk_rpc_socket', server.path, 'spdk_vhost')
        conf.set_override('spdk_rpc_timeout', 2.5, 'spdk_vhost')
        client = spdk_rpc.SpdkClient.from_conf(conf.spdk_vhost)
        self.addCleanup(client.close)
        self.assertEqual('unix:%s' % server.path, client.target)
        self.assertEqual('v', client.call('m', 'v'))

    def test_from_conf_tcp(self):
        conf = cfg.ConfigOpts()
        conf([], project='test')
        rpc_options.register_opts(conf, 'backend1')
        conf.set_override('spdk_rpc_address', '192.0.2.1', 'backend1')
        conf.set_override('spdk_rpc_port', 5260, 'backend1')
        client = spdk_rpc.SpdkClient.from_conf(conf.backend1)
        self.assertEqual('tcp:192.0.2.1:5260', client.target)
