"""The pieces the tempest-on-deployment test relies on.

``post_volume_action`` is checked against a real HTTP server through
tempest's real volumes client (it once called a method RestClient does
not have, and only a run against Cinder showed it). The subunit reader
and the list of expected tests decide whether a tempest run counts as
green, so they are checked on streams and sources with known content.
"""

import http.server
import importlib
import io
import json
import threading
import unittest

import subunit
from tempest.lib.common import api_microversion_fixture
from tempest.lib import exceptions as lib_exc
from tempest.lib.services.volume.v3 import volumes_client

from tempest_plugin import plugin
from tempest_plugin.tests import base as plugin_base
from tests import base
from tests.deployment import tempest_run


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Record each POST; answer with the server's ``status``."""

    def do_POST(self):
        length = int(self.headers['Content-Length'])
        self.server.requests.append(
            (self.path, self.headers.items(), self.rfile.read(length)))
        self.send_response(self.server.status)
        version = self.headers.get('OpenStack-API-Version')
        if version:
            self.send_header('OpenStack-API-Version', version)
        self.send_header('Content-Length', '0')
        self.end_headers()

    def log_message(self, *args):
        pass


def _versions(headers):
    """Every microversion header sent, whatever its case."""
    return [value for name, value in headers
            if name.lower() == 'openstack-api-version']


class _AuthProvider(object):
    """Just enough of an auth provider for RestClient: a fixed base."""

    def __init__(self, base_url):
        self.base = base_url
        self.credentials = None

    def auth_request(self, method, url, headers=None, body=None,
                     filters=None):
        return '%s/%s' % (self.base, url), headers, body

    def base_url(self, filters, auth_data=None):
        return self.base


class PostVolumeActionTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.server = http.server.HTTPServer(('127.0.0.1', 0), _Recorder)
        self.server.requests = []
        self.server.status = 202
        self.addCleanup(self.server.server_close)
        thread = threading.Thread(target=self.server.serve_forever)
        thread.start()
        self.addCleanup(thread.join)
        self.addCleanup(self.server.shutdown)
        base_url = 'http://127.0.0.1:%d/v3/project' % self.server.server_port
        self.client = volumes_client.VolumesClient(
            _AuthProvider(base_url), 'volumev3', 'RegionOne')

    def test_json_body_at_the_microversion(self):
        body = {'revert': {'snapshot_id': 'snap-1'}}
        plugin_base.post_volume_action(self.client, 'vol-1', body, '3.40')
        [(path, headers, sent)] = self.server.requests
        self.assertEqual('/v3/project/volumes/vol-1/action', path)
        self.assertEqual(['volume 3.40'], _versions(headers))
        self.assertEqual(body, json.loads(sent))

    def test_microversion_of_the_test_class_is_replaced(self):
        # Scenario tests send their class's microversion on every
        # request: the action must still go at its own, in one header.
        self.useFixture(api_microversion_fixture.APIMicroversionFixture(
            volume_microversion='3.0'))
        plugin_base.post_volume_action(
            self.client, 'vol-1', {'os-extend': {'new_size': 2}}, '3.42')
        [(_path, headers, _sent)] = self.server.requests
        self.assertEqual(['volume 3.42'], _versions(headers))

    def test_other_status_raises(self):
        self.server.status = 200
        self.assertRaises(lib_exc.InvalidHttpSuccessCode,
                          plugin_base.post_volume_action, self.client,
                          'vol-1', {'os-extend': {'new_size': 2}}, '3.42')


def _stream(*tests):
    """A subunit v2 stream of (id, status) with noise around it."""
    out = io.BytesIO()
    out.write(b'tempest says hello\n')
    writer = subunit.StreamResultToBytes(out)
    for test_id, status in tests:
        writer.status(test_id=test_id, test_status='inprogress')
        if status == 'fail':
            writer.status(test_id=test_id, file_name='traceback',
                          file_bytes=b'Traceback: boom', eof=True,
                          mime_type='text/plain; charset=utf8')
        writer.status(test_id=test_id, test_status=status)
    return out.getvalue()


class ParseSubunitTest(base.TestCase):

    def test_status_per_test_without_tags(self):
        stream = _stream(
            ('pkg.T.test_a[id-1234,smoke]', 'success'),
            ('pkg.T.test_b[id-5678]', 'fail'),
            ('pkg.T.test_c', 'skip'))
        results = tempest_run.parse_subunit(stream)
        self.assertEqual({'pkg.T.test_a': 'success', 'pkg.T.test_b': 'fail',
                          'pkg.T.test_c': 'skip'},
                         {k: v[0] for k, v in results.items()})
        self.assertEqual('Traceback: boom',
                         results['pkg.T.test_b'][1]['traceback'])

    def test_listed_only_is_not_a_result(self):
        out = io.BytesIO()
        subunit.StreamResultToBytes(out).status(test_id='pkg.T.test_a',
                                                test_status='exists')
        self.assertEqual({}, tempest_run.parse_subunit(out.getvalue()))

    def test_empty_stream(self):
        self.assertEqual({}, tempest_run.parse_subunit(b''))


class ExpectedTestsTest(base.TestCase):

    def test_same_as_tempest_discovery(self):
        test_dir, top_dir = plugin.SpdkVhostTempestPlugin().load_tests()
        suite = unittest.TestLoader().discover(test_dir,
                                               top_level_dir=top_dir)
        discovered = {'api': set(), 'scenario': set()}
        pending = [suite]
        while pending:
            item = pending.pop()
            if isinstance(item, unittest.TestSuite):
                pending.extend(item)
            else:
                kind = item.id().split('.')[2]
                discovered[kind].add(item.id().split('[')[0])
        self.assertIn('tempest_plugin.tests.api.test_volumes.'
                      'VolumeLifecycleTest.test_revert_to_snapshot',
                      tempest_run.expected_tests('api'))
        self.assertIn('tempest_plugin.tests.scenario.test_vhost_attach.'
                      'VhostAttachTest.test_extend_while_attached',
                      tempest_run.expected_tests('scenario'))
        for kind, found in discovered.items():
            self.assertEqual(found, tempest_run.expected_tests(kind))


class TestJudgeTempestTests(base.TestCase):
    """A run of tempest's own volume tests is green only when it should."""

    def green_run(self):
        results = {cls + '.test_it': ('success', {})
                   for cls in tempest_run.MUST_PASS}
        results.update((self.skip_id(key), ('skip', {'reason': 'n/a'}))
                       for key in tempest_run.NOT_APPLICABLE)
        return results

    @staticmethod
    def skip_id(key):
        """How a skip of ``key`` (a class, or one test) is reported."""
        if key.rsplit('.', 1)[1].startswith('test_'):
            return key
        return 'setUpClass (%s)' % key

    def test_green_run(self):
        self.assertEqual([], tempest_run.judge_tempest_tests(self.green_run()))

    def test_failure_is_reported(self):
        results = self.green_run()
        results['tempest.api.volume.test_volumes_backup.VolumesBackupsTest.'
                'test_other'] = ('fail', {'traceback': 'boom'})
        problems = tempest_run.judge_tempest_tests(results)
        self.assertEqual(1, len(problems))
        self.assertIn('boom', problems[0])

    def test_skip_of_an_applicable_class_is_a_problem(self):
        results = self.green_run()
        cls = tempest_run.MUST_PASS[0]
        del results[cls + '.test_it']
        results['setUpClass (%s)' % cls] = ('skip', {'reason': 'no backup'})
        problems = tempest_run.judge_tempest_tests(results)
        self.assertEqual(2, len(problems))      # skipped, and none passed
        self.assertIn('no backup', problems[0])

    def test_not_applicable_that_ran_is_a_problem(self):
        for key in tempest_run.NOT_APPLICABLE:
            results = self.green_run()
            del results[self.skip_id(key)]
            results[key + '.test_x'] = ('success', {})
            self.assertEqual(
                ['%s: listed as not applicable but not skipped' % key],
                tempest_run.judge_tempest_tests(results))

    def test_skip_of_another_test_of_a_listed_test_class(self):
        results = self.green_run()
        single = [key for key in tempest_run.NOT_APPLICABLE
                  if key != tempest_run.test_class(self.skip_id(key))]
        self.assertNotEqual([], single)
        other = tempest_run.test_class(single[0]) + '.test_other'
        results[other] = ('skip', {'reason': 'resize not available'})
        problems = tempest_run.judge_tempest_tests(results)
        self.assertEqual(1, len(problems))
        self.assertIn('resize not available', problems[0])

    def test_empty_run_is_a_problem(self):
        self.assertEqual(
            len(tempest_run.MUST_PASS) + len(tempest_run.NOT_APPLICABLE),
            len(tempest_run.judge_tempest_tests({})))

    def test_regex_selects_the_classes_it_judges(self):
        for key in tempest_run.MUST_PASS + tuple(tempest_run.NOT_APPLICABLE):
            self.assertRegex(key + '.test_x',
                             tempest_run.TEMPEST_VOLUME_TESTS)
        self.assertNotRegex('tempest.api.volume.test_volumes_list.'
                            'VolumesListTestJSON.test_x',
                            tempest_run.TEMPEST_VOLUME_TESTS)

    def test_judged_classes_and_tests_exist_in_tempest(self):
        for key in tempest_run.MUST_PASS + tuple(tempest_run.NOT_APPLICABLE):
            module, _sep, names = key.partition('.test_')
            module += '.test_' + names.split('.')[0]
            found = importlib.import_module(module)
            for name in names.split('.')[1:]:
                found = getattr(found, name, None)
            self.assertIsNotNone(found, key)
