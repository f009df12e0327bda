"""The tempest plugin's tests, run by tempest, on this deployment.

Loading the plugin proves little: its tests must run against a real
Cinder with the spdk_vhost backend and pass. Tempest authenticates with
keystone, so a keystone and a keystone-authenticated cinder-api are
added to the shared deployment (see ``keystone_api``); ``tempest run``
then runs the plugin's tests with the SPDK socket set, so they also
check what SPDK enforces: the API tests on Cinder alone, the scenario
tests on the compute cloud too (real Nova, servers booted from the test
guest, which reports its disks on the console that tempest reads
through Nova's API). Tempest's own volume tests of the everyday
operations (snapshots, backups, manage, retype, multiattach) run on the
compute cloud as well: see ``tempest_run.TEMPEST_VOLUME_TESTS`` for
which, and ``NOT_APPLICABLE`` for those that do not apply, and why.
"""

import os

import fixtures
import testtools

from tests.deployment import base
from tests.deployment import cinder_conf
from tests.deployment import nova_base
from tests.deployment import processes
from tests.deployment import tempest_conf
from tests.deployment import tempest_run


class TempestRunMixin(object):
    """Run tempest against the deployment, and judge what it ran.

    The clustered one: its process is the Nova lane's (tools/run-tests.sh).
    """

    CLUSTERED = True

    def _attach_tempest_logs(self, workspace, stderr):
        self.addDetail('tempest-stderr',
                       testtools.content.text_content(stderr[-6000:]))
        self.addDetail('tempest.log', testtools.content.text_content(
            processes.tail(os.path.join(workspace, 'tempest.log'), 20000)))

    def tempest(self, test_regex, compute=None, own_tests=False,
                timeout=600):
        """``tempest run`` of ``test_regex`` here: (rc, results, stderr)."""
        front = self.deployment.front()
        self.addOnException(lambda _exc: self.attach_service_logs(front))
        # The type the plugin's volumes get by default, on the backend.
        vtype = self.make_type(extra_specs={
            'volume_backend_name': cinder_conf.BACKEND})
        workspace = self.useFixture(fixtures.TempDir()).path
        conf_path = os.path.join(workspace, 'tempest.conf')
        conf = tempest_conf.build(
            self.deployment, front.keystone.uri,
            front.keystone.admin_password, volume_type=vtype.name,
            lock_path=os.path.join(workspace, 'lock'), compute=compute)
        if own_tests:
            multiattach = self.make_type(extra_specs={
                'volume_backend_name': cinder_conf.BACKEND,
                'multiattach': '<is> True'})
            tempest_conf.for_tempest_tests(conf, multiattach.name)
        tempest_conf.write(conf_path, conf)

        rc, results, stderr = tempest_run.tempest_run(
            workspace, conf_path, test_regex, timeout=timeout)

        self.addOnException(lambda _exc: self._attach_tempest_logs(
            workspace, stderr))
        return rc, results, stderr

    def run_tempest(self, kind, compute=None, timeout=600):
        """Run the plugin's ``kind`` tests: every one of them passes."""
        expected = tempest_run.expected_tests(kind)
        self.assertGreater(len(expected), 0, 'no %s test found' % kind)
        rc, results, stderr = self.tempest(tempest_run.regex(kind),
                                           compute, timeout=timeout)
        failed = sorted(test for test, (status, _d) in results.items()
                        if status != 'success')
        self.assertEqual([], failed, '\n'.join(
            '==== %s: %s\n%s' % (
                test, results[test][0],
                results[test][1].get('traceback', ''))
            for test in failed))
        self.assertEqual(sorted(expected), sorted(results),
                         'the tests tempest ran are not the %s tests' % kind)
        self.assertEqual(0, rc, 'tempest run failed:\n%s' % stderr[-3000:])

    def attach_service_logs(self, service):
        for name, text in service.logs().items():
            self.addDetail(name, testtools.content.text_content(text))


class TestTempestApi(TempestRunMixin, base.DeploymentTestCase):

    def test_every_api_test_passes(self):
        self.run_tempest('api')


class TestTempestScenario(TempestRunMixin, nova_base.NovaTestCase):

    def test_every_scenario_test_passes(self):
        self.run_tempest('scenario', compute=(self.images['report'],
                                              self.image_flavor),
                         timeout=1800)


class TestTempestVolumeOperations(TempestRunMixin, nova_base.NovaTestCase):

    def test_tempest_volume_tests_pass(self):
        rc, results, stderr = self.tempest(
            tempest_run.TEMPEST_VOLUME_TESTS, own_tests=True,
            compute=(self.images['report'], self.image_flavor,
                     self.image_flavor_alt),
            timeout=2400)
        self.assertEqual([], tempest_run.judge_tempest_tests(results))
        self.assertEqual(0, rc, 'tempest run failed:\n%s' % stderr[-3000:])
