"""The saved config: replay order, atomic replacement, no-op when off,
a lock every service can take, and the checks of its path at start."""

import json
import os
import stat
import subprocess
import sys

import fixtures
from oslo_config import cfg

from os_brick_connector import connector_errors as errors
from os_brick_connector import controller_saver
from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import options
from spdk_vhost_core import saved_config
from spdk_vhost_core import spdk_rpc_export
from spdk_vhost_core import volume_bdev
from tests import base

QOS = {'method': 'bdev_set_qos_limit',
       'params': {'name': 'lvol-uuid', 'rw_ios_per_sec': 1000}}
AIO = {'method': 'bdev_aio_create', 'params': {'name': 'base0'}}
EXAMINE = {'method': 'bdev_wait_for_examine'}
VHOST = {'method': 'vhost_create_blk_controller',
         'params': {'ctrlr': 'vhost-a', 'dev_name': 'lvol-uuid'}}


def document(bdev_config):
    return {'subsystems': [
        {'subsystem': 'bdev', 'config': bdev_config},
        {'subsystem': 'scsi', 'config': None},
        {'subsystem': 'vhost_blk', 'config': [VHOST]}]}


class FakeClient(spdk_rpc_export.VhostMethods):
    """Answers save_config with a given document, or fails."""

    target = 'unix:/fake'

    def __init__(self, doc=None, error=None):
        self.doc = doc
        self.error = error
        self.read = []  # subsystems read one by one

    def save_config(self):
        if self.error is not None:
            raise self.error
        return json.loads(json.dumps(self.doc))

    def framework_get_config(self, name):
        self.read.append(name)
        for item in self.save_config()['subsystems']:
            if item['subsystem'] == name:
                return item['config']
        raise spdk_exc.NotFound('no subsystem %s' % name)

    def vhost_get_controllers(self, name):
        for entry in self.doc['subsystems'][2]['config']:
            if entry['params']['ctrlr'] == name:
                return [{'ctrlr': name, 'socket': '/s/' + name}]
        raise spdk_exc.NotFound('vhost_get_controllers')


class TestSavedConfig(base.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.dir, 'spdk_tgt.json')

    def test_qos_is_replayed_after_examine(self):
        ordered = saved_config.replay_order(document([QOS, AIO, EXAMINE]))
        self.assertEqual([AIO, EXAMINE, QOS],
                         ordered['subsystems'][0]['config'])
        self.assertIsNone(ordered['subsystems'][1]['config'])

    def test_examine_is_added_when_missing(self):
        ordered = saved_config.replay_order(document([AIO]))
        self.assertEqual([AIO, EXAMINE], ordered['subsystems'][0]['config'])

    def test_save_replaces_the_file_whole(self):
        with open(self.path, 'w') as out:
            out.write('old')
        saver = saved_config.ConfigSaver(FakeClient(document([AIO])),
                                         self.path)
        doc = saver.save()
        with open(self.path) as src:
            self.assertEqual(doc, json.load(src))
        self.assertEqual(['vhost-a'], saved_config.names(
            doc, 'vhost_create_blk_controller', 'ctrlr'))
        self.assertEqual(0o640, stat.S_IMODE(os.stat(self.path).st_mode))
        self.assertEqual(['spdk_tgt.json', 'spdk_tgt.json.lock'],
                         sorted(os.listdir(self.dir)))

    def test_failed_save_keeps_the_old_file(self):
        with open(self.path, 'w') as out:
            out.write('old')
        saver = saved_config.ConfigSaver(FakeClient(error=spdk_exc.Timeout(
            'framework_get_config')), self.path)
        self.assertRaises(spdk_exc.ConfigNotSaved, saver.save)
        with open(self.path) as src:
            self.assertEqual('old', src.read())

    def test_unwritable_directory_is_a_clear_error(self):
        saver = saved_config.ConfigSaver(
            FakeClient(document([])), os.path.join(self.dir, 'no', 'f'))
        err = self.assertRaises(spdk_exc.ConfigNotSaved, saver.save)
        self.assertIn(os.path.join(self.dir, 'no', 'f'), str(err))

    def test_transient_entries_are_left_out(self):
        saver = saved_config.ConfigSaver(
            FakeClient(document([AIO, QOS])), self.path,
            transient=lambda entry: entry['method'] == 'bdev_aio_create')
        self.assertEqual([EXAMINE, QOS],
                         saver.save()['subsystems'][0]['config'])

    def test_changed_subsystems_alone_are_read_again(self):
        saved_config.ConfigSaver(FakeClient(document([AIO])),
                                 self.path).save()
        client = FakeClient(document([AIO, QOS]))
        client.doc['subsystems'][2]['config'] = []  # not read: kept
        doc = saved_config.ConfigSaver(client, self.path).save(('bdev',))
        self.assertEqual(['bdev'], client.read)
        self.assertEqual([AIO, EXAMINE, QOS], doc['subsystems'][0]['config'])
        self.assertEqual([VHOST], doc['subsystems'][2]['config'])
        with open(self.path) as src:
            self.assertEqual(doc, json.load(src))

    def _controller_saver(self, client):
        saved_config.ConfigSaver(FakeClient(document([AIO])),
                                 self.path).save()
        return controller_saver.ControllerSaver(
            saved_config.ConfigSaver(client, self.path))

    def saved(self):
        with open(self.path) as src:
            return json.load(src)

    def test_controller_save_edits_its_entries_in(self):
        """An attach writes what it made, reads nothing, checks the one."""
        client = FakeClient(document([AIO]))
        saver = self._controller_saver(client)
        layer = volume_bdev.config_entry('vol-a', 'lvol-uuid')
        entries = controller_saver.controller_entries(
            'vhost-a', 'vol-a', 2, False, coalescing=(50, 1000))
        self.assertEqual('4', entries[0]['params']['cpumask'])
        ctrl = saver.save_with('vhost-a', entries, layer)
        saver.save_with('vhost-a', entries, layer)  # a retry adds it once
        self.assertEqual('/s/vhost-a', ctrl['socket'])
        self.assertEqual([], client.read)
        doc = self.saved()
        # Before examine, as SPDK saves a raid: it completes when the
        # lvol appears.
        self.assertEqual([AIO, layer, EXAMINE],
                         doc['subsystems'][0]['config'])
        self.assertEqual(entries, doc['subsystems'][2]['config'])
        # A detach removes both the same way, and asks the target for
        # the controller: gone.
        client.doc['subsystems'][2]['config'] = []
        saver.until_gone('vhost-a', lambda: (True, layer))
        doc = self.saved()
        self.assertEqual([AIO, EXAMINE], doc['subsystems'][0]['config'])
        self.assertEqual([], doc['subsystems'][2]['config'])
        self.assertEqual([], client.read)

    def test_controller_the_target_lost_is_reported(self):
        client = FakeClient(document([AIO]))
        client.doc['subsystems'][2]['config'] = []  # restarted without it
        saver = self._controller_saver(client)
        entries = controller_saver.controller_entries('vhost-a', 'v', 0,
                                                      False)
        self.assertRaises(errors.TargetRestarted, saver.save_with,
                          'vhost-a', entries, None)
        # A detach whose controller comes back each time gives up.
        client.doc['subsystems'][2]['config'] = [VHOST]
        deletes = []
        self.assertRaises(errors.TargetRestarted, saver.until_gone,
                          'vhost-a', lambda: deletes.append(1) or (True,
                                                                   None))
        self.assertEqual(controller_saver.ControllerSaver.rounds,
                         len(deletes))

    def test_controller_save_without_entry_reads_bdev_too(self):
        client = FakeClient(document([AIO, QOS]))
        saver = self._controller_saver(client)
        saver.save_with('vhost-a', controller_saver.controller_entries(
            'vhost-a', 'lvol-uuid', 0, False))
        self.assertEqual(['bdev'], client.read)

    def test_whole_save_without_a_file_or_the_subsystem(self):
        client = FakeClient(document([AIO]))
        saver = saved_config.ConfigSaver(client, self.path)
        saver.save(('bdev',))  # no file yet
        self.assertEqual([], client.read)
        self.assertEqual(document([AIO, EXAMINE]),
                         saver.save(('bdev', 'nvmf')))  # none saved
        self.assertEqual([], client.read)

    def test_disabled_saver_does_nothing(self):
        saver = saved_config.ConfigSaver(FakeClient(error=AssertionError()),
                                         None)
        self.assertIsNone(saver.save())
        self.assertEqual([], os.listdir(self.dir))


def as_nobody(test, code, *args):
    """Run Python ``code`` as user nobody (needs root to switch user).

    How a service other than the one that made a file sees it.
    """
    if os.getuid() != 0:
        test.skipTest('needs root to run a check as another user')
    # Let nobody reach the test's temp dirs (made 0700), as a service's
    # user reaches /var/lib/spdk.
    path = args[0]
    while path != os.path.dirname(path):
        path = os.path.dirname(path)
        mode = os.stat(path).st_mode
        if not mode & stat.S_IXOTH:
            os.chmod(path, stat.S_IMODE(mode) | stat.S_IXOTH)
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    return subprocess.run(
        ['setpriv', '--reuid=nobody', '--regid=nogroup', '--clear-groups',
         sys.executable, '-c', code] + list(args),
        capture_output=True, text=True, timeout=60, cwd=root,
        env=dict(os.environ, PYTHONPATH=root))


class TestLockFile(base.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.dir, 'spdk_tgt.json')

    def test_lock_made_by_another_service(self):
        # nova-compute made the lock (mode 0644 under its umask 022);
        # cinder-volume, another user, must still take it.
        os.chmod(self.dir, 0o755)
        with open(self.path + '.lock', 'w'):
            pass
        os.chmod(self.path + '.lock', 0o644)
        result = as_nobody(
            self, 'import sys\n'
            'from spdk_vhost_core import saved_config\n'
            'with saved_config.file_lock(sys.argv[1]):\n'
            '    print("locked")\n', self.path)
        self.assertEqual('', result.stderr)
        self.assertEqual('locked\n', result.stdout)


class TestSavedConfigPath(base.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.dir, 'spdk_tgt.json')

    def test_on_by_default_and_off_when_empty(self):
        conf = cfg.ConfigOpts()
        conf.register_opts(options.rpc_opts)
        conf([])
        self.assertEqual('/var/lib/spdk/spdk_tgt.json',
                         conf.spdk_saved_config)
        ini = os.path.join(self.dir, 'off.conf')
        with open(ini, 'w') as out:
            out.write('[DEFAULT]\nspdk_saved_config =\n')
        conf(['--config-file', ini])
        saver = saved_config.ConfigSaver.from_conf(
            FakeClient(error=AssertionError()), conf)
        self.assertFalse(saver.enabled)
        self.assertIsNone(saved_config.path_problem(conf.spdk_saved_config))

    def test_usable_path(self):
        self.assertIsNone(saved_config.path_problem(self.path))

    def test_missing_directory_says_how_to_fix(self):
        path = os.path.join(self.dir, 'spdk', 'spdk_tgt.json')
        problem = saved_config.path_problem(path)
        self.assertIn('directory %s does not exist' % os.path.dirname(path),
                      problem)
        self.assertIn('--json', problem)
        self.assertIn('to nothing to turn saving off', problem)

    def test_relative_path(self):
        self.assertIn('not an absolute path',
                      saved_config.path_problem('spdk_tgt.json'))

    def test_directory_in_the_way(self):
        os.mkdir(self.path)
        self.assertIn('not a regular file',
                      saved_config.path_problem(self.path))

    def test_unwritable_directory(self):
        os.chmod(self.dir, 0o755)
        result = as_nobody(
            self, 'import sys\n'
            'from spdk_vhost_core import saved_config\n'
            'print(saved_config.path_problem(sys.argv[1]))\n', self.path)
        self.assertEqual('', result.stderr)
        self.assertIn('directory %s is not writable by nobody' % self.dir,
                      result.stdout)


# Two green threads of an eventlet process (cinder-volume) taking the
# lock: the first yields while holding it, the second must wait for it
# instead of blocking the whole process in flock.
_GREEN_SCRIPT = '''
import eventlet
eventlet.monkey_patch()
import sys
from spdk_vhost_core import saved_config
from spdk_vhost_core import volume_bdev
order = []

def save(name, hold):
    with saved_config.file_lock(sys.argv[1]):
        order.append(name)
        eventlet.sleep(hold)

first = eventlet.spawn(save, 'first', 0.5)
eventlet.sleep(0.1)
second = eventlet.spawn(save, 'second', 0)
first.wait()
second.wait()
print(','.join(order))
'''


class GreenThreadLockTest(base.TestCase):

    def test_green_threads_queue_instead_of_deadlocking(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'spdk.json')
        result = subprocess.run(
            [sys.executable, '-c', _GREEN_SCRIPT, path],
            capture_output=True, text=True, timeout=60,
            cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                os.path.abspath(__file__)))))
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertEqual('first,second', result.stdout.strip())
