"""Tempest options for the spdk-vhost plugin.

Every test group is off by default: a cloud without an spdk_vhost backend
must be able to load the plugin and run nothing from it.
"""

from oslo_config import cfg

spdk_vhost_group = cfg.OptGroup(
    name='spdk_vhost',
    title='spdk-vhost plugin options')

SpdkVhostGroup = [
    cfg.BoolOpt('api_tests',
                default=False,
                help='Run the volume API tests against the spdk_vhost '
                     'backend.'),
    cfg.BoolOpt('scenario_tests',
                default=False,
                help='Run the scenario tests that boot an instance and '
                     'attach spdk_vhost volumes to it.'),
    cfg.StrOpt('volume_type',
               default='high-iops',
               help='Volume type whose volumes land on the spdk_vhost '
                    'backend.'),
    cfg.StrOpt('hugepage_flavor',
               help='Flavor with hw:mem_page_size set, used by the scenario '
                    'tests: vhost-user needs hugepage-backed guests.'),
]
