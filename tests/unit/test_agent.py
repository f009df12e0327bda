"""spdk-vhost-agent: what it forwards, what it writes, who it lets in.

The dispatcher runs against a scripted target client; the HTTPS server
and the client's agent transport meet on a real loopback socket with a
real certificate, as cinder-volume and a storage node do.
"""

import http.client
import os
import stat
import threading

import fixtures

from spdk_vhost_agent import methods
from spdk_vhost_agent import server
from spdk_vhost_core import exception as exc
from spdk_vhost_core import node_state
from spdk_vhost_core import nvme_auth
from spdk_vhost_core import rpc_transport
from spdk_vhost_core import spdk_rpc
from testbed import net
from testbed import tls
from tests import base

NQN = 'nqn.2016-06.io.spdk:cinder:volume-1'
HOST = 'nqn.2014-08.org.nvmexpress:uuid:6f4c1a32-8e2b-4f43-9d1e-0c6a7d1e2b3c'
SETTINGS = {'ctrlr_loss_timeout_sec': 120, 'reconnect_delay_sec': 2,
            'fast_io_fail_timeout_sec': 70}


class ScriptedTarget(object):
    """The node's target: answers from a table, records what it got."""

    target = 'unix:/scripted'
    through_agent = False

    def __init__(self):
        self.calls = []
        self.answers = {'rpc_get_methods': [
            'bdev_lvol_create', 'bdev_aio_create', 'keyring_file_add_key',
            'keyring_file_remove_key', 'framework_get_config',
            'spdk_kill_instance', 'nvmf_create_subsystem']}

    def call(self, method, params=None):
        self.calls.append((method, params))
        answer = self.answers.get(method, True)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def keyring_file_add_key(self, name, path):
        return self.call('keyring_file_add_key', {'name': name,
                                                  'path': path})

    def keyring_file_remove_key(self, name):
        return self.call('keyring_file_remove_key', {'name': name})

    def save_config(self):
        self.calls.append(('save_config', None))
        return {'subsystems': [{'subsystem': 'nvmf', 'config': []}]}


class DispatcherTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.target = ScriptedTarget()
        self.saved = os.path.join(self.dir, 'spdk.json')
        self.key_dir = os.path.join(self.dir, 'keys')
        self.dispatch = methods.Dispatcher(self.target, node_state.LocalNode(
            self.target, self.saved, self.key_dir))

    def ask(self, method, params=None):
        request = {'jsonrpc': '2.0', 'id': 7, 'method': method}
        if params is not None:
            request['params'] = params
        reply = self.dispatch(request)
        self.assertEqual(7, reply['id'])
        return reply

    def test_forwards_what_the_driver_uses_and_spdk_errors_as_they_came(self):
        self.assertEqual({'jsonrpc': '2.0', 'id': 7, 'result': True},
                         self.ask('bdev_lvol_create', {'lvol_name': 'v'}))
        self.assertEqual([('bdev_lvol_create', {'lvol_name': 'v'})],
                         self.target.calls)
        self.target.answers['nvmf_create_subsystem'] = exc.from_response(
            'nvmf_create_subsystem', {}, {'code': -32603, 'message': 'x'})
        self.assertEqual({'code': -32603, 'message': 'x'},
                         self.ask('nvmf_create_subsystem')['error'])

    def test_refuses_what_names_a_file_stops_the_target_or_reads_keys(self):
        for method in ('bdev_aio_create', 'keyring_file_add_key',
                       'framework_get_config', 'spdk_kill_instance',
                       'no_such_method'):
            error = self.ask(method, {'filename': '/etc/shadow'})['error']
            self.assertEqual(exc.JSONRPC_METHOD_NOT_FOUND, error['code'])
            self.assertIn('spdk-vhost-agent does not forward',
                          error['message'])
        self.assertEqual([], self.target.calls)

    def test_lists_only_what_it_serves(self):
        listed = self.ask('rpc_get_methods')['result']
        self.assertIn('bdev_lvol_create', listed)
        self.assertIn(node_state.KEY_ADD, listed)
        for refused in ('bdev_aio_create', 'keyring_file_add_key',
                        'framework_get_config', 'spdk_kill_instance'):
            self.assertNotIn(refused, listed)

    def test_no_answer_from_the_target_is_the_agents_own_error(self):
        for err, cls in (
                (exc.TargetUnreachable('x', message='down'),
                 exc.TargetUnreachable),
                (exc.Timeout('x', message='slow'), exc.Timeout),
                (exc.ProtocolError('x', message='cut'), exc.ProtocolError)):
            self.target.answers['bdev_get_bdevs'] = err
            error = self.ask('bdev_get_bdevs')['error']
            # The caller sees the same class as from a socket of its own.
            self.assertIs(cls, type(exc.from_response('bdev_get_bdevs', {},
                                                      error)))

    def test_a_key_is_written_0600_on_this_node_and_registered_by_path(self):
        secret = nvme_auth.generate_secret()
        name = nvme_auth.key_name(NQN, HOST)
        self.assertTrue(self.ask(node_state.KEY_ADD, {
            'name': name, 'secret': secret})['result'])
        path = os.path.join(self.key_dir, name)
        with open(path) as f:
            self.assertEqual(secret, f.read())
        self.assertEqual(0o600, stat.S_IMODE(os.stat(path).st_mode))
        self.assertEqual(('keyring_file_add_key', {'name': name,
                                                   'path': path}),
                         self.target.calls[-1])
        self.ask(node_state.KEY_REMOVE, {'name': name})
        self.assertFalse(os.path.exists(path))

    def test_key_names_secrets_and_nqns_are_checked(self):
        good = nvme_auth.key_name(NQN, HOST)
        for method, params in (
                (node_state.KEY_ADD, {'name': '../../etc/passwd',
                                      'secret': nvme_auth.generate_secret()}),
                (node_state.KEY_ADD, {'name': good, 'secret': 'DHHC-1:00:x:'}),
                (node_state.KEY_REMOVE, {'name': 'spdkvhost-/x'}),
                (node_state.HOST_RECORD, {'host_nqn': '/tmp/x',
                                          'subsystem': NQN,
                                          'settings': None}),
                (node_state.HOST_RECORD, {'host_nqn': HOST, 'subsystem': NQN,
                                          'settings': {'bogus': 1}}),
                (node_state.HOST_FORGET, {'subsystem': NQN,
                                          'host_nqns': 'nqn.x'}),
                (node_state.SAVE_CONFIG, {'subsystems': ['../x']}),
                (node_state.SAVE_CONFIG, {'path': '/etc/passwd'})):
            error = self.ask(method, params)['error']
            self.assertEqual(exc.JSONRPC_INVALID_PARAMS, error['code'],
                             (method, params))
            self.assertNotIn('DHHC', error['message'])
        self.assertFalse(os.path.exists(self.key_dir))
        self.assertEqual([], self.target.calls)

    def test_hosts_recorded_beside_the_saved_config_of_this_node(self):
        self.assertIsNone(self.ask(node_state.HOST_RECORD, {
            'host_nqn': HOST, 'subsystem': NQN,
            'settings': SETTINGS})['result'])
        self.assertEqual(SETTINGS, self.ask(node_state.HOST_RECORD, {
            'host_nqn': HOST, 'subsystem': NQN,
            'settings': {'mirrored': True}})['result'])
        self.assertTrue(os.path.exists(self.saved + '.hosts.json'))
        self.ask(node_state.HOST_FORGET, {'subsystem': NQN,
                                          'host_nqns': [HOST]})
        with open(self.saved + '.hosts.json') as f:
            self.assertEqual('{\n  "hosts": {}\n}\n', f.read())

    def test_saves_the_config_where_this_node_starts_its_target(self):
        self.assertTrue(self.ask(node_state.SAVE_CONFIG)['result'])
        self.assertTrue(os.path.exists(self.saved))
        self.assertIn(('save_config', None), self.target.calls)

    def test_malformed_requests(self):
        for request in ([], {'method': 3}, {'id': 1}):
            self.assertEqual(exc.JSONRPC_INVALID_PARAMS,
                             self.dispatch(request)['error']['code'])
        self.assertEqual(exc.JSONRPC_INVALID_PARAMS, self.dispatch(
            {'id': 1, 'method': 'bdev_get_bdevs', 'params': [1]}
        )['error']['code'])


class ServerTest(base.TestCase):
    """The real listener and the real client transport, over TLS."""

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.ca = tls.Authority(self.dir)
        cert, key = self.ca.issue('node', ['127.0.0.1'])
        self.target = ScriptedTarget()
        self.port = net.free_port()
        self.server = server.AgentServer(
            '127.0.0.1', self.port, cert, key, 'cinder', 'right',
            methods.Dispatcher(self.target, node_state.LocalNode(
                self.target, os.path.join(self.dir, 'spdk.json'),
                os.path.join(self.dir, 'keys'))))
        thread = threading.Thread(target=self.server.serve_forever)
        thread.start()
        self.addCleanup(thread.join, 10)
        self.addCleanup(self.server.server_close)
        self.addCleanup(self.server.shutdown)

    def client(self, password='right', ca_file=None, retries=0):
        agent = rpc_transport.Agent('https://127.0.0.1:%d' % self.port,
                                    'cinder', password,
                                    ca_file or self.ca.ca_file)
        client = spdk_rpc.SpdkClient(agent=agent, timeout=10,
                                     connect_retries=retries)
        self.addCleanup(client.close)
        return client

    def test_calls_on_one_kept_connection(self):
        client = self.client()
        self.assertTrue(client.through_agent)
        self.assertEqual('https://127.0.0.1:%d' % self.port, client.target)
        self.assertTrue(client.call('bdev_get_bdevs', {'name': 'a'}))
        conn = client._conn
        self.assertTrue(client.call('bdev_get_bdevs', {'name': 'b'}))
        self.assertIs(conn, client._conn)
        self.assertEqual([('bdev_get_bdevs', {'name': 'a'}),
                          ('bdev_get_bdevs', {'name': 'b'})],
                         self.target.calls)

    def test_spdk_errors_arrive_as_from_a_socket(self):
        self.target.answers['bdev_lvol_delete'] = exc.from_response(
            'bdev_lvol_delete', {}, {'code': -19, 'message': 'No such device'})
        self.assertRaises(exc.NotFound, self.client().call,
                          'bdev_lvol_delete', {'name': 'x'})
        self.assertRaises(exc.MethodNotFound, self.client().call,
                          'bdev_aio_create', {'filename': '/etc/shadow'})

    def test_wrong_password_refused_and_said(self):
        err = self.assertRaises(exc.ProtocolError, self.client('wrong').call,
                                'bdev_get_bdevs')
        self.assertIn('401', str(err))
        self.assertIn('spdk_agent_password', str(err))
        self.assertEqual([], self.target.calls)

    def test_a_certificate_of_another_ca_is_refused(self):
        other = tls.Authority(self.useFixture(fixtures.TempDir()).path)
        err = self.assertRaises(exc.TargetUnreachable,
                                self.client(ca_file=other.ca_file).call,
                                'bdev_get_bdevs')
        self.assertIn('CERTIFICATE_VERIFY_FAILED', str(err))
        self.assertEqual([], self.target.calls)

    def test_plain_http_and_other_verbs_get_nothing(self):
        plain = http.client.HTTPConnection('127.0.0.1', self.port, timeout=5)
        self.addCleanup(plain.close)

        def post():
            # The server may hang up while the body is still being sent
            # (a broken pipe) or before the response (no answer).
            plain.request('POST', '/', body=b'{}')
            return plain.getresponse()
        self.assertRaises((OSError, http.client.HTTPException), post)
        agent = rpc_transport.Agent('https://127.0.0.1:%d' % self.port,
                                    'cinder', 'right', self.ca.ca_file)
        conn = agent.connect(5).http
        self.addCleanup(conn.close)
        conn.request('GET', '/')
        response = conn.getresponse()
        response.read()
        self.assertEqual(405, response.status)
        # Refused on its declared length, before its body is read (a
        # body sent along could meet the closed connection).
        conn.putrequest('POST', '/')
        conn.putheader('Authorization', agent.authorization)
        conn.putheader('Content-Length', str(server.MAX_REQUEST + 1))
        conn.endheaders()
        self.assertEqual(413, conn.getresponse().status)
        self.assertEqual([], self.target.calls)
