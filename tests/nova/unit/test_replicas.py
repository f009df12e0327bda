"""The replicated volume's names and states, as SPDK's raid answers.

The answers below have the shape ``bdev_raid_get_bdevs`` gives on v26.01
and v26.05 (``module/bdev/raid/bdev_raid.c``): a failed member keeps its
slot with ``name`` null. The functional tests check them on real SPDK.
"""

import io
import json
import os
import subprocess
import sys

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture
import testtools

from nova_vhost_user import replicas_cmd
from os_brick_connector import conf_check
from os_brick_connector import connector
from os_brick_connector import connector_errors as errors
from os_brick_connector import host_lock
from os_brick_connector import mirror
from os_brick_connector import mirror_repair
from os_brick_connector import options
from os_brick_connector import replicas
from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import properties
from spdk_vhost_core import spdk_rpc_bdev
from tests import base
from tests.unit import test_unreplayed

VOLUME = '6a1c7b8e-0d2f-4c3e-9a51-0a2b3c4d5e6f'


class RaidAnswers(spdk_rpc_bdev.RaidMethods):
    """A client that only answers bdev_raid_get_bdevs."""

    def __init__(self, *raids):
        self.raids = list(raids)

    def call(self, method, params=None):
        assert method == 'bdev_raid_get_bdevs', method
        return self.raids


def raid(*members, state='online', total=2):
    return {'name': VOLUME, 'raid_level': 'raid1', 'superblock': True,
            'state': state, 'num_base_bdevs': total,
            'base_bdevs_list': [
                {'name': name, 'is_configured': name is not None}
                for name in members]}


class TestNames(base.TestCase):

    def test_member_controller_stable_and_safe(self):
        one = mirror.member_controller(VOLUME, 'tcp:192.0.2.1:4420')
        self.assertEqual(one, mirror.member_controller(
            VOLUME, 'tcp:192.0.2.1:4420'))
        self.assertNotEqual(one, mirror.member_controller(
            VOLUME, 'tcp:192.0.2.2:4420'))
        self.assertRegex(one, '^%s\\.[0-9a-f]{8}$' % VOLUME)


class TestStatus(base.TestCase):

    def test_states(self):
        self.assertEqual(
            {'state': 'online', 'members': ['a', 'b'], 'replicas': 2,
             'missing': 0, 'rebuilding': None},
            mirror.status(RaidAnswers(raid('a', 'b')), VOLUME))
        self.assertEqual(
            {'state': 'degraded', 'members': ['a'], 'replicas': 2,
             'missing': 1, 'rebuilding': None},
            mirror.status(RaidAnswers(raid('a', None)), VOLUME))
        self.assertEqual(
            'degraded',
            mirror.status(RaidAnswers(raid('a', 'b', None, total=3)),
                          VOLUME)['state'])
        self.assertEqual(
            'offline',
            mirror.status(RaidAnswers(raid('a', None, state='configuring')),
                          VOLUME)['state'])
        self.assertIsNone(mirror.status(RaidAnswers(), VOLUME))

    def test_rebuild_is_not_in_sync(self):
        answer = raid('a', 'b')
        answer['process'] = {'type': 'rebuild', 'target': 'b',
                             'progress': {'blocks': 512, 'percent': 25}}
        self.assertEqual(
            {'state': 'degraded', 'members': ['a'], 'replicas': 2,
             'missing': 0, 'rebuilding': {'member': 'b', 'percent': 25}},
            mirror.status(RaidAnswers(answer), VOLUME))


def connector_conf(**overrides):
    """The connector's options; no saved config unless one is given."""
    overrides.setdefault('spdk_saved_config', '')
    conf = cfg.ConfigOpts()
    options.register_opts(conf)
    conf(args=[], default_config_files=[])
    for name, value in overrides.items():
        conf.set_override(name, value, group=options.GROUP)
    return conf[options.GROUP]


class TestReplicaSettings(base.TestCase):

    def test_replicas_attach_with_their_own(self):
        conf = connector_conf(nvme_replica_fast_io_fail_timeout_sec=3,
                              nvme_replica_reconnect_delay_sec=2)
        seen = mirror.replica_conf(conf)
        self.assertEqual((-1, 2, 3), (seen.nvme_ctrlr_loss_timeout_sec,
                                      seen.nvme_reconnect_delay_sec,
                                      seen.nvme_fast_io_fail_timeout_sec))
        # Everything else is the connector's own.
        self.assertEqual(conf.nvme_key_dir, seen.nvme_key_dir)
        self.assertEqual(70, conf.nvme_fast_io_fail_timeout_sec)

    def test_checked_at_start_by_name(self):
        conf_check.check_conf(connector_conf())
        for overrides, option in (
                ({'nvme_replica_fast_io_fail_timeout_sec': 1,
                  'nvme_replica_reconnect_delay_sec': 2},
                 'nvme_replica_fast_io_fail_timeout_sec'),
                ({'nvme_replica_ctrlr_loss_timeout_sec': 0},
                 'nvme_replica_ctrlr_loss_timeout_sec'),
                ({'nvme_replica_ctrlr_loss_timeout_sec': 5,
                  'nvme_replica_fast_io_fail_timeout_sec': 10,
                  'nvme_replica_reconnect_delay_sec': 1},
                 'nvme_replica_fast_io_fail_timeout_sec')):
            err = self.assertRaises(errors.InvalidConnectorConfig,
                                    conf_check.check_conf,
                                    connector_conf(**overrides))
            self.assertIn(option, str(err))


RUNNING = True
INCOMING = False


class CommandAnswers(RaidAnswers):
    """Plus the NVMe controllers of bdev_nvme_get_controllers."""

    def __init__(self, raids, controllers=(), sessions=(RUNNING,)):
        super().__init__(*raids)
        self.controllers = [
            {'name': name, 'ctrlrs': [{'state': state}]}
            for name, state in controllers]
        self.sessions = [{'vid': 0, 'id': 0, 'name': 'vhost-' + VOLUME,
                          'started': started} for started in sessions]
        self.calls = []

    def vhost_get_controllers(self):
        """The volume's vhost controller, and QEMU's sessions on it."""
        return [{'ctrlr': 'vhost-' + VOLUME, 'sessions': self.sessions,
                 'backend_specific': {'block': {'bdev': VOLUME}}}]

    def call(self, method, params=None):
        self.calls.append((method, params))
        if method == 'bdev_raid_add_base_bdev':
            return self._add_base_bdev(params)
        return super().call(method, params)

    def _add_base_bdev(self, params):
        """As SPDK: refused while a rebuild runs; else one starts on it."""
        found = [r for r in self.raids if r['name'] == params['raid_bdev']]
        if not found:
            raise spdk_exc.NotFound('bdev_raid_add_base_bdev', params)
        raid = found[0]
        if raid.get('process'):
            raise spdk_exc.NotPermitted('bdev_raid_add_base_bdev', params,
                                        -1, 'Operation not permitted')
        slot = [s for s in raid['base_bdevs_list'] if not s['is_configured']]
        slot[0].update(name=params['base_bdev'], is_configured=True)
        raid['process'] = {'type': 'rebuild', 'target': params['base_bdev'],
                           'progress': {'percent': 0}}
        return True

    def rebuilt(self):
        """Every rebuild under way ends: its member is in sync."""
        for raid in self.raids:
            raid.pop('process', None)

    def bdev_nvme_get_controllers(self, name=None):
        found = [ctrl for ctrl in self.controllers
                 if name in (None, ctrl['name'])]
        if name and not found:
            raise spdk_exc.NotFound('no controller %s' % name)
        return found


def run_command(client, *argv):
    """spdk-vhost-replicas with ``argv``: its exit code and output."""
    out = io.StringIO()
    code = replicas_cmd.main(list(argv), client=client,
                             conf=connector_conf(), out=out)
    return code, out.getvalue()


class TestCommand(base.TestCase):

    def run_command(self, client, *argv):
        return run_command(client, *argv)

    def test_list_exit_codes(self):
        self.assertEqual((0, ''), self.run_command(CommandAnswers([])))
        self.assertEqual(
            (0, '%s online 2/2 in sync\n' % VOLUME),
            self.run_command(CommandAnswers([raid('a', 'b')]), 'list'))
        lost = VOLUME + '.0123abcd'
        code, out = self.run_command(CommandAnswers(
            [raid('a', None)], [(lost, 'reconnect_is_delayed')]))
        self.assertEqual((1, '%s degraded 1/2 in sync; 1 missing; %s '
                          'reconnect_is_delayed\n' % (VOLUME, lost)),
                         (code, out))
        self.assertEqual(2, self.run_command(CommandAnswers(
            [raid('a', 'b'), raid(None, None, state='offline')]))[0])

    def test_repair_adds_connected_members_only(self):
        back, away = VOLUME + '.0123abcd', VOLUME + '.89abcdef'
        client = CommandAnswers([raid('a', None, None, total=3)],
                                [(back, 'enabled'), (away, 'failed')])
        code, _out = self.run_command(client, 'repair', VOLUME)
        # Rebuilding: a repair that worked.
        self.assertEqual(0, code)
        self.assertEqual(
            [{'raid_bdev': VOLUME, 'base_bdev': back + 'n1'}],
            [params for method, params in client.calls
             if method == 'bdev_raid_add_base_bdev'])

    def added(self, client):
        return [params['base_bdev'] for method, params in client.calls
                if method == 'bdev_raid_add_base_bdev']

    def test_rebuilds_wait_for_the_guest_to_run_here(self):
        """A live migration's source writes until the switch."""
        new = VOLUME + '.0123abcd'
        client = CommandAnswers([raid('a', None)], [(new, 'enabled')],
                                sessions=[INCOMING])
        out, seen = io.StringIO(), {}
        replicas_cmd.watch_once(client, out, seen)
        self.assertEqual([], self.added(client))
        self.assertEqual('%s degraded 1/2 in sync; 1 missing; %s enabled; '
                         'rebuild waits for the guest to run here '
                         '(incoming)\n' % (VOLUME, new), out.getvalue())
        code, said = self.run_command(client, 'repair', VOLUME)
        self.assertEqual(1, code)
        self.assertIn('live migration brings its guest here', said)
        self.assertEqual([], self.added(client))

        # The switch: QEMU starts the device here.
        client.sessions[0]['started'] = True
        replicas_cmd.watch_once(client, out, seen)
        self.assertEqual([new + 'n1'], self.added(client))

    def test_a_shut_off_guest_is_left_to_the_operator(self):
        new = VOLUME + '.0123abcd'
        client = CommandAnswers([raid('a', None)], [(new, 'enabled')],
                                sessions=[])
        out = io.StringIO()
        replicas_cmd.watch_once(client, out, {})
        self.assertEqual([], self.added(client))
        self.assertIn('rebuild waits for the guest to run here (no guest)',
                      out.getvalue())
        self.run_command(client, 'repair', VOLUME)
        self.assertEqual([new + 'n1'], self.added(client))

    def test_repair_of_a_volume_not_here(self):
        self.assertEqual(2, self.run_command(CommandAnswers([]), 'repair',
                                             VOLUME)[0])

    def test_watch_adds_back_and_says_only_changes(self):
        back = VOLUME + '.0123abcd'
        client = CommandAnswers([raid('a', None)], [(back, 'enabled')])
        out, seen = io.StringIO(), {}
        replicas_cmd.watch_once(client, out, seen)
        self.assertEqual(
            [{'raid_bdev': VOLUME, 'base_bdev': back + 'n1'}],
            [params for method, params in client.calls
             if method == 'bdev_raid_add_base_bdev'])
        self.assertIn('%s degraded 1/2 in sync' % VOLUME, out.getvalue())
        said = out.getvalue()
        replicas_cmd.watch_once(client, out, seen)
        self.assertEqual(said, out.getvalue())
        # Detached: forgotten, said again if it comes back.
        replicas_cmd.watch_once(CommandAnswers([]), out, seen)
        self.assertEqual({}, seen)

    def test_one_rebuild_at_a_time(self):
        """SPDK refuses a member while another rebuilds: none is asked."""
        first, second = VOLUME + '.0123abcd', VOLUME + '.89abcdef'
        client = CommandAnswers([raid('a', None, None, total=3)],
                                [(first, 'enabled'), (second, 'enabled')])
        out, seen = io.StringIO(), {}
        replicas_cmd.watch_once(client, out, seen)
        self.assertEqual([first + 'n1'], self.added(client))
        self.assertIn('rebuilding %sn1 0%%' % first, out.getvalue())
        code, said = self.run_command(client, 'repair', VOLUME)
        self.assertEqual((0, [first + 'n1']), (code, self.added(client)))
        replicas_cmd.watch_once(client, out, seen)
        self.assertEqual([first + 'n1'], self.added(client))

        client.rebuilt()
        replicas_cmd.watch_once(client, out, seen)
        self.assertEqual([first + 'n1', second + 'n1'], self.added(client))
        client.rebuilt()
        self.assertEqual((0, '%s online 3/3 in sync\n' % VOLUME),
                         self.run_command(client, 'list'))

    def test_watch_rides_out_an_unreachable_target(self):
        client = FlakyAnswers([raid('a', 'b')])
        out = io.StringIO()
        self.assertEqual(0, replicas_cmd.watch(client, out, 0, rounds=2))
        first, second = out.getvalue().splitlines()
        self.assertIn('spdk-vhost-replicas watch: ', first)
        self.assertEqual('%s online 2/2 in sync' % VOLUME, second)


class FlakyAnswers(CommandAnswers):
    """The target's first answer lost (a restart), then the others."""

    def call(self, method, params=None):
        if not getattr(self, 'failed', False):
            self.failed = True
            raise spdk_exc.SpdkRpcError(method, code=None,
                                        message='connection refused')
        return super().call(method, params)


def export(target, port):
    return {'target_id': target, 'transport': 'tcp',
            'nqn': 'nqn.2016-06.io.spdk:%s' % VOLUME,
            'traddr': '192.0.2.%d' % port, 'trsvcid': '4420',
            'adrfam': 'ipv4', 'ns_id': 1}


def replicated():
    return {'volume_id': VOLUME, 'transport': 'replicated',
            'replicas': [export('storage-a', 1), export('storage-b', 2)],
            'access_mode': 'rw'}


def member(target):
    return mirror.member_controller(VOLUME, target) + 'n1'


class TestReplaceRefused(base.TestCase):
    """Refusals come before anything changes on the target."""

    def replace(self, client, old, new):
        return mirror_repair.replace(client, replicated(), old, new,
                                     connector_conf())

    def test_unknown_old_target(self):
        client = CommandAnswers([])
        self.assertRaises(errors.InvalidConnectionProperties, self.replace,
                          client, 'storage-x', export('storage-c', 3))
        self.assertEqual([], client.calls)

    def test_new_replica_beside_a_kept_one(self):
        client = CommandAnswers([])
        self.assertRaises(spdk_exc.InvalidProperties, self.replace,
                          client, 'storage-b', export('storage-a', 3))
        self.assertEqual([], client.calls)

    def test_last_in_sync_not_removed(self):
        answer = raid(member('storage-a'), member('storage-b'))
        answer['process'] = {'type': 'rebuild',
                             'target': member('storage-a'),
                             'progress': {'blocks': 1, 'percent': 1}}
        client = CommandAnswers([answer])
        self.assertRaises(errors.TargetError, self.replace, client,
                          'storage-b', export('storage-c', 3))
        self.assertEqual(['bdev_raid_get_bdevs'],
                         [method for method, _params in client.calls])

    def test_not_attached_here(self):
        client = CommandAnswers([])
        self.assertRaises(errors.TargetError, self.replace, client,
                          'storage-b', export('storage-c', 3))


class DetachAnswers(CommandAnswers):
    """Plus bdev_nvme_detach_controller, refused for ``failing``."""

    def __init__(self, raids, failing):
        super().__init__(raids)
        self.failing = failing
        self.detached = []

    def call(self, method, params=None):
        if method == 'bdev_raid_delete':
            self.calls.append((method, params))
            return True
        return super().call(method, params)

    def bdev_nvme_detach_controller(self, name):
        self.detached.append(name)
        if name == self.failing:
            raise spdk_exc.SpdkRpcError('bdev_nvme_detach_controller',
                                        code=-1, message='storage away')


class TestRelease(base.TestCase):
    """A detach tries every member, whatever one of them does."""

    def test_a_failed_member_does_not_keep_the_others(self):
        first = mirror.member_controller(VOLUME, 'storage-a')
        client = DetachAnswers([raid(member('storage-a'),
                                     member('storage-b'))], failing=first)
        err = self.assertRaises(
            spdk_exc.SpdkRpcError, replicas.release, client,
            properties.ConnectionProperties(replicated()), connector_conf(),
            controllers=[])
        self.assertIn('storage away', str(err))
        # The mirror went first, then each member was tried.
        self.assertIn(('bdev_raid_delete', {'name': VOLUME}), client.calls)
        self.assertEqual(
            [first, mirror.member_controller(VOLUME, 'storage-b')],
            client.detached)


def locked_elsewhere(path):
    """Whether a process holds lock file ``path``, as another one sees it."""
    probe = ('import fcntl, sys\n'
             'with open(sys.argv[1], "a") as lock:\n'
             '    try:\n'
             '        fcntl.lockf(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)\n'
             '    except OSError:\n'
             '        sys.exit(1)\n')
    return subprocess.run([sys.executable, '-c', probe, path]).returncode == 1


class LockProbe(CommandAnswers):
    """Tells, at each member added back, whether the lock was held."""

    def __init__(self, raids, controllers, path):
        super().__init__(raids, controllers)
        self.path = path
        self.held = []

    def call(self, method, params=None):
        if method == 'bdev_raid_add_base_bdev':
            self.held.append(locked_elsewhere(self.path))
        return super().call(method, params)


class TestLock(base.TestCase):
    """Repairs hold the lock nova-compute's connect and disconnect hold."""

    def setUp(self):
        super().setUp()
        self.path = os.path.join(cfg.CONF.oslo_concurrency.lock_path,
                                 host_lock.NAME)

    def lost(self):
        return LockProbe([raid('a', None)],
                         [(VOLUME + '.0123abcd', 'enabled')], self.path)

    def test_the_connector_holds_it(self):
        self.assertTrue(connector.synchronized(
            lambda: locked_elsewhere(self.path))())
        self.assertFalse(locked_elsewhere(self.path))

    def test_the_watcher_holds_it_for_each_repair(self):
        client = self.lost()
        replicas_cmd.watch_once(client, io.StringIO(), {})
        self.assertEqual([True], client.held)
        self.assertFalse(locked_elsewhere(self.path))

    def test_the_repair_command_holds_it(self):
        client = self.lost()
        replicas_cmd.main(['repair', VOLUME], client=client,
                          conf=connector_conf(), out=io.StringIO())
        self.assertEqual([True], client.held)

    def test_one_way_back_for_both(self):
        readd = self.useFixture(fixtures.MockPatchObject(
            mirror_repair, 'readd')).mock
        replicas_cmd.watch_once(self.lost(), io.StringIO(), {})
        mirror_repair.repair(CommandAnswers([raid(member('storage-a'),
                                                  None)]),
                             replicated(), connector_conf())
        watcher, repair = [call.args for call in readd.call_args_list]
        # The watcher knows the members from the target, a repair from
        # the connection properties.
        self.assertEqual((VOLUME, None), watcher[1:3])
        self.assertEqual((VOLUME, VOLUME), (repair[1], repair[2].volume_id))

    def test_without_one_repairs_are_refused_at_once(self):
        self.useFixture(config_fixture.Config()).config(
            lock_path=None, group='oslo_concurrency')
        said = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', said))
        # Were it not refused, the watcher would run on: 0, not 3.
        self.useFixture(fixtures.MockPatchObject(replicas_cmd, 'watch',
                                                 return_value=0))
        client = self.lost()
        for argv in (['watch'], ['repair', VOLUME]):
            self.assertEqual(3, replicas_cmd.main(
                argv, client=client, conf=connector_conf(),
                out=io.StringIO()))
        self.assertEqual([], client.calls)
        self.assertIn('lock_path', said.getvalue())
        # Listing needs no lock.
        self.assertEqual(1, replicas_cmd.main(
            ['list'], client=client, conf=connector_conf(),
            out=io.StringIO()))

    @testtools.skipUnless(os.geteuid() == 0, 'chown needs root')
    def test_its_file_made_here_is_nova_computes(self):
        locks = self.useFixture(fixtures.TempDir()).path
        os.chown(locks, 65534, 65534)
        with host_lock.held(locks):
            pass
        found = os.stat(os.path.join(locks, host_lock.NAME))
        self.assertEqual((65534, 65534), (found.st_uid, found.st_gid))


class WaitingListTest(base.TestCase):
    """The list says which remote volume waits for its storage node."""

    def test_offline_until_restored(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'spdk_tgt.json')
        with open(path, 'w') as sink:
            json.dump(test_unreplayed.SAVED, sink)
        out = io.StringIO()
        code = replicas_cmd.main(
            ['list'], client=CommandAnswers([raid('a', 'b')]),
            conf=connector_conf(spdk_saved_config=path), out=out)
        self.assertEqual(
            (2, ['%s online 2/2 in sync' % VOLUME,
                 'vhost-vol-a offline; not replayed at the target\'s '
                 'start: waits for its storage node']),
            (code, out.getvalue().splitlines()))


class RestoreLinesTest(base.TestCase):
    """The watcher says once that a volume waits, and when it is back."""

    def test_a_line_per_change(self):
        rounds = iter([{'vhost-a': 'down'}, {'vhost-a': 'down'},
                       {'vhost-a': 'refused'}, {'vhost-a': None}, {}])
        self.useFixture(fixtures.MockPatch(
            'os_brick_connector.restore.restore',
            side_effect=lambda *args: next(rounds)))
        out, waits = io.StringIO(), {}
        for _round in range(5):
            replicas_cmd.restore_once(None, out, waits, '/saved.json')
        self.assertEqual(['vhost-a waits: down', 'vhost-a waits: refused',
                          'vhost-a restored from the saved config'],
                         out.getvalue().splitlines())
        self.assertEqual({}, waits)
