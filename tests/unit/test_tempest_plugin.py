"""The tempest plugin is found through its entry point and registers opts."""

from oslo_config import cfg
from tempest.test_discover import plugins

from tempest_plugin import config as plugin_config
from tempest_plugin import plugin
from tests import base


class TempestPluginTest(base.TestCase):

    def test_entry_point_finds_the_plugin(self):
        manager = plugins.TempestTestPluginManager()
        found = {ext.name: ext.plugin for ext in manager.ext_plugins}
        self.assertIn('spdk_vhost', found)
        self.assertIs(plugin.SpdkVhostTempestPlugin, found['spdk_vhost'])

    def test_options_default_to_off(self):
        conf = cfg.ConfigOpts()
        plugin.SpdkVhostTempestPlugin().register_opts(conf)
        conf([])
        self.assertFalse(conf.spdk_vhost.api_tests)
        self.assertFalse(conf.spdk_vhost.scenario_tests)
        self.assertEqual('high-iops', conf.spdk_vhost.volume_type)

    def test_opt_lists_name_every_option(self):
        [(group, opts)] = plugin.SpdkVhostTempestPlugin().get_opt_lists()
        self.assertEqual('spdk_vhost', group)
        self.assertEqual(plugin_config.SpdkVhostGroup, opts)
