"""The reconnect rule, the hosts' record, and the upgrade's check of both."""

import json
import os
import subprocess

import fixtures
from oslo_config import cfg

from os_brick_connector import options
from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import host_settings
from spdk_vhost_core import reconnect
from spdk_vhost_core import saved_config
from spdk_vhost_core import upgrade
from tests import base

SUB = 'nqn.2016-06.io.spdk:cinder:volume-1'
SUB2 = 'nqn.2016-06.io.spdk:cinder:volume-2'
HOST = 'nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555'
HOST2 = 'nqn.2014-08.org.nvmexpress:uuid:66666666-7777-8888-9999-000000000000'


def settings(loss, delay, fast_fail):
    return {reconnect.LOSS: loss, reconnect.DELAY: delay,
            reconnect.FAST_FAIL: fast_fail}


DEFAULTS = settings(reconnect.DEFAULT_LOSS, reconnect.DEFAULT_DELAY,
                    reconnect.DEFAULT_FAST_FAIL)
# What the connector defaulted to before: I/O failed after 10 s.
OLD_DEFAULTS = settings(60, 2, 10)


class RuleTest(base.TestCase):

    def test_window_is_a_failed_upgrade_and_its_rollback(self):
        # Stop (timeout + SIGKILL wait), new target (timeout), its stop,
        # the old one back (timeout).
        self.assertEqual(60, reconnect.window())
        self.assertEqual(100, reconnect.window(20))
        self.assertEqual(4 * 7.5 + 2 * reconnect.KILL_WAIT,
                         reconnect.window(7.5))

    def test_defaults_ride_out_the_default_window_old_ones_did_not(self):
        self.assertIsNone(reconnect.shortfall(DEFAULTS, reconnect.window()))
        self.assertEqual('ctrlr_loss_timeout_sec 60 < 62 s, '
                         'fast_io_fail_timeout_sec 10 < 62 s',
                         reconnect.shortfall(OLD_DEFAULTS, 60))
        # ... nor a longer window than the one they were chosen for.
        self.assertIn('fast_io_fail_timeout_sec 70 < 102 s',
                      reconnect.shortfall(DEFAULTS, reconnect.window(20)))

    def test_each_timeout_must_cover_the_window_and_one_retry(self):
        self.assertIsNone(reconnect.shortfall(settings(62, 2, 62), 60))
        self.assertEqual('ctrlr_loss_timeout_sec 61 < 62 s',
                         reconnect.shortfall(settings(61, 2, 0), 60))
        self.assertEqual('fast_io_fail_timeout_sec 61 < 62 s',
                         reconnect.shortfall(settings(90, 2, 61), 60))
        # 0: I/O waits for the controller; -1: retried forever.
        self.assertIsNone(reconnect.shortfall(settings(90, 2, 0), 60))
        self.assertIsNone(reconnect.shortfall(settings(-1, 5, 0), 60))
        self.assertIsNone(reconnect.shortfall(settings(-1, 5, 65), 60))
        self.assertEqual('fast_io_fail_timeout_sec 64 < 65 s',
                         reconnect.shortfall(settings(-1, 5, 64), 60))
        self.assertIn('never reconnects',
                      reconnect.shortfall(settings(0, 0, 0), 60))

    def test_check_follows_spdk(self):
        for bad, field in (((0, 2, 0), reconnect.LOSS),
                           ((0, 0, 5), reconnect.LOSS),
                           ((30, 0, 10), reconnect.DELAY),
                           ((-1, 0, 0), reconnect.DELAY),
                           ((5, 10, 0), reconnect.DELAY),
                           ((30, 5, 40), reconnect.FAST_FAIL),
                           ((30, 5, 2), reconnect.FAST_FAIL),
                           ((-2, 1, 0), reconnect.LOSS),
                           ((30, '2', 10), reconnect.DELAY),
                           ((30, 2, True), reconnect.FAST_FAIL),
                           ((2 ** 31, 2, 10), reconnect.LOSS)):
            err = self.assertRaises(reconnect.Invalid, reconnect.check,
                                    settings(*bad))
            self.assertEqual(field, err.field, bad)
        for good in ((0, 0, 0), (-1, 1, 0), (30, 1, 30), (-1, 2, 100)):
            self.assertEqual(settings(*good),
                             reconnect.check(settings(*good)))
        self.assertRaises(reconnect.Invalid, reconnect.check, [60, 2, 10])
        self.assertRaises(reconnect.Invalid, reconnect.check, {})
        # Extra keys are not carried over.
        self.assertEqual(DEFAULTS, reconnect.check(dict(DEFAULTS, x=1)))

    def test_messages_name_what_the_caller_calls_them(self):
        err = self.assertRaises(reconnect.Invalid, reconnect.check,
                                settings(5, 2, 10),
                                {reconnect.FAST_FAIL: 'fast_option'})
        self.assertIn('fast_option (10) exceeds ctrlr_loss_timeout_sec (5)',
                      str(err))

    def test_option_defaults_are_the_rules(self):
        conf = cfg.ConfigOpts()
        options.register_opts(conf)
        conf([])
        self.assertEqual(DEFAULTS, reconnect.from_conf(conf.spdk_vhost))


class RecordTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.saved = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                  'spdk_tgt.json')

    def file(self):
        with open(host_settings.path(self.saved)) as src:
            return json.load(src)

    def test_record_replace_and_forget(self):
        self.assertIsNone(host_settings.record(self.saved, HOST, SUB,
                                               DEFAULTS))
        host_settings.record(self.saved, HOST, SUB2, OLD_DEFAULTS)
        host_settings.record(self.saved, HOST2, SUB, DEFAULTS)
        self.assertEqual({'hosts': {HOST: {SUB: DEFAULTS,
                                           SUB2: OLD_DEFAULTS},
                                    HOST2: {SUB: DEFAULTS}}}, self.file())
        self.assertEqual(self.file()['hosts'], host_settings.read(self.saved))
        self.assertEqual(DEFAULTS, host_settings.record(
            self.saved, HOST, SUB, OLD_DEFAULTS))
        self.assertEqual(OLD_DEFAULTS, host_settings.record(
            self.saved, HOST, SUB, None))
        host_settings.forget(self.saved, SUB, [HOST, HOST2])
        self.assertEqual({'hosts': {HOST: {SUB2: OLD_DEFAULTS}}},
                         self.file())
        host_settings.forget(self.saved, SUB2, [HOST])
        self.assertEqual({'hosts': {}}, self.file())

    def test_written_atomically_under_the_saved_config_lock(self):
        calls = []
        real_lock = saved_config.file_lock

        def lock(path):
            calls.append(('lock', path))
            return real_lock(path)

        def write(path, doc):
            calls.append(('write', path))
        self.useFixture(fixtures.MonkeyPatch(
            'spdk_vhost_core.saved_config.file_lock', lock))
        self.useFixture(fixtures.MonkeyPatch(
            'spdk_vhost_core.saved_config.write_atomic', write))
        host_settings.record(self.saved, HOST, SUB, DEFAULTS)
        self.assertEqual([('lock', self.saved),
                          ('write', self.saved + '.hosts.json')], calls)

    def test_nothing_to_change_writes_nothing(self):
        host_settings.record(self.saved, HOST, SUB, None)
        host_settings.forget(self.saved, SUB, [HOST])
        self.assertFalse(os.path.exists(host_settings.path(self.saved)))

    def test_no_saved_config_records_nothing(self):
        self.assertIsNone(host_settings.record('', HOST, SUB, DEFAULTS))
        host_settings.forget('', SUB, [HOST])
        self.assertEqual({}, host_settings.read(''))

    def test_unreadable_or_invalid_is_unknown(self):
        logger = self.useFixture(fixtures.FakeLogger())
        with open(host_settings.path(self.saved), 'w') as dst:
            dst.write('{not json')
        self.assertEqual({}, host_settings.read(self.saved))
        self.assertIn('every host counts as unknown', logger.output)
        with open(host_settings.path(self.saved), 'w') as dst:
            json.dump({'hosts': {HOST: [1], HOST2: {SUB: DEFAULTS}}}, dst)
        self.assertEqual({HOST2: {SUB: DEFAULTS}},
                         host_settings.read(self.saved))
        recorded = {HOST: {SUB: settings(30, 0, 10), SUB2: DEFAULTS}}
        self.assertIsNone(host_settings.settings_of(recorded, HOST, SUB))
        self.assertEqual(DEFAULTS,
                         host_settings.settings_of(recorded, HOST, SUB2))
        self.assertIsNone(host_settings.settings_of(recorded, HOST2, SUB2))


class FakeRpc(object):
    """The two RPCs the hosts check sends, answering ``connected``."""

    def __init__(self, connected):
        self.connected = connected

    def call(self, method, params=None):
        if method == 'nvmf_get_subsystems':
            return [{'nqn': 'nqn.2014-08.org.nvmexpress.discovery',
                     'subtype': 'Discovery'}] + [
                {'nqn': nqn, 'subtype': 'NVMe'} for nqn in self.connected]
        assert method == 'nvmf_subsystem_get_controllers', method
        return [{'hostnqn': host, 'cntlid': n} for n, host in
                enumerate(self.connected[params['nqn']])]


class HostsCheckTest(base.TestCase):
    """The upgrade's refusal, on a fake storage target."""

    def setUp(self):
        super().setUp()
        self.saved = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                  'spdk_tgt.json')
        self.said = []

    def upgrade(self, connected, app='nvmf_tgt', **kwargs):
        up = upgrade.Upgrade(self.saved + '.sock', self.saved, '/new',
                             pid=os.getpid(), say=self.said.append,
                             **kwargs)
        up.target.app = app
        up.client = FakeRpc(connected)
        return up

    def test_unknown_and_short_named_covered_not(self):
        host_settings.record(self.saved, HOST, SUB, OLD_DEFAULTS)
        host_settings.record(self.saved, HOST2, SUB, DEFAULTS)
        up = self.upgrade({SUB: [HOST, HOST2], SUB2: [HOST2]})
        err = self.assertRaises(spdk_exc.UpgradeError, up._check_hosts)
        self.assertIn(
            'would not ride out the 60 s this upgrade may keep the target '
            'away (--timeout 10): %s (ctrlr_loss_timeout_sec 60 < 62 s, '
            'fast_io_fail_timeout_sec 10 < 62 s on %s); %s (settings '
            'unknown on %s).' % (HOST, SUB, HOST2, SUB2), str(err))
        self.assertIn('nothing was stopped', str(err))

    def test_recorded_settings_covering_the_window_accepted(self):
        host_settings.record(self.saved, HOST, SUB, DEFAULTS)
        host_settings.record(self.saved, HOST, SUB2, settings(-1, 1, 0))
        self.upgrade({SUB: [HOST], SUB2: [HOST]})._check_hosts()
        self.assertEqual(['every connected NVMe-oF host rides out 60 s'],
                         self.said)

    def test_hosts_mirroring_a_copy_are_counted_not_refused(self):
        host_settings.record(self.saved, HOST, SUB, host_settings.MIRRORED)
        host_settings.record(self.saved, HOST2, SUB, host_settings.MIRRORED)
        host_settings.record(self.saved, HOST, SUB2, DEFAULTS)
        self.upgrade({SUB: [HOST, HOST2], SUB2: [HOST]})._check_hosts()
        self.assertEqual([
            '2 copies of replicated volumes here are mirrored by 2 hosts: '
            'they fail out of those mirrors for the upgrade (the guests go '
            'on, degraded) and are rebuilt after it by spdk-vhost-replicas '
            'repair or its watcher; upgrade one failure domain at a time',
            'every connected NVMe-oF host rides out 60 s'], self.said)
        # A single-copy volume's host on the same target is still checked.
        host_settings.record(self.saved, HOST, SUB2, OLD_DEFAULTS)
        self.assertRaises(spdk_exc.UpgradeError, self.upgrade(
            {SUB: [HOST], SUB2: [HOST]})._check_hosts)

    def test_the_window_follows_timeout(self):
        host_settings.record(self.saved, HOST, SUB, DEFAULTS)
        up = self.upgrade({SUB: [HOST]}, timeout=20)
        self.assertEqual(100, up.window())
        err = self.assertRaises(spdk_exc.UpgradeError, up._check_hosts)
        self.assertIn('fast_io_fail_timeout_sec 70 < 102 s', str(err))

    def test_force_compute_targets_and_no_hosts_pass(self):
        self.upgrade({SUB: [HOST]}, force=True)._check_hosts()
        self.upgrade({SUB: [HOST]}, app='vhost')._check_hosts()
        self.upgrade({SUB: []})._check_hosts()
        self.assertEqual([], self.said)

    def test_default_timeout(self):
        args = upgrade.parse_args(['--new-spdk-dir', '/new'])
        self.assertEqual(reconnect.UPGRADE_TIMEOUT, args.timeout)


class SlowTargetClient(object):
    """A vhost target that answers until it is stopped, then never."""

    target = 'unix:/slow'

    def __init__(self):
        self.up = True

    def spdk_get_version(self):
        return {'version': 'SPDK v26.05',
                'fields': {'major': 26, 'minor': 5, 'patch': 0}}

    def save_config(self):
        return {'subsystems': []}

    def close(self):
        pass

    def call(self, method, params=None):
        if not self.up:
            raise upgrade.exc.TargetUnreachable(method, message='loading')
        return []


class FailedRollbackTest(base.TestCase):
    """What a rollback that did not list every object in time says."""

    def run_upgrade(self, rollback_cmd):
        saved = os.path.join(self.useFixture(fixtures.TempDir()).path,
                             'spdk_tgt.json')
        self.useFixture(fixtures.MockPatch(
            'spdk_vhost_core.target_process.binary_version',
            return_value=(26, 5, 0)))
        up = upgrade.Upgrade(saved + '.sock', saved, '/new',
                             pid=os.getpid(), timeout=0.3, say=lambda m: 0)
        up.target.app = 'vhost'
        up.client = client = SlowTargetClient()
        started = []

        def start(tree):
            # The new build never answers; the old one, started again,
            # runs (still loading, say) or exits at once.
            cmd = ['sleep', '30'] if tree == '/new' else rollback_cmd
            up.target.process = subprocess.Popen(cmd)
            self.addCleanup(up.target.process.wait)
            self.addCleanup(up.target.process.kill)
            started.append(tree)

        def stop(timeout):
            client.up = False
            if up.target.process is not None:
                up.target.process.kill()
                up.target.process.wait()
        up.target.start = start
        up.target.stop = stop
        err = self.assertRaises(spdk_exc.RollbackFailed, up.run)
        self.assertEqual(['/new', up.target.tree], started)
        return str(err), up.target.process

    def test_previous_binary_still_loading_is_not_called_down(self):
        message, process = self.run_upgrade(['sleep', '30'])
        self.assertIn('the previous binary still runs (pid %d) but did '
                      'not list every object in time' % process.pid,
                      message)
        self.assertNotIn('down', message)

    def test_previous_binary_gone_is_down(self):
        message, _process = self.run_upgrade(['true'])
        self.assertIn('the target is down', message)
