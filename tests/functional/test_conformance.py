"""The SPDK this run built answers every recorded v26.05 call exactly.

Each scenario in tests/functional/transcripts/ is replayed on fresh real
targets (a storage ``spdk_tgt`` and, for calls marked ``"target":
"compute"``, a second one; tests/functional/replay.py gives the rules and
how the replay adapts to this machine), plus the JSON-RPC envelope cases a
transcript cannot express. An SPDK upgrade that changes an error code or
a reply the drivers rely on fails here.
"""

import filecmp
import json
import os
import socket
import threading

import fixtures

from testbed import rpc_raw
from testbed import spdk_build
from tests import base
from tests.functional import replay

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SHARED = os.path.join(REPO, '..', 'shared', 'spdk-transcripts')


class ConformanceTest(base.TestCase):

    #: The SPDK release replayed against (None: the suite's SPDK_DIR),
    #: and how its answers differ from the recording's (replay.py).
    version = None
    differences = None
    accepts = ()

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(300, gentle=True))

    def _replay(self, name):
        scenario = replay.load(name)
        needs_compute = any(c.get('target') == 'compute'
                            for c in scenario['calls'])
        tree = spdk_build.tree(self.version) if self.version else None
        targets = {'storage': self.useFixture(
            replay.target('storage', tree))}
        if needs_compute:
            targets['compute'] = self.useFixture(
                replay.target('compute', tree))
        work_dir = self.useFixture(fixtures.TempDir()).path
        replay.prepare_work_dir(work_dir)
        replay.Replay(scenario, targets, work_dir, self.differences,
                      self.accepts).run(replay.CHECKS)


def _add_scenario_tests():
    for name in replay.scenario_files():
        def test(self, name=name):
            self._replay(name)
        test_name = 'test_%s' % name[:-len('.json')]
        test.__name__ = test_name
        setattr(ConformanceTest, test_name, test)


_add_scenario_tests()


class OlderReleaseConformanceTest(ConformanceTest):
    """The same scenarios on the older supported release (v26.01)."""

    version = spdk_build.VERSIONS[0]
    differences = replay.V26_01_DIFFERENCES
    accepts = replay.V26_01_ACCEPTS


class TranscriptCopyTest(base.TestCase):

    def test_copy_equals_shared_originals(self):
        if not os.path.isdir(SHARED):
            self.skipTest('no shared transcripts next to the repository')
        names = sorted(f for f in os.listdir(SHARED) if not f.startswith('.'))
        self.assertNotEqual([], names)
        match, mismatch, errors = filecmp.cmpfiles(
            SHARED, replay.TRANSCRIPTS, names, shallow=False)
        self.assertEqual(([], []), (mismatch, errors))
        self.assertEqual(names, match)

    def test_every_transcript_is_replayed(self):
        scenarios = [f for f in os.listdir(replay.TRANSCRIPTS)
                     if f.endswith('.json')]
        covered = set(replay.scenario_files()) | {
            'save_config.full.json', 'envelope_parse_error.json'}
        self.assertEqual(set(scenarios), covered)


class EnvelopeTest(base.TestCase):
    """Framing and error cases outside any scenario file."""

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(120, gentle=True))
        self.target = self.useFixture(replay.target('storage'))

    def _client(self):
        client = rpc_raw.RawClient(self.target.socket_path, timeout=10)
        self.addCleanup(client.close)
        return client

    def _assert_closed(self, client):
        self.assertRaises(ConnectionError, client.recv)

    def test_malformed_json_closes_without_reply(self):
        recorded = json.loads(open(os.path.join(
            replay.TRANSCRIPTS, 'envelope_parse_error.json')).read())
        client = self._client()
        client.send_raw(recorded['sent_raw'].encode())
        self._assert_closed(client)
        # The server keeps serving other clients.
        self.assertIn('result', self.target.call('spdk_get_version'))

    def test_oversized_request_closes(self):
        client = self._client()
        try:
            client.send_raw(b'{"jsonrpc": "2.0", "method": "x", "params": '
                            b'["' + b'a' * (2 * 1024 * 1024))
        except (BrokenPipeError, ConnectionResetError):
            pass
        self._assert_closed(client)

    def test_split_and_pipelined_requests(self):
        client = self._client()
        req = json.dumps({'jsonrpc': '2.0', 'method': 'spdk_get_version',
                          'id': 7}, indent=2).encode()
        client.send_raw(req[:5])
        client.send_raw(req[5:] + req.replace(b'7', b'8'))
        self.assertEqual(7, client.recv()['id'])
        self.assertEqual(8, client.recv()['id'])

    def test_reply_is_newline_terminated(self):
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(10)
            sock.connect(self.target.socket_path)
            sock.sendall(b'{"jsonrpc":"2.0","method":"spdk_get_version",'
                         b'"id":1}')
            data = b''
            while not data.endswith(b'\n'):
                chunk = sock.recv(4096)
                self.assertTrue(chunk, 'closed before the newline')
                data += chunk
        self.assertEqual(1, json.loads(data)['id'])

    def test_unknown_method(self):
        self.assertEqual({'code': -32601, 'message': 'Method not found'},
                         self.target.call('save_config')['error'])

    def test_wrong_param_types(self):
        decode_failed = {'code': -32603,
                         'message': 'spdk_json_decode_object failed'}
        for method, params in (
                ('bdev_get_bdevs', {'name': 12}),
                ('bdev_get_bdevs', []),
                ('bdev_malloc_create', {'num_blocks': True,
                                        'block_size': 512}),
                ('bdev_lvol_create', {'lvol_name': 'x'}),
                ('bdev_set_qos_limit', {'name': 'x',
                                        'rw_ios_per_sec': 1.5})):
            self.assertEqual(decode_failed,
                             self.target.call(method, params)['error'],
                             method)

    def test_concurrent_clients(self):
        results = []

        def worker(index):
            client = rpc_raw.RawClient(self.target.socket_path, timeout=60)
            try:
                name = 'Malloc%d' % (100 + index)
                results.append(client.call('bdev_malloc_create', {
                    'name': name, 'num_blocks': 2048, 'block_size': 512}))
                results.append(client.call('bdev_malloc_delete',
                                           {'name': name}))
            finally:
                client.close()

        threads = [threading.Thread(target=worker, args=(i,))
                   for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        self.assertEqual(16, len(results))
        self.assertTrue(all('result' in r for r in results), results)
        self.assertEqual([], self.target.call('bdev_get_bdevs')['result'])
