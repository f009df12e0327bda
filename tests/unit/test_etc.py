"""Files under etc/: generated samples up to date, snippets and the
systemd unit consistent with the code and with each other."""

import filecmp
import glob
import os
import shlex
import subprocess

import fixtures
from oslo_config import generator

from cinder_spdk_vhost import opts as cinder_opts
from nova_vhost_user import opts as nova_opts
from os_brick_connector import opts as connector_opts
from tests import base
from tests import ini

ROOT = ini.ROOT
ETC = os.path.join(ROOT, 'etc')


def _names(*listers):
    return {opt.name for lister in listers
            for _, group in lister.list_opts() for opt in group}


def _setup_cfg():
    with open(os.path.join(ROOT, 'setup.cfg')) as f:
        return f.read()


class SampleConfigTest(base.TestCase):

    def test_samples_are_up_to_date(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        configs = sorted(glob.glob(os.path.join(ROOT, 'tools', 'config',
                                                '*.conf')))
        # One generator config per package listing options in setup.cfg.
        namespaces = {ini.read(c)['DEFAULT']['namespace'] for c in configs}
        listed = ini.read(os.path.join(ROOT, 'setup.cfg'))['entry_points'][
            'oslo.config.opts']
        self.assertEqual({line.split('=')[0].strip()
                          for line in listed.splitlines() if line},
                         namespaces)
        for config in configs:
            committed = os.path.join(
                ini.SNIPPETS, ini.read(config)['DEFAULT']['output_file']
                .split('/')[-1])
            fresh = os.path.join(tmp, os.path.basename(committed))
            generator.main(['--config-file', config, '--output-file', fresh])
            self.assertTrue(
                filecmp.cmp(committed, fresh, shallow=False),
                '%s is stale: run make genconfig' % committed)


class SnippetTest(base.TestCase):

    def test_cinder_snippets_use_real_options(self):
        """The hyperconverged host's, and a controller's with its peers."""
        known = _names(cinder_opts) | {'volume_driver',
                                       'volume_backend_name',
                                       'backup_use_temp_snapshot',
                                       'max_over_subscription_ratio'}
        for snippet in ('cinder-backend.conf', 'cinder-controller.conf'):
            conf = ini.read(os.path.join(ini.SNIPPETS, snippet))
            backend = conf['DEFAULT']['enabled_backends']
            self.assertEqual('cinder_spdk_vhost.driver.SpdkVhostDriver',
                             conf[backend]['volume_driver'])
            peers = [name.strip() for name in conf[backend].get(
                'spdk_replica_targets', '').split(',') if name.strip()]
            for section in [backend] + peers:
                self.assertLessEqual(ini.own_options(conf, section), known,
                                     snippet)

    def test_nova_snippet_uses_real_options(self):
        conf = ini.read(os.path.join(ini.SNIPPETS, 'nova-compute.conf'))
        self.assertEqual('spdk_vhost.LibvirtVhostUserDriver',
                         conf['DEFAULT']['compute_driver'])
        self.assertLessEqual(ini.own_options(conf, 'spdk_vhost'),
                             _names(connector_opts, nova_opts))
        self.assertIn('NUMATopologyFilter',
                      conf['filter_scheduler']['enabled_filters'])


# Each unit, the SPDK application it runs (a binary tools/build-spdk.sh
# builds in build/bin) and whether it runs in interrupt mode.
UNITS = {
    'spdk-tgt.service': ('spdk_tgt', False),    # hyperconverged
    'spdk-vhost.service': ('vhost', False),     # compute: remote attach
    'spdk-nvmf.service': ('nvmf_tgt', True),    # storage
}
# Units running this project's commands, not an SPDK application.
COMMAND_UNITS = {'spdk-vhost-replicas-watch.service': 'spdk-vhost-replicas',
                 'spdk-vhost-agent.service': 'spdk-vhost-agent'}
# The options each application accepts (its --help, SPDK v26.05) that a
# unit may use: -S (vhost socket directory) only where vhost is built in.
COMMON_FLAGS = {'-m': True, '-r': True, '-s': True, '--json': True,
                '--json-ignore-init-errors': False,
                '--interrupt-mode': False,
                '--disable-cpumask-locks': False}
APP_FLAGS = {
    'spdk_tgt': dict(COMMON_FLAGS, **{'-S': True}),
    'vhost': dict(COMMON_FLAGS, **{'-S': True}),
    'nvmf_tgt': dict(COMMON_FLAGS),
}


def _unit_lines(path):
    """(section, key, value) of a unit file, repeated keys kept in order."""
    section, lines = None, []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            if line.startswith('['):
                section = line.strip('[]')
            else:
                key, value = line.split('=', 1)
                lines.append((section, key, value))
    return lines


def _exec_start(path):
    """The application run by a unit's ExecStart, and its arguments."""
    [cmd] = [v for s, k, v in _unit_lines(path) if k == 'ExecStart']
    args = shlex.split(cmd)
    [binary] = [a for a in args if a.startswith('${SPDK_DIR}/build/bin/')]
    return binary.rsplit('/', 1)[1], args[args.index(binary) + 1:]


def _flags(args):
    """{flag: value or None} of an SPDK command line; fails on strays."""
    flags, i = {}, 0
    while i < len(args):
        flag = args[i]
        if flag not in COMMON_FLAGS and flag != '-S':
            raise AssertionError('unexpected argument %r' % flag)
        takes_value = APP_FLAGS['spdk_tgt'][flag]
        flags[flag] = args[i + 1] if takes_value else None
        i += 2 if takes_value else 1
    return flags


class SystemdUnitTest(base.TestCase):
    """Every unit: its application, flags, sockets and saved config.

    The sockets, the config file and the save on stop are the same in
    every unit and in the snippets.
    """

    UNIT = 'spdk-tgt.service'

    def setUp(self):
        super().setUp()
        # systemd repeats keys (ExecStartPost): keep the last of each.
        self.unit = self.unit_section(self.UNIT)

    @staticmethod
    def unit_path(name):
        return os.path.join(ETC, 'systemd', name)

    def unit_section(self, name):
        return ini.read(self.unit_path(name), strict=False)['Service']

    def argument(self, flag, name=None):
        _, args = _exec_start(self.unit_path(name or self.UNIT))
        return args[args.index(flag) + 1]

    def test_every_unit_is_known(self):
        units = sorted(os.path.basename(p) for p in glob.glob(
            os.path.join(ETC, 'systemd', '*.service')))
        self.assertEqual(sorted(list(UNITS) + list(COMMAND_UNITS)), units)

    def test_watcher_unit_runs_the_watch_command(self):
        from nova_vhost_user import replicas_cmd
        name = 'spdk-vhost-replicas-watch.service'
        [cmd] = [v for _s, k, v in _unit_lines(self.unit_path(name))
                 if k == 'ExecStart']
        args = shlex.split(cmd)
        self.assertEqual(COMMAND_UNITS[name], os.path.basename(args[0]))
        self.assertIn('%s = ' % COMMAND_UNITS[name], _setup_cfg())
        # The console script runs the module parsed below.
        self.assertIn('%s = %s:main' % (COMMAND_UNITS[name],
                                        replicas_cmd.__name__), _setup_cfg())
        parsed = replicas_cmd.parse_args(args[1:])
        self.assertEqual(('watch', ['/etc/nova/nova.conf'], 10.0),
                         (parsed.command, parsed.config_file,
                          parsed.interval))

    def test_agent_unit_runs_the_agent_on_the_sample_config(self):
        from spdk_vhost_agent import cmd
        from spdk_vhost_agent import options
        name = 'spdk-vhost-agent.service'
        [exec_start] = [v for _s, k, v in _unit_lines(self.unit_path(name))
                        if k == 'ExecStart']
        args = shlex.split(exec_start)
        self.assertEqual(COMMAND_UNITS[name], os.path.basename(args[0]))
        self.assertIn('%s = ' % COMMAND_UNITS[name], _setup_cfg())
        self.assertEqual(['--config-file', cmd.DEFAULT_CONFIG], args[1:])
        sample = ini.read(os.path.join(ini.SNIPPETS, 'agent.conf'))
        known = {opt.name for opt in options.agent_opts}
        self.assertLessEqual(set(sample['agent']) - set(sample.defaults()),
                             known)
        self.assertEqual(self.argument('--json', 'spdk-nvmf.service'),
                         sample['agent']['saved_config'])
        self.assertEqual(self.argument('-r', 'spdk-nvmf.service'),
                         sample['agent']['spdk_rpc_socket'])

    def test_each_unit_runs_its_application(self):
        from testbed import spdk_build
        for name, (app, interrupt) in UNITS.items():
            ran, args = _exec_start(self.unit_path(name))
            self.assertEqual(app, ran, name)
            self.assertIn(app, spdk_build.APPS)
            self.assertEqual(interrupt, '--interrupt-mode' in args, name)

    def test_flags_are_valid_for_the_application(self):
        for name, (app, _) in UNITS.items():
            _, args = _exec_start(self.unit_path(name))
            flags = _flags(args)
            self.assertLessEqual(set(flags), set(APP_FLAGS[app]), name)
            # A vhost application without -S puts its sockets in its cwd.
            self.assertEqual(app != 'nvmf_tgt', '-S' in flags, name)

    def test_flags_are_in_the_built_applications_help(self):
        # Only where a built tree is given: a unit test never builds SPDK.
        tree = os.environ.get('SPDK_DIR')
        if not tree:
            self.skipTest('SPDK_DIR (a tree tools/build-spdk.sh built) '
                          'is not set')
        from testbed import spdk_build
        for name, (app, _) in UNITS.items():
            path = spdk_build.app_path(app, tree)
            self.assertTrue(os.access(path, os.X_OK), path)
            out = subprocess.run([path, '--help'], capture_output=True,
                                 text=True, timeout=30,
                                 env=spdk_build.app_env(tree))
            usage = out.stdout + out.stderr
            for flag in _flags(_exec_start(self.unit_path(name))[1]):
                self.assertIn(' %s' % flag, usage, '%s: %s' % (name, flag))

    def test_units_share_sockets_config_and_save_on_stop(self):
        shared = {}
        for name in UNITS:
            lines = _unit_lines(self.unit_path(name))
            shared[name] = [
                (s, k, v) for s, k, v in lines
                if k in ('ExecStartPost', 'ExecStop', 'Restart',
                         'RestartSec', 'TimeoutStartSec', 'LimitMEMLOCK',
                         'LimitNOFILE', 'Requires', 'Environment',
                         'WantedBy', 'UMask')
                # Only the units with vhost sockets name QEMU's group.
                and not v.startswith('QEMU_GROUP=')]
            self.assertEqual(self.argument('-r'), self.argument('-r', name))
            self.assertEqual(self.argument('--json'),
                             self.argument('--json', name))
        self.assertEqual(1, len({tuple(v) for v in shared.values()}),
                         'the units differ in what they share')

    def test_nova_reserves_what_compute_targets_hold(self):
        nova = ini.read(os.path.join(ini.SNIPPETS, 'nova-compute.conf'))
        reserved = dict(item.split(':') for item in
                        nova['DEFAULT']['reserved_huge_pages'].split(','))
        for name in ('spdk-vhost.service', 'spdk-tgt.service'):
            flags = _flags(_exec_start(self.unit_path(name))[1])
            self.assertEqual('${SPDK_MEM_MB}', flags['-s'], name)
            mem_mb = int(self.environment(name)['SPDK_MEM_MB'])
            self.assertEqual(mem_mb * 1024,
                             int(reserved['size']) * int(reserved['count']),
                             name)

    def test_one_target_per_host(self):
        for name in UNITS:
            unit = ini.read(self.unit_path(name), strict=False)['Unit']
            others = set(UNITS) - {name}
            self.assertEqual(others, set(unit['Conflicts'].split()), name)

    def test_saved_config_is_the_loaded_config(self):
        from spdk_vhost_core import save_cmd
        self.assertIn('spdk-vhost-save-config = %s:main' % save_cmd.__name__,
                      _setup_cfg())
        for name in UNITS:
            stop = shlex.split(self.unit_section(name)['ExecStop'])
            self.assertEqual('spdk-vhost-save-config',
                             os.path.basename(stop[0]), name)
            parsed = save_cmd.parse_args(stop[1:])
            self.assertEqual(
                (self.argument('-r', name), self.argument('--json', name)),
                (parsed.rpc_socket, parsed.saved_config), name)
        self.assertIn('--json-ignore-init-errors', self.unit['ExecStart'])

    def test_rpc_socket_matches_the_snippets(self):
        socket = self.argument('-r')
        cinder = ini.read(os.path.join(ini.SNIPPETS, 'cinder-backend.conf'))
        nova = ini.read(os.path.join(ini.SNIPPETS, 'nova-compute.conf'))
        self.assertEqual(socket, cinder['spdk']['spdk_rpc_socket'])
        self.assertEqual(socket, nova['spdk_vhost']['spdk_rpc_socket'])

    def test_saved_config_is_the_drivers_default(self):
        # On by default, in the file the units start the target with.
        from spdk_vhost_core import options
        for name in UNITS:
            self.assertEqual(options.SAVED_CONFIG,
                             self.argument('--json', name), name)
        [opt] = [o for o in options.rpc_opts
                 if o.name == 'spdk_saved_config']
        self.assertEqual(options.SAVED_CONFIG, opt.default)

    def environment(self, name):
        return dict(value.split('=', 1) for _s, key, value
                    in _unit_lines(self.unit_path(name))
                    if key == 'Environment')

    def install_dirs(self, name):
        """{directory: (mode, group)} of the unit's ``install -d`` lines."""
        environment = self.environment(name)
        dirs = {}
        for _s, key, value in _unit_lines(self.unit_path(name)):
            words = value.split()
            if key != 'ExecStartPre' or words[:2] != [
                    '/usr/bin/install', '-d']:
                continue
            group = words[words.index('-g') + 1]
            if group.startswith('${'):
                group = environment[group[2:-1]]
            dirs[words[-1]] = (words[words.index('-m') + 1], group)
        return dirs

    def test_sockets_are_born_for_qemu_after_any_restart(self):
        # The target (re)makes every vhost socket itself: its umask and
        # the setgid directory's group are all the access QEMU gets back.
        # The state directory is the services' (spdk): QEMU, not in it,
        # only passes through.
        from testbed import spdk_target
        made = self.tmpfiles()
        for name in UNITS:
            self.assertEqual('%04o' % spdk_target.SERVICE_UMASK,
                             self.unit_section(name)['UMask'], name)
            state = os.path.dirname(self.argument('--json', name))
            self.assertEqual(('2771', 'spdk'), made[state])
            self.assertEqual(made[state], self.install_dirs(name)[state])

    @staticmethod
    def tmpfiles():
        """{directory: (mode, group)} of etc/tmpfiles.d's lines."""
        with open(os.path.join(ETC, 'tmpfiles.d', 'spdk-vhost.conf')) as f:
            lines = [line.split() for line in f
                     if line.strip() and not line.startswith('#')]
        return {path: (mode, group)
                for _d, path, mode, _u, group, _a in lines}

    def test_vhost_sockets_are_qemus_group_and_the_rpc_socket_is_not(self):
        made = self.tmpfiles()
        nova = ini.read(os.path.join(ini.SNIPPETS, 'nova-compute.conf'))
        qemu_group = nova['spdk_vhost']['vhost_socket_group']
        self.assertNotEqual('spdk', qemu_group)
        with open(os.path.join(ETC, 'apparmor.d', 'local', 'abstractions',
                               'libvirt-qemu')) as f:
            apparmor = f.read()
        for name in ('spdk-tgt.service', 'spdk-vhost.service'):
            vhost_dir = self.argument('-S', name)
            self.assertEqual(('2770', qemu_group), made[vhost_dir], name)
            self.assertEqual(made[vhost_dir],
                             self.install_dirs(name)[vhost_dir], name)
            self.assertIn('%s/* rw,' % vhost_dir, apparmor)
        for name in UNITS:
            post = [value for _s, key, value
                    in _unit_lines(self.unit_path(name))
                    if key == 'ExecStartPost']
            self.assertIn('/bin/chgrp spdk %s' % self.argument('-r', name),
                          post, name)
