"""The install guide's configs are the ones the deployment runs with.

The guide includes ``etc/spdk-vhost/cinder-controller.conf`` (a
controller's cinder.conf: a cluster member reaching three storage nodes
through their agents), ``etc/spdk-vhost/agent.conf`` (a storage node's
agent) and ``etc/spdk-vhost/nova-compute.conf`` (a compute node's
nova.conf). The clustered deployment, which has the same layout, writes
its own: each sets the same options as the snippet, but for the tunings
below, so an option the tests need is one the guide gives.
"""

import os

from tests.deployment import base
from tests.deployment import compute_node
from tests.deployment import nova_base
from tests import ini

#: What the deployment sets beyond the snippets, for a loaded 2-core
#: machine and tests that cannot wait a minute: section -> options.
TUNINGS = {
    'backend': {'spdk_rpc_timeout', 'spdk_sweep_interval'},
    'replica': {'spdk_rpc_timeout'},
    'agent DEFAULT': {'debug'},
    # Every test host shares this machine's host name and machine-id,
    # from which a real host's defaults come; and two cores, which the
    # guests share with the reactors (so the overlap check is off).
    'compute spdk_vhost': {'target_id', 'host_nqn',
                           'nova_check_reactor_overlap'},
}
#: What the guide sets that the deployment cannot: section -> options.
#: Two cores leave none to keep guests off the reactors' core; the
#: pools are small sparse files that tempest over-subscribes.
NOT_HERE = {'compute': {'cpu_shared_set'},
            'backend': {'max_over_subscription_ratio'}}


class TestInstallGuide(base.DeploymentTestCase):

    CLUSTERED = True

    def test_controller_conf_sets_what_the_guide_does(self):
        guide = ini.read(os.path.join(ini.SNIPPETS, 'cinder-controller.conf'))
        ours = ini.read(self.deployment.conf_path)
        self.assertLessEqual(ini.own_options(guide, 'DEFAULT'),
                             ini.own_options(ours, 'DEFAULT'))
        self.assertEqual(ini.own_options(guide, 'coordination'),
                         ini.own_options(ours, 'coordination'))
        backend = guide['DEFAULT']['enabled_backends']
        self.assertEqual(backend, ours['DEFAULT']['enabled_backends'])
        self.assertEqual(
            ini.own_options(guide, backend) - NOT_HERE['backend'],
            ini.own_options(ours, backend) - TUNINGS['backend'])
        replicas = [_targets(conf, backend) for conf in (guide, ours)]
        self.assertEqual(len(replicas[0]), len(replicas[1]))
        for theirs, mine in zip(*replicas):
            self.assertEqual(ini.own_options(guide, theirs),
                             ini.own_options(ours, mine) - TUNINGS['replica'])
        for option in ('volume_driver', 'spdk_saved_config',
                       'spdk_nvmf_auth'):
            self.assertEqual(guide[backend][option], ours[backend][option])

    def test_agent_conf_sets_what_the_guide_does(self):
        guide = ini.read(os.path.join(ini.SNIPPETS, 'agent.conf'))
        ours = ini.read(self.deployment.agent.conf_path)
        self.assertEqual(ini.own_options(guide, 'agent'),
                         ini.own_options(ours, 'agent'))
        self.assertEqual(
            ini.own_options(guide, 'DEFAULT'),
            ini.own_options(ours, 'DEFAULT') - TUNINGS['agent DEFAULT'])

    def test_compute_conf_sets_what_the_guide_does(self):
        guide = ini.read(os.path.join(ini.SNIPPETS, 'nova-compute.conf'))
        node = nova_base.shared_cloud(self.deployment).node
        ours = ini.read(node.host.path(compute_node.NOVA_CONF))
        for section in ['DEFAULT'] + guide.sections():
            self.assertLessEqual(
                ini.own_options(guide, section) - NOT_HERE.get(section, set()),
                ini.own_options(ours, section), section)
        self.assertEqual(
            ini.own_options(guide, 'spdk_vhost'),
            ini.own_options(ours, 'spdk_vhost')
            - TUNINGS['compute spdk_vhost'])
        for section, option in (('DEFAULT', 'compute_driver'),
                                ('filter_scheduler', 'enabled_filters'),
                                ('spdk_vhost', 'numa_policy'),
                                ('spdk_vhost', 'guest_memory_source'),
                                ('spdk_vhost', 'vhost_socket_group'),
                                ('spdk_vhost', 'vhost_socket_mode')):
            self.assertEqual(guide[section][option], ours[section][option])


def _targets(conf, backend):
    return [name.strip() for name in
            conf[backend]['spdk_replica_targets'].split(',')]
