"""The tempest plugin's API tests, run by tempest, on this deployment.

Loading the plugin proves little: its tests must run against a real
Cinder with the spdk_vhost backend and pass. Tempest authenticates with
keystone, so a keystone and a keystone-authenticated cinder-api are
added to the shared deployment (see ``keystone_api``); ``tempest run``
then runs every API test of the plugin with ``[spdk_vhost] api_tests``
on and the SPDK socket set, so the tests also check what SPDK enforces.
"""

import os

import fixtures
import testtools

from tests.deployment import base
from tests.deployment import cinder_conf
from tests.deployment import processes
from tests.deployment import tempest_conf
from tests.deployment import tempest_run


class TestTempestApi(base.DeploymentTestCase):

    def setUp(self):
        super().setUp()
        self.front = self.deployment.front()
        self.addOnException(self._attach_front_logs)

    def _attach_front_logs(self, exc_info):
        for name, text in self.front.logs().items():
            self.addDetail(name, testtools.content.text_content(text))

    def _attach_tempest_logs(self, workspace, stderr):
        self.addDetail('tempest-stderr',
                       testtools.content.text_content(stderr[-6000:]))
        self.addDetail('tempest.log', testtools.content.text_content(
            processes.tail(os.path.join(workspace, 'tempest.log'), 20000)))

    def test_every_api_test_passes(self):
        expected = tempest_run.expected_tests()
        self.assertGreater(len(expected), 0, 'no API test found to run')
        # The type the tests' volumes get by default, on the backend.
        vtype = self.make_type(extra_specs={
            'volume_backend_name': cinder_conf.BACKEND})
        workspace = self.useFixture(fixtures.TempDir()).path
        conf_path = os.path.join(workspace, 'tempest.conf')
        tempest_conf.write(conf_path, tempest_conf.build(
            self.deployment, self.front.keystone.uri,
            self.front.keystone.admin_password, volume_type=vtype.name,
            lock_path=os.path.join(workspace, 'lock')))

        rc, results, stderr = tempest_run.tempest_run(workspace, conf_path)

        self.addOnException(lambda _exc: self._attach_tempest_logs(
            workspace, stderr))
        failed = sorted(test for test, (status, _d) in results.items()
                        if status != 'success')
        self.assertEqual([], failed, '\n'.join(
            '==== %s: %s\n%s' % (
                test, results[test][0],
                results[test][1].get('traceback', ''))
            for test in failed))
        self.assertEqual(sorted(expected), sorted(results),
                         'the tests tempest ran are not the API tests')
        self.assertEqual(0, rc, 'tempest run failed:\n%s' % stderr[-3000:])
