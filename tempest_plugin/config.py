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
    cfg.StrOpt('guest_access',
               default='ssh',
               choices=[('ssh', 'Log in to the guest over SSH (needs a '
                                'guest network, a keypair and a floating '
                                'or fixed IP reachable from tempest); '
                                'any Linux image.'),
                        ('console', 'Read the guest\'s serial console '
                                    'through Nova\'s console-output API; '
                                    'no guest network. The image must '
                                    'run the project\'s test guest in '
                                    'report mode.')],
               help='How the scenario tests see the disks inside the '
                    'guest.'),
    cfg.StrOpt('backend_name',
               default='spdk',
               help='volume_backend_name of the spdk_vhost backend; the '
                    'tests create their own volume types on it.'),
    cfg.StrOpt('spdk_rpc_socket',
               help='JSON-RPC socket of the SPDK target behind the '
                    'backend, when tempest runs on that host (all-in-one). '
                    'Set, the tests also check the QoS limits SPDK '
                    'enforces, not only what the API reports.'),
]
