"""spdk-vhost-upgrade on real targets of both supported SPDK releases.

Each test builds real objects on a target of one release (lvols in an
AIO lvstore, QoS limits, vhost-blk controllers, NVMe-oF subsystems with
listeners, allowed hosts and keys, bdev_nvme attachments of a compute
target), runs the upgrade as the command does (its ``Upgrade`` class,
in this process, so the new target is this test's to clean up), and
checks the release that answers afterwards and that every object is
there. The command itself compares every object before and after.
"""

import json
import os
import signal
import stat
import sys

import fixtures

from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import host_settings
from spdk_vhost_core import nvme_auth
from spdk_vhost_core import reconnect
from spdk_vhost_core import spdk_rpc
from spdk_vhost_core import systemd_unit
from spdk_vhost_core import target_inventory
from spdk_vhost_core import upgrade
from testbed import net
from testbed import spdk_build
from testbed import spdk_target
from tests import base

OLD, NEW = spdk_build.VERSIONS
SUBNQN = 'nqn.2016-06.io.spdk:cinder:volume-upgrade'
HOSTNQN = ('nqn.2014-08.org.nvmexpress:uuid:'
           '7d1e5a0c-6b8e-4f61-9c0d-2a4b6c8e0f13')


class UpgradeCase(base.TestCase):
    """Targets of either release, and the upgrade run as the command."""

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(240, gentle=True))
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.said = []

    def _target(self, app, version, **kwargs):
        target = self.useFixture(spdk_target.SpdkTarget(
            app=app, tree=spdk_build.tree(version), name=app, **kwargs))
        client = spdk_rpc.SpdkClient(socket_path=target.socket_path,
                                     timeout=30, connect_retries=0)
        self.addCleanup(client.close)
        return target, client

    @staticmethod
    def _saved(target):
        return os.path.join(target.workdir, 'saved.json')

    def _upgrade(self, target, tree, **kwargs):
        kwargs.setdefault('timeout', 20)
        up = upgrade.Upgrade(
            target.socket_path, self._saved(target), tree, pid=target.pid,
            say=self.said.append, log_path=target.log_path, **kwargs)
        try:
            up.run()
            # The target-side window, from the stop until every object
            # is back: a figure for the upgrade guide, not an assertion.
            print('%s upgrade window: %.2f s' % (self.id(), up.stall))
        finally:
            if up.target.process is not None:
                # The fixture stops whichever process runs now.
                target.process = up.target.process
        return up

    def _version(self, client):
        fields = client.spdk_get_version()['fields']
        return '%d.%02d' % (fields['major'], fields['minor'])

    def _local_volume(self, target, client, name='vol'):
        target.aio_lvstore(size_mib=64)
        lvol = client.call('bdev_lvol_create', {
            'lvs_name': 'lvs0', 'lvol_name': name, 'size_in_mib': 16,
            'thin_provision': True})
        client.call('bdev_set_qos_limit', {'name': lvol,
                                           'rw_ios_per_sec': 1000})
        return lvol

    def _export(self, storage, client):
        lvol = self._local_volume(storage, client)
        port = str(net.free_port())
        keys = os.path.join(self.tmp, 'keys')
        os.mkdir(keys, 0o700)
        nvme_auth.register(client, keys, 'host0',
                           nvme_auth.generate_secret())
        client.nvmf_create_transport('TCP')
        client.nvmf_create_subsystem(SUBNQN, allow_any_host=False)
        client.nvmf_subsystem_add_ns(SUBNQN, lvol)
        client.nvmf_subsystem_add_listener(SUBNQN, 'TCP', '127.0.0.1',
                                           port, adrfam='IPv4')
        client.nvmf_subsystem_add_host(SUBNQN, HOSTNQN)
        return port

    def _attach(self, compute, port, settings=None):
        """Attach the export as a compute host does.

        ``settings``: the host's reconnect settings (:mod:`reconnect`).
        """
        settings = settings or {reconnect.LOSS: 60, reconnect.DELAY: 1,
                                reconnect.FAST_FAIL: 30}
        compute.bdev_nvme_attach_controller(
            name='remote0', trtype='TCP', traddr='127.0.0.1',
            trsvcid=port, subnqn=SUBNQN, hostnqn=HOSTNQN, adrfam='IPv4',
            **settings)
        compute.call('vhost_create_blk_controller',
                     {'ctrlr': 'remote.vhost', 'dev_name': 'remote0n1'})

    @staticmethod
    def _assert_connected(compute, timeout=30):
        spdk_target.wait_nvme_enabled(compute, 'remote0', timeout)

    def _broken_tree(self, app, says='SPDK v26.05'):
        """A tree whose ``app`` reports a release and then fails to run."""
        tree = os.path.join(self.tmp, 'broken')
        os.makedirs(os.path.join(tree, 'build', 'bin'))
        os.makedirs(os.path.join(tree, 'build', 'lib'))
        path = os.path.join(tree, 'build', 'bin', app)
        with open(path, 'w') as script:
            script.write('#!/bin/sh\n[ "$1" = --version ] && '
                         'echo "%s" && exit 0\n'
                         'echo "cannot start: broken build" >&2\nexit 1\n'
                         % says)
        os.chmod(path, stat.S_IRWXU)
        return tree


class UpgradeTest(UpgradeCase):

    def test_compute_target_local_volume(self):
        target, client = self._target('vhost', OLD, interrupt_mode=True)
        lvol = self._local_volume(target, client)
        client.call('vhost_create_blk_controller',
                    {'ctrlr': 'local.vhost', 'dev_name': lvol})
        before = target_inventory.take(client)
        old_pid = target.pid

        self._upgrade(target, spdk_build.tree(NEW))

        self.assertNotEqual(old_pid, target.pid)
        self.assertEqual(NEW, self._version(client))
        self.assertEqual([], target_inventory.differences(
            before, target_inventory.take(client)))
        self.assertEqual(1, len(before['QoS limits']))
        self.assertIn('local.vhost', before['vhost controllers'])
        self.assertIn('upgraded: every object back', self.said[-1])

    def test_compute_target_remote_volume(self):
        storage, storage_client = self._target('nvmf_tgt', NEW,
                                               interrupt_mode=True)
        port = self._export(storage, storage_client)
        target, client = self._target('vhost', OLD)
        self._attach(client, port)

        self._upgrade(target, spdk_build.tree(NEW))

        self.assertEqual(NEW, self._version(client))
        self._assert_connected(client)
        self.assertEqual(['remote.vhost'], [
            c['ctrlr'] for c in client.call('vhost_get_controllers')])

    def test_storage_target_with_a_host_connected(self):
        storage, client = self._target('nvmf_tgt', OLD, interrupt_mode=True)
        port = self._export(storage, client)
        compute, compute_client = self._target('vhost', NEW)
        # The connector's defaults, as Cinder records them at the export.
        settings = {reconnect.LOSS: reconnect.DEFAULT_LOSS,
                    reconnect.DELAY: reconnect.DEFAULT_DELAY,
                    reconnect.FAST_FAIL: reconnect.DEFAULT_FAST_FAIL}
        self._attach(compute_client, port, settings)
        old_pid = storage.pid
        saved = self._saved(storage)

        # Nothing recorded for the host (attached before Cinder recorded
        # settings): refused, naming it, before anything stops.
        err = self.assertRaises(spdk_exc.UpgradeError, self._upgrade,
                                storage, spdk_build.tree(NEW),
                                timeout=reconnect.UPGRADE_TIMEOUT)
        self.assertIn('%s (settings unknown on %s)' % (HOSTNQN, SUBNQN),
                      str(err))
        self.assertIn('nothing was stopped', str(err))

        # Recorded, but too short for the window (the connector's
        # defaults before this release): refused, naming it and why.
        host_settings.record(saved, HOSTNQN, SUBNQN, {
            reconnect.LOSS: 60, reconnect.DELAY: 2, reconnect.FAST_FAIL: 10})
        err = self.assertRaises(spdk_exc.UpgradeError, self._upgrade,
                                storage, spdk_build.tree(NEW),
                                timeout=reconnect.UPGRADE_TIMEOUT)
        self.assertIn('%s (ctrlr_loss_timeout_sec 60 < 62 s, '
                      'fast_io_fail_timeout_sec 10 < 62 s on %s)'
                      % (HOSTNQN, SUBNQN), str(err))
        self.assertEqual(old_pid, storage.pid)
        self.assertEqual(OLD, self._version(client))

        # The settings the host attached with cover the default window,
        # but not the one a longer --timeout makes.
        host_settings.record(saved, HOSTNQN, SUBNQN, settings)
        err = self.assertRaises(spdk_exc.UpgradeError, self._upgrade,
                                storage, spdk_build.tree(NEW), timeout=20)
        self.assertIn('fast_io_fail_timeout_sec 70 < 102 s', str(err))
        self.assertEqual(old_pid, storage.pid)

        # With the default --timeout they do: upgraded without --force.
        self._upgrade(storage, spdk_build.tree(NEW),
                      timeout=reconnect.UPGRADE_TIMEOUT)

        self.assertIn('every connected NVMe-oF host rides out 60 s',
                      self.said)
        self.assertEqual(NEW, self._version(client))
        self._assert_connected(compute_client)
        [sub] = [s for s in client.call('nvmf_get_subsystems')
                 if s['nqn'] == SUBNQN]
        self.assertEqual([HOSTNQN], [h['nqn'] for h in sub['hosts']])
        self.assertEqual(['host0'], [
            k['name'] for k in client.call('keyring_get_keys')])
        # The record is the drivers', and outlives the upgrade.
        self.assertEqual({HOSTNQN: {SUBNQN: settings}},
                         host_settings.read(saved))

    def test_storage_target_forced_past_an_unknown_host(self):
        storage, client = self._target('nvmf_tgt', OLD, interrupt_mode=True)
        port = self._export(storage, client)
        compute, compute_client = self._target('vhost', NEW)
        self._attach(compute_client, port)

        self._upgrade(storage, spdk_build.tree(NEW), force=True)

        self.assertEqual(NEW, self._version(client))
        self._assert_connected(compute_client)

    def test_failed_new_binary_rolled_back(self):
        target, client = self._target('vhost', OLD, interrupt_mode=True)
        lvol = self._local_volume(target, client)
        client.call('vhost_create_blk_controller',
                    {'ctrlr': 'local.vhost', 'dev_name': lvol})
        before = target_inventory.take(client)

        err = self.assertRaises(spdk_exc.RolledBack, self._upgrade, target,
                                self._broken_tree('vhost'))

        self.assertIn('exited with 1', str(err))
        self.assertEqual(OLD, self._version(client))
        self.assertEqual([], target_inventory.differences(
            before, target_inventory.take(client)))

    def test_unsupported_new_release_refused_before_stopping(self):
        target, client = self._target('vhost', OLD, interrupt_mode=True)
        old_pid = target.pid

        err = self.assertRaises(spdk_exc.UpgradeError, self._upgrade, target,
                                self._broken_tree('vhost', 'SPDK v26.09'))

        self.assertIn('not a supported release', str(err))
        self.assertEqual(old_pid, target.pid)
        self.assertEqual(OLD, self._version(client))

    def test_downgrade_refused_before_stopping(self):
        # v26.01 exits at start on v26.05's saved config (its
        # bdev_nvme_set_options has parameters v26.01 does not decode),
        # so the command refuses a downgrade before anything stops.
        target, client = self._target('vhost', NEW, interrupt_mode=True)
        lvol = self._local_volume(target, client)
        client.call('vhost_create_blk_controller',
                    {'ctrlr': 'local.vhost', 'dev_name': lvol})
        old_pid = target.pid

        err = self.assertRaises(spdk_exc.UpgradeError, self._upgrade, target,
                                spdk_build.tree(OLD))

        self.assertIn('downgrade is refused', str(err))
        self.assertEqual(old_pid, target.pid)
        self.assertEqual(NEW, self._version(client))


class UnitUpgradeTest(UpgradeCase):
    """--systemd-unit, with a stand-in systemctl (fake_systemctl.py)."""

    UNIT = 'spdk-vhost.service'

    def setUp(self):
        super().setUp()
        self.systemd = os.path.join(self.tmp, 'systemd')
        bin_dir = os.path.join(self.tmp, 'bin')
        os.makedirs(self.systemd)
        os.makedirs(bin_dir)
        with open(os.path.join(bin_dir, 'systemctl'), 'w') as script:
            script.write('#!/bin/sh\nexec %s %s "$@"\n' % (
                sys.executable, os.path.join(os.path.dirname(__file__),
                                             'fake_systemctl.py')))
        os.chmod(os.path.join(bin_dir, 'systemctl'), stat.S_IRWXU)
        self.useFixture(fixtures.EnvironmentVariable(
            'PATH', bin_dir + os.pathsep + os.environ['PATH']))
        self.useFixture(fixtures.EnvironmentVariable(
            'FAKE_SYSTEMD', self.systemd))
        self.socket = os.path.join(self.tmp, 'spdk.sock')
        self.saved = os.path.join(self.tmp, 'spdk_tgt.json')
        with open(self.saved, 'w') as out:
            out.write('{"subsystems": []}\n')
        os.mkdir(os.path.join(self.tmp, 'vhost'))
        with open(os.path.join(self.systemd, self.UNIT + '.json'),
                  'w') as out:
            json.dump({'exec': [
                '${SPDK_DIR}/build/bin/vhost', '-r', self.socket,
                '-S', os.path.join(self.tmp, 'vhost'), '-s', '256',
                '--disable-cpumask-locks', '-m', '0x1', '--interrupt-mode',
                '--json', self.saved],
                'env': {'SPDK_DIR': spdk_build.tree(OLD)},
                'socket': self.socket,
                'log': os.path.join(self.tmp, 'vhost.log')}, out)
        self.unit = systemd_unit.Unit(self.UNIT, self.systemd, timeout=20)
        self.unit.systemctl('daemon-reload')
        self.unit.systemctl('start', self.UNIT)
        self.addCleanup(self._kill)
        self.client = spdk_rpc.SpdkClient(socket_path=self.socket,
                                          timeout=30, connect_retries=5)
        self.addCleanup(self.client.close)
        aio = os.path.join(self.tmp, 'lvs.img')
        with open(aio, 'wb') as out:
            out.truncate(64 * 1024 * 1024)
        self.client.call('bdev_aio_create', {
            'name': 'aio0', 'filename': aio, 'block_size': 4096})
        self.client.call('bdev_lvol_create_lvstore', {
            'bdev_name': 'aio0', 'lvs_name': 'lvs0'})
        lvol = self.client.call('bdev_lvol_create', {
            'lvs_name': 'lvs0', 'lvol_name': 'vol', 'size_in_mib': 16,
            'thin_provision': True})
        self.client.call('vhost_create_blk_controller',
                         {'ctrlr': 'local.vhost', 'dev_name': lvol})

    def _kill(self):
        pid = systemd_unit.UnitProcess(self.unit).pid
        if pid:
            os.kill(pid, signal.SIGKILL)

    def _run(self, tree):
        pid = systemd_unit.UnitProcess(self.unit).pid
        return upgrade.Upgrade(self.socket, self.saved, tree, pid=pid,
                               timeout=20, say=self.said.append,
                               unit=self.unit).run()

    def _calls(self):
        with open(os.path.join(self.systemd, 'calls.log')) as src:
            return [line for line in src.read().splitlines()
                    if line != 'daemon-reload']

    def _drop_in(self):
        path = os.path.join(self.systemd, self.UNIT + '.d',
                            systemd_unit.DROP_IN)
        if not os.path.exists(path):
            return None
        with open(path) as src:
            return src.read().splitlines()[1:]

    def test_upgraded_through_the_unit(self):
        before = target_inventory.take(self.client)

        self._run(spdk_build.tree(NEW))

        self.assertEqual(NEW, self._version(self.client))
        self.assertEqual([], target_inventory.differences(
            before, target_inventory.take(self.client)))
        # The unit was stopped without its ExecStop (the command saved
        # the config itself) and started on the new tree, which it keeps.
        self.assertEqual([
            'start %s %s' % (self.UNIT, spdk_build.tree(OLD)),
            'stop %s no ExecStop TimeoutStopSec=20' % self.UNIT,
            'start %s %s' % (self.UNIT, spdk_build.tree(NEW))],
            self._calls())
        self.assertEqual(['[Service]', 'Environment=SPDK_DIR=%s'
                          % spdk_build.tree(NEW)], self._drop_in())

    def test_rolled_back_through_the_unit(self):
        broken = self._broken_tree('vhost')

        err = self.assertRaises(spdk_exc.RolledBack, self._run, broken)

        self.assertIn('cannot start', str(err))
        self.assertEqual(OLD, self._version(self.client))
        self.assertEqual('start %s %s' % (self.UNIT, spdk_build.tree(OLD)),
                         self._calls()[-1])
        # The unit is as its own file says again.
        self.assertIsNone(self._drop_in())

    def test_unit_loading_another_config_refused(self):
        pid = systemd_unit.UnitProcess(self.unit).pid
        err = self.assertRaises(
            spdk_exc.UpgradeError, upgrade.Upgrade, self.socket,
            self.saved + '.other', spdk_build.tree(NEW), pid=pid,
            unit=self.unit)
        self.assertIn('not the --saved-config', str(err))
