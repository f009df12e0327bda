"""The devstack plugin, run phase by phase over stubbed devstack functions.

devstack itself is not installed here: tests/unit/devstack/stubs.sh
replaces its functions (iniset writes real ini files; services, packages
and API calls are recorded), and run.sh drives the phases as stack.sh,
unstack.sh and clean.sh would.
"""

import configparser
import grp
import json
import os
import stat
import subprocess
import sys

import fixtures

from cinder_spdk_vhost import opts as cinder_opts
from nova_vhost_user import opts as nova_opts
from os_brick_connector import opts as connector_opts
from tests import base

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RUN = os.path.join(HERE, 'devstack', 'run.sh')
STACK = ['pre-install', 'cinder', 'install', 'post-config', 'extra',
         'test-config']


class PluginTestBase(base.TestCase):
    """Runs the plugin over the stubs; checks what it wrote and called."""

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.log = self.path('calls.log')
        self.spdk_dir = self.path('spdk')
        self.env = {
            'PATH': os.environ['PATH'],
            'STUB_LOG': self.log,
            'STUB_PYTHON': sys.executable,
            'PLUGIN_DIR': ROOT,
            'DEST': self.tmp,
            'DATA_DIR': self.path('data'),
            'STACK_USER': 'stack',
            'SERVICE_HOST': '192.0.2.10',
            'CINDER_CONF': self.path('cinder.conf'),
            'NOVA_CONF': self.path('nova.conf'),
            'NOVA_CPU_CONF': self.path('nova-cpu.conf'),
            'NOVA_CONF_DIR': self.tmp,
            'NOVA_BIN_DIR': self.path('bin'),
            'TEMPEST_CONFIG': self.path('tempest.conf'),
            'SYSTEMD_DIR': self.path('systemd'),
            'SYSTEMCTL': 'systemctl',
            'ENABLED_SERVICES': 'c-api,c-vol,n-api,n-cpu,tempest',
            'SPDK_GROUP': grp.getgrgid(os.getgid()).gr_name,
            'SPDK_QEMU_GROUP': 'nogroup',
            'SPDK_DIR': self.spdk_dir,
            'SPDK_TARGET_ID': 'aio-host',
            'SPDK_BUILD_SCRIPT': self.path('build-spdk.sh'),
        }
        os.makedirs(os.path.join(self.tmp, 'rootwrap.d'))
        with open(self.env['NOVA_CONF'], 'w') as conf:
            conf.write('[filter_scheduler]\n'
                       'enabled_filters = ComputeFilter,ImagePropertiesFilter'
                       '\n')

    def path(self, name):
        return os.path.join(self.tmp, name)

    def stub(self, function, *args, **env):
        """Run a function of stubs.sh, e.g. to make a fake SPDK tree."""
        subprocess.run(['bash', '-c', 'source "$0"; "$@"',
                        os.path.join(HERE, 'devstack', 'stubs.sh'),
                        function] + list(args),
                       env=dict(self.env, **env), check=True)

    def prebuilt_spdk(self):
        self.stub('make_fake_spdk', self.spdk_dir)

    def run_plugin(self, *steps, check=True, **env):
        result = subprocess.run(['bash', RUN] + list(steps),
                                env=dict(self.env, **env),
                                capture_output=True, text=True, timeout=60)
        if check:
            self.assertEqual(0, result.returncode, result.stderr)
        return result

    def calls(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as log:
            return log.read().splitlines()

    def assertCalled(self, fragment):
        matches = [c for c in self.calls() if fragment in c]
        self.assertTrue(matches, '%r not in calls:\n%s' % (
            fragment, '\n'.join(self.calls())))
        return matches

    def assertNotCalled(self, fragment):
        self.assertEqual([], [c for c in self.calls() if fragment in c])

    def index(self, fragment):
        for i, call in enumerate(self.calls()):
            if fragment in call:
                return i
        self.fail('%r not called' % fragment)

    @staticmethod
    def section(parser, name):
        """A section's own options (configparser adds DEFAULT's)."""
        defaults = parser.defaults()
        return {k: v for k, v in parser[name].items() if k not in defaults}

    def ini(self, name):
        parser = configparser.ConfigParser(interpolation=None)
        parser.optionxform = str
        self.assertTrue(parser.read(self.env[name]), name)
        return parser

    def build_script(self):
        """A fake tools/build-spdk.sh; returns where it puts its trees."""
        builds = self.path('builds')
        self.stub('make_fake_build_script', self.env['SPDK_BUILD_SCRIPT'],
                  FAKE_SPDK_BUILDS=builds)
        return builds


class DevstackPluginTest(PluginTestBase):

    def test_cinder_backend_written_by_lib_cinder_hook(self):
        self.prebuilt_spdk()
        self.run_plugin('cinder')
        conf = self.ini('CINDER_CONF')
        self.assertEqual({
            'volume_backend_name': 'spdk',
            'volume_driver': 'cinder_spdk_vhost.driver.SpdkVhostDriver',
            'spdk_rpc_socket': '/var/tmp/spdk.sock',
            'spdk_lvstores': 'lvs0',
            'spdk_dd_path': os.path.join(self.spdk_dir, 'build', 'bin',
                                         'spdk_dd'),
            'spdk_thin_provision': 'True',
            'spdk_nvmf_address': '192.0.2.10',
            'spdk_target_id': 'aio-host',
            'spdk_saved_config': self.saved_config(),
        }, self.section(conf, 'spdk'))

    def saved_config(self):
        """The file the target loads, which both drivers keep saved."""
        return os.path.join(self.env['DATA_DIR'], 'spdk', 'spdk_tgt.json')

    def test_local_conf_backend_list_is_kept(self):
        self.prebuilt_spdk()
        self.run_plugin('cinder',
                        CINDER_ENABLED_BACKENDS='lvm:lvmdriver-1,'
                                                'spdk_vhost:fast')
        conf = self.ini('CINDER_CONF')
        self.assertEqual(['fast'], conf.sections())

    def test_prebuilt_spdk_is_not_rebuilt(self):
        self.prebuilt_spdk()
        self.run_plugin('pre-install')
        self.assertNotCalled('build-spdk.sh')
        self.assertNotCalled('install_package')
        self.assertCalled('scripts/setup.sh HUGEMEM=4096 PCI_ALLOWED=none')
        self.assertCalled('groupadd --system')
        self.assertCalled('usermod -a -G %s stack' % self.env['SPDK_GROUP'])

    def test_spdk_is_built_by_the_project_script(self):
        builds = self.build_script()
        self.run_plugin('pre-install', SPDK_SOURCES='/srv/spdk-tarballs')
        self.assertCalled('build-spdk.sh 26.05 '
                          'SPDK_SOURCES=/srv/spdk-tarballs')
        self.assertEqual(os.path.join(builds, 'spdk-v26.05'),
                         os.readlink(self.spdk_dir))
        self.assertLess(self.index('install_package'),
                        self.index('build-spdk.sh'))
        self.assertLess(self.index('build-spdk.sh'), self.index('setup.sh'))

    def test_build_packages_come_from_bindep(self):
        self.build_script()
        self.run_plugin('pre-install')
        [call] = self.assertCalled('install_package')
        packages = call.split()[1:]
        self.assertIn('libdpdk-dev', packages)
        self.assertIn('libaio-dev', packages)
        # The "spdk" profile only: not the test suite's QEMU or kernel.
        self.assertNotIn('qemu-system-x86', packages)

    def test_a_built_tree_is_rebuilt_for_another_version(self):
        # A link left by an earlier stack is not a prebuilt tree: the
        # script (instant when cached) is asked for the wanted version.
        builds = self.build_script()
        self.run_plugin('pre-install')
        self.run_plugin('pre-install', SPDK_VERSION='26.01')
        self.assertCalled('build-spdk.sh 26.01 SPDK_SOURCES=')
        self.assertEqual(os.path.join(builds, 'spdk-v26.01'),
                         os.readlink(self.spdk_dir))

    def test_failed_build_stops_the_stack(self):
        with open(self.env['SPDK_BUILD_SCRIPT'], 'w') as script:
            script.write('#!/bin/sh\necho "build-spdk: error" >&2\nexit 1\n')
        os.chmod(self.env['SPDK_BUILD_SCRIPT'], 0o755)
        result = self.run_plugin('pre-install', check=False)
        self.assertNotEqual(0, result.returncode)
        self.assertIn('did not build SPDK v26.05', result.stderr)
        self.assertNotCalled('setup.sh')

    def test_phases_in_devstack_order(self):
        self.prebuilt_spdk()
        self.run_plugin(*STACK)
        order = [self.index(fragment) for fragment in (
            'scripts/setup.sh',
            'setup_develop %s' % ROOT,
            'run_process spdk-tgt',
            'rpc.py HUGEMEM= PCI_ALLOWED= -s /var/tmp/spdk.sock '
            'bdev_lvol_create_lvstore Malloc0 lvs0',
            'restart_service libvirtd',
            'openstack --os-volume-api-version 3 volume type create',
            'openstack flavor create')]
        self.assertEqual(sorted(order), order)

    def test_target_service_command_and_json_config(self):
        self.prebuilt_spdk()
        self.run_plugin('pre-install', 'install', 'post-config',
                        SPDK_REACTOR_MASK='0x6')
        data = self.env['DATA_DIR']
        config = os.path.join(data, 'spdk', 'spdk_tgt.json')
        [call] = self.assertCalled('run_process spdk-tgt')
        # systemd expands SPDK_DIR: the unit's drop-in sets it, and
        # spdk-vhost-upgrade's drop-in changes it.
        self.assertEqual(
            'run_process spdk-tgt /usr/bin/env '
            'LD_LIBRARY_PATH=${SPDK_DIR}/build/lib '
            '${SPDK_DIR}/build/bin/spdk_tgt -m 0x6 -s 1024 '
            '-r /var/tmp/spdk.sock -S %s/spdk/vhost --json %s '
            '--json-ignore-init-errors  root' % (data, config),
            call)
        self.assertEqual(self.spdk_dir, self.dropin()['Environment'].split(
            '=', 1)[1])
        with open(config) as f:
            saved = json.load(f)
        self.assertEqual([{'subsystem': 'bdev', 'config': [{
            'method': 'bdev_malloc_create',
            'params': {'name': 'Malloc0', 'num_blocks': 262144,
                       'block_size': 4096}}]}], saved['subsystems'])

    def test_storage_host_of_replicas_examines_its_base_bdev_only(self):
        self.prebuilt_spdk()
        self.run_plugin('pre-install', 'install', 'post-config',
                        SPDK_AUTO_EXAMINE='False', SPDK_BASE_BDEV='nvme',
                        SPDK_NVME_PCI_ADDR='0000:5e:00.0')
        config = os.path.join(self.env['DATA_DIR'], 'spdk', 'spdk_tgt.json')
        with open(config) as f:
            [bdev] = json.load(f)['subsystems']
        self.assertEqual(
            [('bdev_set_options', {'bdev_auto_examine': False}),
             ('bdev_examine', {'name': 'Nvme0n1'}),
             ('bdev_nvme_attach_controller', {
                 'name': 'Nvme0', 'trtype': 'PCIe',
                 'traddr': '0000:5e:00.0'})],
            [(entry['method'], entry['params'])
             for entry in bdev['config']])

    def dropin(self):
        """The [Service] section of the plugin's drop-in of the unit."""
        path = os.path.join(self.env['SYSTEMD_DIR'],
                            'devstack@spdk-tgt.service.d',
                            '10-spdk-vhost.conf')
        unit = configparser.ConfigParser(strict=False, interpolation=None)
        self.assertTrue(unit.read(path), path)
        return unit['Service']

    def test_service_saves_its_config_when_stopped(self):
        self.prebuilt_spdk()
        self.run_plugin('post-config')
        config = os.path.join(self.env['DATA_DIR'], 'spdk', 'spdk_tgt.json')
        self.assertEqual(
            '%s --rpc-socket /var/tmp/spdk.sock %s' % (os.path.join(
                self.env['NOVA_BIN_DIR'], 'spdk-vhost-save-config'), config),
            self.dropin()['ExecStop'])
        self.assertCalled('systemctl daemon-reload')
        # spdk-vhost-upgrade's drop-in sorts after it, so its SPDK_DIR
        # and empty ExecStop win during and after an upgrade.
        self.assertLess('10-spdk-vhost.conf', 'spdk-vhost-upgrade.conf')

    def test_upgrade_runs_the_command_through_the_unit(self):
        builds = self.build_script()
        self.run_plugin('pre-install', 'post-config')
        self.stub('make_fake_command', os.path.join(
            self.env['NOVA_BIN_DIR'], 'spdk-vhost-upgrade'))
        self.run_plugin('upgrade=26.05.1')
        tree = os.path.join(builds, 'spdk-v26.05.1')
        [call] = self.assertCalled('spdk-vhost-upgrade')
        config = os.path.join(self.env['DATA_DIR'], 'spdk', 'spdk_tgt.json')
        self.assertEqual(
            'sudo %s/spdk-vhost-upgrade --new-spdk-dir %s --systemd-unit '
            'devstack@spdk-tgt.service --systemd-dir %s --rpc-socket '
            '/var/tmp/spdk.sock --saved-config %s'
            % (self.env['NOVA_BIN_DIR'], tree, self.env['SYSTEMD_DIR'],
               config), call)
        self.assertEqual(tree, os.readlink(self.spdk_dir))

    def test_failed_upgrade_keeps_the_tree(self):
        builds = self.build_script()
        self.run_plugin('pre-install', 'post-config')
        self.stub('make_fake_command', os.path.join(
            self.env['NOVA_BIN_DIR'], 'spdk-vhost-upgrade'), '1')
        result = self.run_plugin('upgrade=26.05.1', check=False)
        self.assertNotEqual(0, result.returncode)
        self.assertIn('spdk-vhost-upgrade to SPDK v26.05.1 failed',
                      result.stderr)
        self.assertEqual(os.path.join(builds, 'spdk-v26.05'),
                         os.readlink(self.spdk_dir))

    def test_vhost_sockets_are_born_for_qemu(self):
        # As etc/systemd's units: a setgid socket directory and a umask
        # leaving the group read-write, so that the sockets a restarted
        # target makes again let QEMU (in SPDK_QEMU_GROUP) reconnect;
        # QEMU only passes through the state directory.
        self.prebuilt_spdk()
        self.run_plugin('post-config')
        self.assertEqual('0007', self.dropin()['UMask'])
        state_dir = os.path.join(self.env['DATA_DIR'], 'spdk')
        for path, mode, group in (
                (os.path.join(state_dir, 'vhost'), 0o2770, 'nogroup'),
                (state_dir, 0o2771, self.env['SPDK_GROUP'])):
            info = os.stat(path)
            self.assertEqual((mode, group), (
                stat.S_IMODE(info.st_mode),
                grp.getgrgid(info.st_gid).gr_name), path)

    def test_saved_config_is_not_overwritten(self):
        self.prebuilt_spdk()
        config = os.path.join(self.env['DATA_DIR'], 'spdk', 'spdk_tgt.json')
        os.makedirs(os.path.dirname(config))
        with open(config, 'w') as f:
            f.write('{"subsystems": ["saved"]}')
        self.run_plugin('post-config')
        with open(config) as f:
            self.assertEqual('{"subsystems": ["saved"]}', f.read())

    def test_existing_lvstore_is_reused(self):
        self.prebuilt_spdk()
        self.run_plugin('post-config', FAKE_LVSTORE_EXISTS='1')
        self.assertCalled('bdev_lvol_get_lvstores -l lvs0')
        self.assertNotCalled('bdev_lvol_create_lvstore')

    def test_nvme_base_bdev(self):
        self.prebuilt_spdk()
        self.run_plugin('pre-install', 'post-config', SPDK_BASE_BDEV='nvme',
                        SPDK_NVME_PCI_ADDR='0000:5e:00.0')
        self.assertCalled('setup.sh HUGEMEM=4096 PCI_ALLOWED=0000:5e:00.0')
        self.assertCalled('bdev_lvol_create_lvstore Nvme0n1 lvs0')
        config = os.path.join(self.env['DATA_DIR'], 'spdk', 'spdk_tgt.json')
        with open(config) as f:
            [entry] = json.load(f)['subsystems'][0]['config']
        self.assertEqual({'method': 'bdev_nvme_attach_controller',
                          'params': {'name': 'Nvme0', 'trtype': 'PCIe',
                                     'traddr': '0000:5e:00.0'}}, entry)

    def test_nvme_base_bdev_needs_an_address(self):
        self.prebuilt_spdk()
        result = self.run_plugin('post-config', check=False,
                                 SPDK_BASE_BDEV='nvme')
        self.assertNotEqual(0, result.returncode)
        self.assertIn('SPDK_NVME_PCI_ADDR', result.stderr)
        self.assertNotCalled('run_process')

    def test_aio_base_bdev_file_is_created(self):
        self.prebuilt_spdk()
        aio = self.path('aio.img')
        self.run_plugin('post-config', SPDK_BASE_BDEV='aio',
                        SPDK_AIO_FILE=aio, SPDK_AIO_SIZE='1M')
        self.assertEqual(1048576, os.path.getsize(aio))
        self.assertCalled('bdev_lvol_create_lvstore Aio0 lvs0')

    def test_unknown_base_bdev_is_refused(self):
        self.prebuilt_spdk()
        result = self.run_plugin('post-config', check=False,
                                 SPDK_BASE_BDEV='rbd')
        self.assertNotEqual(0, result.returncode)
        self.assertIn("not 'rbd'", result.stderr)

    def test_nova_settings(self):
        self.prebuilt_spdk()
        self.run_plugin('post-config')
        cpu = self.ini('NOVA_CPU_CONF')
        self.assertEqual('spdk_vhost.LibvirtVhostUserDriver',
                         cpu['DEFAULT']['compute_driver'])
        self.assertEqual({
            'spdk_rpc_socket': '/var/tmp/spdk.sock',
            'target_id': 'aio-host',
            'vhost_socket_group': 'nogroup',
            'vhost_socket_mode': '0660',
            'guest_memory_source': 'memfd',
            'spdk_saved_config': self.saved_config(),
        }, self.section(cpu, 'spdk_vhost'))
        self.assertEqual(
            'ComputeFilter,ImagePropertiesFilter,NUMATopologyFilter',
            self.ini('NOVA_CONF')['filter_scheduler']['enabled_filters'])
        self.assertTrue(os.path.exists(
            os.path.join(self.tmp, 'rootwrap.d', 'spdk-vhost.filters')))

    def test_written_options_exist(self):
        # A typo in the plugin would leave an option silently unused.
        self.prebuilt_spdk()
        self.run_plugin('cinder', 'post-config')
        known = {opt.name for _, group in cinder_opts.list_opts()
                 for opt in group} | {'volume_driver', 'volume_backend_name'}
        self.assertLessEqual(set(self.ini('CINDER_CONF')['spdk']), known)
        known = {opt.name for lister in (nova_opts, connector_opts)
                 for _, group in lister.list_opts() for opt in group}
        cpu = self.ini('NOVA_CPU_CONF')
        self.assertLessEqual(set(self.section(cpu, 'spdk_vhost')), known)

    def test_numa_filter_added_once(self):
        self.prebuilt_spdk()
        self.run_plugin('post-config')
        self.run_plugin('post-config')
        self.assertEqual(
            'ComputeFilter,ImagePropertiesFilter,NUMATopologyFilter',
            self.ini('NOVA_CONF')['filter_scheduler']['enabled_filters'])

    def test_storage_only_host_leaves_nova_alone(self):
        self.prebuilt_spdk()
        self.run_plugin('post-config', 'extra', ENABLED_SERVICES='c-api,c-vol')
        self.assertFalse(os.path.exists(self.env['NOVA_CPU_CONF']))
        self.assertNotCalled('restart_service libvirtd')
        self.assertNotCalled('openstack flavor')
        self.assertCalled('volume type create')

    def test_volume_type_qos_and_flavor(self):
        self.prebuilt_spdk()
        self.run_plugin('extra', SPDK_QOS_IOPS='5000')
        os3 = 'openstack --os-volume-api-version 3 volume '
        self.assertCalled(os3 + 'type create high-iops '
                          '--property volume_backend_name=spdk')
        self.assertCalled(os3 + 'qos create high-iops-qos --consumer '
                          'back-end --property total_iops_sec=5000 '
                          '--property total_bytes_sec=524288000')
        self.assertCalled(os3 + 'qos associate high-iops-qos high-iops')
        self.assertCalled('openstack flavor create m1.spdk --id '
                          'spdk-hugepages-1 --ram 512 --disk 1 --vcpus 1 '
                          '--property hw:mem_page_size=large')
        # nova-compute cannot load the driver; this command can.
        self.assertCalled('stop_process n-cpu')
        [start] = self.assertCalled('run_process n-cpu')
        self.assertIn('nova-compute-spdk-vhost --config-file', start)

    def test_tempest_options(self):
        self.prebuilt_spdk()
        self.run_plugin('test-config')
        self.assertEqual({
            'api_tests': 'True',
            'scenario_tests': 'True',
            'volume_type': 'high-iops',
            'backend_name': 'spdk',
            'hugepage_flavor': 'spdk-hugepages-1',
            'spdk_rpc_socket': '/var/tmp/spdk.sock',
        }, dict(self.ini('TEMPEST_CONFIG')['spdk_vhost']))

    def test_tempest_own_tests_options(self):
        # The manage references the deployment's tempest run proves.
        from tests.deployment import tempest_conf
        self.prebuilt_spdk()
        self.run_plugin('test-config')
        conf = self.ini('TEMPEST_CONFIG')
        self.assertEqual(tempest_conf.MANAGE_VOLUME_REF,
                         conf['volume']['manage_volume_ref'])
        self.assertEqual(tempest_conf.MANAGE_SNAPSHOT_REF,
                         conf['volume']['manage_snapshot_ref'])
        self.assertEqual('True', conf['volume-feature-enabled'][
            'manage_snapshot'])

    def test_defaults_enable_multiattach(self):
        # devstack then creates its multiattach type and tells tempest.
        script = os.path.join(ROOT, 'devstack', 'override-defaults')
        out = subprocess.run(
            ['bash', '-c', 'source "$1"; echo "$ENABLE_VOLUME_MULTIATTACH"',
             'x', script], env={'PATH': os.environ['PATH']},
            stdout=subprocess.PIPE, check=True, text=True).stdout
        self.assertEqual('True\n', out)

    def test_tempest_options_follow_the_plugin_options(self):
        # Every option test-config writes must exist in the plugin.
        from tempest_plugin import config as plugin_config
        self.prebuilt_spdk()
        self.run_plugin('test-config')
        names = {opt.name for opt in plugin_config.SpdkVhostGroup}
        written = set(self.ini('TEMPEST_CONFIG')['spdk_vhost'])
        self.assertEqual(set(), written - names)

    def test_unstack_stops_the_target(self):
        self.prebuilt_spdk()
        self.run_plugin('unstack')
        self.assertEqual(['stop_process spdk-tgt'], self.calls())

    def test_clean_removes_state_and_releases_devices(self):
        self.prebuilt_spdk()
        self.run_plugin('post-config', 'clean')
        self.assertFalse(os.path.exists(os.path.join(self.env['DATA_DIR'],
                                                     'spdk')))
        self.assertFalse(os.path.exists(os.path.join(
            self.env['SYSTEMD_DIR'], 'devstack@spdk-tgt.service.d')))
        self.assertCalled('setup.sh HUGEMEM= PCI_ALLOWED= reset')


class SpdkApplicationTest(PluginTestBase):
    """Which SPDK application runs the target, and in which mode."""

    STORAGE = 'c-api,c-vol'
    COMPUTE = 'n-cpu'

    def command(self, **env):
        """The target's command line once post-config has run."""
        self.prebuilt_spdk()
        result = self.run_plugin('post-config', **env)
        [call] = self.assertCalled('run_process spdk-tgt')
        return call.split(), result

    @staticmethod
    def app(args):
        """The binary of the command, under the unit's SPDK_DIR."""
        [binary] = [a for a in args if a.startswith('${SPDK_DIR}/build/bin')]
        return binary[len('${SPDK_DIR}/'):]

    def assertRefused(self, message, *steps, **env):
        self.prebuilt_spdk()
        result = self.run_plugin(*(steps or ('pre-install',)), check=False,
                                 **env)
        self.assertNotEqual(0, result.returncode)
        self.assertIn(message, result.stderr)
        self.assertNotCalled('setup.sh')
        self.assertNotCalled('run_process')
        return result

    def test_all_in_one_keeps_spdk_tgt_polling(self):
        args, result = self.command()
        self.assertEqual('build/bin/spdk_tgt', self.app(args))
        self.assertIn('-S', args)
        self.assertNotIn('--interrupt-mode', args)
        self.assertEqual('', result.stderr)

    def test_storage_host_runs_nvmf_tgt_in_interrupt_mode(self):
        args, _ = self.command(ENABLED_SERVICES=self.STORAGE,
                               SPDK_BASE_BDEV='aio',
                               SPDK_AIO_FILE=self.path('aio.img'),
                               SPDK_AIO_SIZE='1M')
        self.assertEqual('build/bin/nvmf_tgt', self.app(args))
        self.assertIn('--interrupt-mode', args)
        # nvmf_tgt has no vhost: no -S, no vhost socket directory.
        self.assertNotIn('-S', args)
        self.assertFalse(os.path.exists(os.path.join(
            self.env['DATA_DIR'], 'spdk', 'vhost')))

    def test_storage_host_on_malloc_polls_and_says_why(self):
        args, result = self.command(ENABLED_SERVICES=self.STORAGE)
        self.assertEqual('build/bin/nvmf_tgt', self.app(args))
        self.assertNotIn('--interrupt-mode', args)
        self.assertIn('nvmf_tgt left polling: a malloc base bdev',
                      result.stderr)

    def test_storage_host_exports_over_nvmf(self):
        self.prebuilt_spdk()
        self.run_plugin('cinder', ENABLED_SERVICES=self.STORAGE)
        self.assertNotIn('spdk_nvmf_transport',
                         self.section(self.ini('CINDER_CONF'), 'spdk'))

    def test_compute_host_runs_a_polling_vhost(self):
        args, result = self.command(ENABLED_SERVICES=self.COMPUTE)
        self.assertEqual('build/bin/vhost', self.app(args))
        self.assertEqual(os.path.join(self.env['DATA_DIR'], 'spdk', 'vhost'),
                         args[args.index('-S') + 1])
        self.assertNotIn('--interrupt-mode', args)
        self.assertEqual('', result.stderr)

    def test_compute_host_may_force_interrupt_mode(self):
        args, result = self.command(ENABLED_SERVICES=self.COMPUTE,
                                    SPDK_INTERRUPT_MODE='True',
                                    SPDK_BASE_BDEV='aio',
                                    SPDK_AIO_FILE=self.path('aio.img'),
                                    SPDK_AIO_SIZE='1M')
        self.assertEqual('build/bin/vhost', self.app(args))
        self.assertIn('--interrupt-mode', args)
        self.assertIn('attaches local volumes only', result.stderr)

    def test_storage_host_may_force_polling(self):
        args, _ = self.command(ENABLED_SERVICES=self.STORAGE,
                               SPDK_INTERRUPT_MODE='False',
                               SPDK_BASE_BDEV='aio',
                               SPDK_AIO_FILE=self.path('aio.img'),
                               SPDK_AIO_SIZE='1M')
        self.assertEqual('build/bin/nvmf_tgt', self.app(args))
        self.assertNotIn('--interrupt-mode', args)

    def test_hyperconverged_vhost_attaches_locally_only(self):
        self.prebuilt_spdk()
        result = self.run_plugin('cinder', 'post-config', SPDK_APP='vhost')
        cinder = self.section(self.ini('CINDER_CONF'), 'spdk')
        # The backend exports nothing: vhost has no nvmf_* RPCs.
        self.assertEqual('none', cinder['spdk_nvmf_transport'])
        known = {opt.name for _, group in cinder_opts.list_opts()
                 for opt in group}
        self.assertIn('spdk_nvmf_transport', known)
        self.assertIn('QoS change on a volume no guest has open is refused',
                      result.stderr)
        [call] = self.assertCalled('run_process spdk-tgt')
        self.assertEqual('build/bin/vhost', self.app(call.split()))

    def test_explicit_spdk_tgt_on_a_compute_host(self):
        args, _ = self.command(ENABLED_SERVICES=self.COMPUTE,
                               SPDK_APP='spdk_tgt')
        self.assertEqual('build/bin/spdk_tgt', self.app(args))
        self.assertNotIn('--interrupt-mode', args)

    def test_prebuilt_tree_needs_the_chosen_application(self):
        self.prebuilt_spdk()
        os.remove(os.path.join(self.spdk_dir, 'build', 'bin', 'nvmf_tgt'))
        self.build_script()
        self.run_plugin('pre-install', ENABLED_SERVICES=self.STORAGE)
        self.assertCalled('build-spdk.sh 26.05')

    def test_summary_names_application_and_mode(self):
        self.prebuilt_spdk()
        result = self.run_plugin('pre-install', ENABLED_SERVICES=self.COMPUTE)
        self.assertIn('building SPDK (vhost, interrupt mode False)',
                      result.stdout)

    def test_spdk_tgt_in_interrupt_mode_is_refused(self):
        result = self.assertRefused(
            'spdk_tgt never sleeps', SPDK_INTERRUPT_MODE='True',
            SPDK_BASE_BDEV='aio')
        self.assertIn('run vhost on a compute host or nvmf_tgt on a storage '
                      'host', result.stderr)
        self.assertNotCalled('build-spdk.sh')

    def test_interrupt_mode_on_malloc_is_refused(self):
        self.assertRefused('SPDK_BASE_BDEV=malloc',
                           ENABLED_SERVICES=self.COMPUTE,
                           SPDK_INTERRUPT_MODE='True')

    def test_unknown_application_is_refused(self):
        self.assertRefused("SPDK_APP must be auto, spdk_tgt, vhost or "
                           "nvmf_tgt, not 'iscsi_tgt'", SPDK_APP='iscsi_tgt')

    def test_unknown_interrupt_mode_is_refused(self):
        self.assertRefused("not 'sometimes'", SPDK_INTERRUPT_MODE='sometimes')

    def test_nvmf_tgt_on_a_compute_host_is_refused(self):
        self.assertRefused('has no vhost_* RPCs, which nova-compute',
                           SPDK_APP='nvmf_tgt')

    def test_vhost_on_a_storage_only_host_is_refused(self):
        self.assertRefused('could reach no compute host',
                           ENABLED_SERVICES=self.STORAGE, SPDK_APP='vhost')

    def test_refused_again_at_post_config(self):
        # post-config alone (a restack of one phase) checks as well.
        self.assertRefused('spdk_tgt never sleeps', 'post-config',
                           SPDK_INTERRUPT_MODE='on', SPDK_BASE_BDEV='aio')
