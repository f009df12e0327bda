"""The spdk_dd helpers: what a sparse file needs, and spdk_dd's config."""

import json
import os
import stat

from cinder import exception
import fixtures
from oslo_config import cfg

from cinder_spdk_vhost import dd
from cinder_spdk_vhost import export
from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import options
from spdk_vhost_core import options as rpc_options
from tests import base
from tests.cinder.unit import fake_spdk

MIB = lvols.MIB


class DataClustersTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                 'image.raw')

    def write(self, extents, size):
        with open(self.path, 'wb') as out:
            for offset, length in extents:
                out.seek(offset)
                out.write(b'x' * length)
            out.truncate(size)

    def test_holes_need_nothing(self):
        self.write([], 64 * MIB)
        self.assertEqual(0, dd.data_clusters(self.path, MIB))

    def test_extents_counted_per_cluster(self):
        # One extent across a cluster boundary, one far out, one 4 KiB.
        self.write([(MIB - 4096, 8192), (40 * MIB, 4096)], 64 * MIB)
        self.assertEqual(3, dd.data_clusters(self.path, MIB))

    def test_short_write_refused(self):
        self.write([(0, 3 * MIB)], 8 * MIB)
        lvol = lvols.Lvol('u', 'lvs0/v', 'lvs0', 'v', 4096, 2048, False, [],
                          None, {}, allocated_clusters=2)
        err = self.assertRaises(exception.VolumeBackendAPIException,
                                dd.check_written, lvol, self.path, MIB)
        self.assertIn('2 of its 3 clusters', str(err))
        dd.check_written(lvol._replace(allocated_clusters=3), self.path,
                         MIB)
        self.assertRaises(exception.VolumeBackendAPIException,
                          dd.check_written, None, self.path, MIB)


class ConfigTest(base.TestCase):

    def test_keys_in_0600_files_named_in_the_config(self):
        workdir = self.useFixture(fixtures.TempDir()).path
        secrets = {'dhchap_key': 'host', 'dhchap_ctrlr_key': 'ctrlr'}
        config = dd._config({'name': 'import'}, secrets, workdir)
        json.dumps(config)
        keyring, bdev = config['subsystems']
        self.assertEqual('keyring', keyring['subsystem'])
        for entry in keyring['config']:
            path = entry['params']['path']
            self.assertEqual(0o600, stat.S_IMODE(os.stat(path).st_mode))
            with open(path) as src:
                self.assertEqual(secrets[entry['params']['name']],
                                 src.read())
        # Examine off first: a copy's RAID superblock stays bytes.
        options, attach = bdev['config']
        self.assertEqual(('bdev_set_options', {'bdev_auto_examine': False}),
                         (options['method'], options['params']))
        params = attach['params']
        self.assertEqual('dhchap_key', params['dhchap_key'])
        self.assertEqual('dhchap_ctrlr_key', params['dhchap_ctrlr_key'])

    def test_no_keys_no_keyring(self):
        config = dd._config({'name': 'import'}, {}, '/nonexistent')
        self.assertEqual(['bdev'], [s['subsystem']
                                    for s in config['subsystems']])


class ScratchNameTest(base.TestCase):

    def test_only_scratch_exports_of_this_prefix(self):
        conf = cfg.ConfigOpts()
        conf.register_opts(options.driver_opts)
        conf.register_opts(rpc_options.rpc_opts)
        exporter = export.NvmfExport(fake_spdk.FakeSpdk(), conf)
        self.assertEqual('tmp-dd-x', dd.scratch_name(
            exporter, 'nqn.2016-06.io.spdk:cinder:tmp-dd-x'))
        self.assertIsNone(dd.scratch_name(
            exporter, 'nqn.2016-06.io.spdk:cinder:volume-x'))
        self.assertIsNone(dd.scratch_name(
            exporter, 'nqn.2016-06.io.spdk:other:tmp-dd-x'))


class LibraryEnvTest(base.TestCase):
    """A build tree's spdk_dd gets its build/lib; others run as they are."""

    def test_build_tree(self):
        tree = self.useFixture(fixtures.TempDir()).path
        for sub in ('build/bin', 'build/lib'):
            os.makedirs(os.path.join(tree, sub))
        open(os.path.join(tree, 'build/lib/libspdk_event.so'), 'w').close()
        self.useFixture(fixtures.EnvironmentVariable('LD_LIBRARY_PATH',
                                                     '/opt/other'))
        env = dd._library_env(os.path.join(tree, 'build/bin/spdk_dd'))
        self.assertEqual(os.path.join(tree, 'build/lib') + ':/opt/other',
                         env['LD_LIBRARY_PATH'])

    def test_installed_or_on_path(self):
        self.assertIsNone(dd._library_env('spdk_dd'))
        self.assertIsNone(dd._library_env('/usr/local/bin/spdk_dd'))


class ReadLvolTest(base.TestCase):
    """Zero blocks made holes for a file something is made from only."""

    def test_holes_dug_only_when_asked(self):
        self.useFixture(fixtures.MockPatchObject(
            dd, 'scratch_export', return_value=({'name': 'x'}, {})))
        run = self.useFixture(fixtures.MockPatchObject(dd, '_run')).mock
        dig = self.useFixture(fixtures.MockPatchObject(
            dd.sparse, 'dig_holes')).mock
        dd.read_lvol(None, None, 'u', 'v', '/staging/v', 4 * MIB)
        dig.assert_called_once_with('/staging/v')
        dig.reset_mock()
        dd.read_lvol(None, None, 'u', 'v', '/staging/v', 4 * MIB,
                     holes=False)
        dig.assert_not_called()
        self.assertEqual(2, run.call_count)
