"""The install guide's configs are the ones the deployment runs with.

The guide includes ``etc/spdk-vhost/cinder-controller.conf`` (a
controller's cinder.conf: a cluster member reaching three storage nodes
through their agents) and ``etc/spdk-vhost/agent.conf`` (a storage
node's agent). The clustered deployment, which has the same layout,
writes its own: each sets the same options as the snippet, but for the
tunings below, so an option the tests need is one the guide gives.
"""

import configparser
import os

from tests.deployment import base

ETC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'etc', 'spdk-vhost')
#: What the deployment sets beyond the snippets, for a loaded 2-core
#: machine and tests that cannot wait a minute: section -> options.
TUNINGS = {
    'backend': {'spdk_rpc_timeout', 'spdk_sweep_interval'},
    'replica': {'spdk_rpc_timeout'},
    'agent DEFAULT': {'debug'},
}


def _ini(path):
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str
    if not parser.read(path):
        raise FileNotFoundError(path)
    return parser


def _options(parser, section):
    """The options set in ``section`` itself (not inherited)."""
    if section == 'DEFAULT':
        return set(parser.defaults())
    return set(parser[section]) - set(parser.defaults())


class TestInstallGuide(base.DeploymentTestCase):

    CLUSTERED = True

    def test_controller_conf_sets_what_the_guide_does(self):
        guide = _ini(os.path.join(ETC, 'cinder-controller.conf'))
        ours = _ini(self.deployment.conf_path)
        self.assertLessEqual(_options(guide, 'DEFAULT'),
                             _options(ours, 'DEFAULT'))
        self.assertEqual(_options(guide, 'coordination'),
                         _options(ours, 'coordination'))
        backend = guide['DEFAULT']['enabled_backends']
        self.assertEqual(backend, ours['DEFAULT']['enabled_backends'])
        self.assertEqual(_options(guide, backend),
                         _options(ours, backend) - TUNINGS['backend'])
        replicas = [_targets(conf, backend) for conf in (guide, ours)]
        self.assertEqual(len(replicas[0]), len(replicas[1]))
        for theirs, mine in zip(*replicas):
            self.assertEqual(_options(guide, theirs),
                             _options(ours, mine) - TUNINGS['replica'])
        for option in ('volume_driver', 'spdk_saved_config',
                       'spdk_nvmf_auth'):
            self.assertEqual(guide[backend][option], ours[backend][option])

    def test_agent_conf_sets_what_the_guide_does(self):
        guide = _ini(os.path.join(ETC, 'agent.conf'))
        ours = _ini(self.deployment.agent.conf_path)
        self.assertEqual(_options(guide, 'agent'), _options(ours, 'agent'))
        self.assertEqual(_options(guide, 'DEFAULT'),
                         _options(ours, 'DEFAULT') - TUNINGS['agent DEFAULT'])


def _targets(conf, backend):
    return [name.strip() for name in
            conf[backend]['spdk_replica_targets'].split(',')]
