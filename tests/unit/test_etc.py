"""Files under etc/: generated samples up to date, snippets and the
systemd unit consistent with the code and with each other."""

import configparser
import filecmp
import glob
import os
import shlex

import fixtures
from oslo_config import generator

from cinder_spdk_vhost import opts as cinder_opts
from nova_vhost_user import opts as nova_opts
from os_brick_connector import opts as connector_opts
from tests import base

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
ETC = os.path.join(ROOT, 'etc')


def _ini(path, strict=True):
    parser = configparser.ConfigParser(interpolation=None, strict=strict)
    parser.optionxform = str
    if not parser.read(path):
        raise FileNotFoundError(path)
    return parser


def _own(parser, section):
    defaults = parser.defaults()
    return {k for k in parser[section] if k not in defaults}


def _names(*listers):
    return {opt.name for lister in listers
            for _, group in lister.list_opts() for opt in group}


class SampleConfigTest(base.TestCase):

    def test_samples_are_up_to_date(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        configs = sorted(glob.glob(os.path.join(ROOT, 'tools', 'config',
                                                '*.conf')))
        self.assertEqual(3, len(configs))
        for config in configs:
            committed = os.path.join(
                ETC, 'spdk-vhost', _ini(config)['DEFAULT']['output_file']
                .split('/')[-1])
            fresh = os.path.join(tmp, os.path.basename(committed))
            generator.main(['--config-file', config, '--output-file', fresh])
            self.assertTrue(
                filecmp.cmp(committed, fresh, shallow=False),
                '%s is stale: run make genconfig' % committed)


class SnippetTest(base.TestCase):

    def test_cinder_snippet_uses_real_options(self):
        conf = _ini(os.path.join(ETC, 'spdk-vhost', 'cinder-backend.conf'))
        backend = conf['DEFAULT']['enabled_backends']
        self.assertEqual('cinder_spdk_vhost.driver.SpdkVhostDriver',
                         conf[backend]['volume_driver'])
        known = _names(cinder_opts) | {'volume_driver',
                                       'volume_backend_name'}
        self.assertLessEqual(_own(conf, backend), known)

    def test_nova_snippet_uses_real_options(self):
        conf = _ini(os.path.join(ETC, 'spdk-vhost', 'nova-compute.conf'))
        self.assertEqual('nova_vhost_user.driver.LibvirtVhostUserDriver',
                         conf['DEFAULT']['compute_driver'])
        self.assertLessEqual(_own(conf, 'spdk_vhost'),
                             _names(connector_opts, nova_opts))
        self.assertIn('NUMATopologyFilter',
                      conf['filter_scheduler']['enabled_filters'])


class SystemdUnitTest(base.TestCase):

    def setUp(self):
        super().setUp()
        # systemd repeats keys (ExecStartPost): keep the last of each.
        self.unit = _ini(os.path.join(ETC, 'systemd', 'spdk-tgt.service'),
                         strict=False)['Service']

    def argument(self, flag):
        args = shlex.split(self.unit['ExecStart'])
        return args[args.index(flag) + 1]

    def test_saved_config_is_the_loaded_config(self):
        config = self.argument('--json')
        self.assertIn('save_config > %s.new && mv %s.new %s'
                      % (config, config, config), self.unit['ExecStop'])
        self.assertIn('--json-ignore-init-errors', self.unit['ExecStart'])

    def test_rpc_socket_matches_the_snippets(self):
        socket = self.argument('-r')
        self.assertIn('-s %s ' % socket, self.unit['ExecStop'])
        cinder = _ini(os.path.join(ETC, 'spdk-vhost', 'cinder-backend.conf'))
        nova = _ini(os.path.join(ETC, 'spdk-vhost', 'nova-compute.conf'))
        self.assertEqual(socket, cinder['spdk']['spdk_rpc_socket'])
        self.assertEqual(socket, nova['spdk_vhost']['spdk_rpc_socket'])

    def test_vhost_dir_is_made_by_tmpfiles_and_allowed_by_apparmor(self):
        vhost_dir = self.argument('-S')
        with open(os.path.join(ETC, 'tmpfiles.d', 'spdk-vhost.conf')) as f:
            lines = [line.split() for line in f
                     if line.strip() and not line.startswith('#')]
        self.assertIn(['d', vhost_dir, '2770', 'root', 'spdk', '-'], lines)
        with open(os.path.join(ETC, 'apparmor.d', 'local', 'abstractions',
                               'libvirt-qemu')) as f:
            self.assertIn('%s/* rw,' % vhost_dir, f.read())
