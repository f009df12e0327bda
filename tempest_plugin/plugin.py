"""Tempest plugin entry point (``tempest.test_plugins`` in setup.cfg)."""

import os

from tempest import config
from tempest.test_discover import plugins

from tempest_plugin import config as plugin_config


class SpdkVhostTempestPlugin(plugins.TempestPlugin):
    """Registers the ``[spdk_vhost]`` options and the plugin's tests."""

    def load_tests(self):
        test_dir = os.path.dirname(os.path.abspath(__file__))
        return test_dir, os.path.dirname(test_dir)

    def register_opts(self, conf):
        config.register_opt_group(conf, plugin_config.spdk_vhost_group,
                                  plugin_config.SpdkVhostGroup)

    def get_opt_lists(self):
        return [(plugin_config.spdk_vhost_group.name,
                 plugin_config.SpdkVhostGroup)]
