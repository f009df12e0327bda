"""The tempest plugin's tests: found, importable, identified, off by default.

They need a cloud to run; here they are discovered exactly as tempest
does (from the plugin's load_tests()), and run with the default options,
under which every one of them must skip rather than fail.
"""

import importlib
import pkgutil
import unittest

from tempest_plugin import plugin
from tempest_plugin import tests as plugin_tests
from tests import base


def _flatten(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from _flatten(item)
        else:
            yield item


def _discover():
    test_dir, top_dir = plugin.SpdkVhostTempestPlugin().load_tests()
    suite = unittest.TestLoader().discover(test_dir, top_level_dir=top_dir)
    return list(_flatten(suite))


class TempestTestsTest(base.TestCase):

    def test_every_module_imports(self):
        names = [m.name for m in pkgutil.walk_packages(
            plugin_tests.__path__, plugin_tests.__name__ + '.')]
        self.assertIn('tempest_plugin.tests.scenario.test_vhost_attach',
                      names)
        for name in names:
            importlib.import_module(name)

    def test_discovery_finds_api_and_scenario_tests(self):
        found = _discover()
        broken = ('_FailedTest', 'ModuleImportFailure')
        failed = [t.id() for t in found if type(t).__name__ in broken]
        self.assertEqual([], failed)
        ids = [t.id().split('[')[0] for t in found]
        self.assertIn('tempest_plugin.tests.api.test_qos.QosSpecTest.'
                      'test_volume_type_with_qos_spec', ids)
        self.assertIn('tempest_plugin.tests.scenario.test_vhost_attach.'
                      'VhostAttachTest.test_extend_while_attached', ids)
        self.assertGreaterEqual(len(ids), 12)

    def test_each_test_has_its_own_idempotent_id(self):
        uuids = {}
        for test in _discover():
            method = getattr(type(test), test._testMethodName)
            attrs = getattr(method, '__testtools_attrs', ())
            found = [a[len('id-'):] for a in attrs if a.startswith('id-')]
            self.assertEqual(1, len(found), test.id())
            self.assertNotIn(found[0], uuids, test.id())
            uuids[found[0]] = test.id()

    def test_all_skip_with_default_options(self):
        result = unittest.TestResult()
        suite = unittest.TestSuite(_discover())
        suite.run(result)
        self.assertEqual([], result.errors + result.failures)
        # Each class skips in setUpClass: no test reaches a cloud.
        self.assertEqual(0, result.testsRun)
        self.assertEqual({'[spdk_vhost] api_tests is disabled',
                          '[spdk_vhost] scenario_tests is disabled'},
                         {reason for _, reason in result.skipped})
