"""The exception tree, checked against every error real SPDK returned."""

import glob
import json
import os
import pickle

from spdk_vhost_core import exception as exc
from tests import base

TRANSCRIPTS = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'functional', 'transcripts')

# What callers must see for each (code, message) SPDK v26.05 answered.
# A transcript error missing here fails test_every_error_is_expected, so
# new recordings cannot slip past the classification.
EXPECTED = {
    (-32601, 'Method not found'): exc.MethodNotFound,
    (-32603, 'spdk_json_decode_object failed'): exc.InvalidParams,
    (-19, 'No such device'): exc.NotFound,
    (-126, 'Required key not available'): exc.NotFound,
    (-32602, 'No such device'): exc.NotFound,
    (-32603, 'No such device'): exc.NotFound,
    (-17, 'File exists'): exc.AlreadyExists,
    (-32602, 'File exists'): exc.AlreadyExists,
    (-32603, "Transport type 'TCP' already exists"): exc.AlreadyExists,
    (-32602, 'No space left on device'): exc.NoSpace,
    (-1, 'Operation not permitted'): exc.NotPermitted,
    (-32603, 'Operation not permitted'): exc.NotPermitted,
    (-32602, 'Failed to configure rate limit: '
             'Resource temporarily unavailable'): exc.TryAgain,
    (-32602, 'Invalid parameters'): exc.InvalidParams,
    (-32602, 'Invalid argument'): exc.InvalidParams,
    (-22, 'No rate limits specified'): exc.InvalidParams,
    # bdev_nvme_get_controllers for an unknown name (v26.05).
    (-22, 'Controller spdkvhost0 does not exist'): exc.NotFound,
    # The same on v26.01: a positive code.
    (22, 'Controller spdkvhost0 does not exist'): exc.NotFound,
    # bdev_nvme_attach_controller over TCP on an interrupt-mode target.
    (-95, 'Operation not supported'): exc.NotSupported,
    # Ambiguous in SPDK (duplicate NQN or malformed NQN; refused host or
    # unreachable target): deliberately left unclassified.
    (-32603, 'Unable to create subsystem nqn.2016-06.io.spdk:vol-test'):
        exc.SpdkRpcError,
    (-32603, 'Unable to create subsystem not-an-nqn'): exc.SpdkRpcError,
    (-5, 'Input/output error'): exc.SpdkRpcError,
}


def transcript_errors():
    """Yield (file, method, params, error) for every recorded error."""
    for path in sorted(glob.glob(os.path.join(TRANSCRIPTS, '*.json'))):
        with open(path) as f:
            doc = json.load(f)
        for call in doc.get('calls', []):
            if 'error' in call:
                yield (os.path.basename(path), call['method'],
                       call.get('params'), call['error'])


class TranscriptClassificationTest(base.TestCase):

    def test_transcripts_have_errors(self):
        # Guards the tests below against an empty or moved directory.
        self.assertGreater(len(list(transcript_errors())), 40)

    def test_every_error_is_expected(self):
        for name, method, params, error in transcript_errors():
            key = (error['code'], error['message'])
            self.assertIn(key, EXPECTED, '%s: %s' % (name, method))

    def test_every_error_is_classified(self):
        for name, method, params, error in transcript_errors():
            err = exc.from_response(method, params, error)
            expected = EXPECTED[(error['code'], error['message'])]
            self.assertIs(expected, type(err),
                          '%s: %s %s' % (name, method, error))
            self.assertEqual(error['code'], err.code)
            self.assertEqual(error['message'], err.message)
            self.assertEqual(method, err.method)


class RuleTest(base.TestCase):
    """Codes SPDK can return that the transcripts happen not to show."""

    def test_errno_codes(self):
        for code, cls in ((-19, exc.NotFound), (-2, exc.NotFound),
                          (-17, exc.AlreadyExists), (-16, exc.Busy),
                          (-28, exc.NoSpace), (-1, exc.NotPermitted),
                          (-11, exc.TryAgain), (-22, exc.InvalidParams)):
            self.assertIs(cls, exc.classify(code, 'whatever'), code)

    def test_generic_codes_use_the_message(self):
        self.assertIs(exc.Busy,
                      exc.classify(-32602, 'Device or resource busy'))
        self.assertIs(exc.InvalidParams, exc.classify(-32602, 'odd'))
        self.assertIs(exc.SpdkRpcError, exc.classify(-32603, 'odd'))

    def test_errno_code_wins_over_message(self):
        self.assertIs(exc.NotFound, exc.classify(-19, 'File exists'))

    def test_unknown_code(self):
        self.assertIs(exc.SpdkRpcError, exc.classify(-5, 'I/O error'))
        self.assertIs(exc.SpdkRpcError, exc.classify(None, None))

    def test_malformed_error_object(self):
        err = exc.from_response('m', None, 'boom')
        self.assertIsInstance(err, exc.ProtocolError)

    def test_error_without_message(self):
        err = exc.from_response('m', None, {'code': -17})
        self.assertIsInstance(err, exc.AlreadyExists)
        self.assertEqual('', err.message)


class ExceptionTest(base.TestCase):

    def test_str_names_method_code_and_message(self):
        err = exc.NotFound('bdev_get_bdevs', {'name': 'x'}, -19,
                           'No such device')
        self.assertEqual('SPDK RPC bdev_get_bdevs failed (code -19): '
                         'No such device', str(err))

    def test_tree(self):
        for cls in (exc.NotFound, exc.AlreadyExists, exc.Busy, exc.NoSpace,
                    exc.NotPermitted, exc.TryAgain, exc.NotSupported,
                    exc.InvalidParams, exc.MethodNotFound,
                    exc.SpdkTransportError):
            self.assertTrue(issubclass(cls, exc.SpdkRpcError), cls)
        for cls in (exc.Timeout, exc.TargetUnreachable, exc.ProtocolError):
            self.assertTrue(issubclass(cls, exc.SpdkTransportError), cls)

    def test_params_are_masked(self):
        params = {'nqn': 'n', 'host': 'h', 'psk': 'NVMeTLSkey-1:01:abc',
                  'auth': {'password': 'hunter2'}}
        err = exc.SpdkRpcError('nvmf_subsystem_add_host', params, -1, 'x')
        self.assertEqual('***', err.params['psk'])
        self.assertEqual('***', err.params['auth']['password'])
        self.assertEqual('n', err.params['nqn'])
        self.assertNotIn('hunter2', repr(err))
        # The caller's dict is not modified.
        self.assertEqual('hunter2', params['auth']['password'])

    def test_pickles(self):
        err = exc.TryAgain('bdev_set_qos_limit', {'name': 'v'}, -32602,
                           'Resource temporarily unavailable')
        copy = pickle.loads(pickle.dumps(err))
        self.assertIs(exc.TryAgain, type(copy))
        self.assertEqual(str(err), str(copy))
        self.assertEqual({'name': 'v'}, copy.params)
