"""The upgrade command's parts that need no SPDK target."""

import os
import socket
import stat

import fixtures

from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import spdk_version
from spdk_vhost_core import target_inventory
from spdk_vhost_core import target_process
from tests import base

BEFORE = {'vhost controllers': {'a.vhost': {'bdev': 'lvs/a',
                                            'cpumask': '0x1'}},
          'QoS limits': {'lvs/a': {'rw_ios_per_sec': 1000}}}


class DifferencesTest(base.TestCase):

    def test_same_is_nothing(self):
        self.assertEqual([], target_inventory.differences(BEFORE, BEFORE))

    def test_missing_changed_new_and_gone_kinds_named(self):
        after = {'vhost controllers': {'b.vhost': {'bdev': 'lvs/b',
                                                   'cpumask': '0x1'}}}
        self.assertEqual(
            ['vhost controllers: a.vhost missing',
             'vhost controllers: b.vhost is new',
             'QoS limits: the target no longer lists them'],
            target_inventory.differences(BEFORE, after))
        after = dict(BEFORE, **{'QoS limits': {
            'lvs/a': {'rw_ios_per_sec': 2000}}})
        [problem] = target_inventory.differences(BEFORE, after)
        self.assertIn('QoS limits: lvs/a is', problem)


class ArgumentsTest(base.TestCase):

    def test_json_replaced_by_the_saved_config(self):
        self.assertEqual(
            ['-m', '0x1', '-S', '/v', '--json', '/saved.json'],
            target_process._with_json(
                ['-m', '0x1', '--json', '/old.json', '-S', '/v'],
                '/saved.json'))
        self.assertEqual(['-m', '0x1', '--json', '/s.json'],
                         target_process._with_json(['-m', '0x1'], '/s.json'))


class BinaryVersionTest(base.TestCase):

    def _tree(self, output):
        tree = self.useFixture(fixtures.TempDir()).path
        os.makedirs(os.path.join(tree, 'build', 'bin'))
        path = os.path.join(tree, 'build', 'bin', 'vhost')
        with open(path, 'w') as script:
            script.write('#!/bin/sh\necho "%s"\n' % output)
        os.chmod(path, stat.S_IRWXU)
        return tree

    def test_release_parsed(self):
        self.assertEqual((26, 1, 0), target_process.binary_version(
            'vhost', self._tree('SPDK v26.01')))
        version = target_process.binary_version(
            'vhost', self._tree('SPDK v26.05.1-pre'))
        self.assertEqual((26, 5, 1), version)
        self.assertTrue(spdk_version.is_supported(version))

    def test_not_spdk_refused(self):
        err = self.assertRaises(spdk_exc.UpgradeError,
                                target_process.binary_version,
                                'vhost', self._tree('hello'))
        self.assertIn('not an SPDK release', str(err))

    def test_missing_binary_refused(self):
        tree = self.useFixture(fixtures.TempDir()).path
        self.assertRaises(spdk_exc.UpgradeError, target_process.binary_version,
                          'vhost', tree)


class SocketOwnerTest(base.TestCase):

    def test_listener_found_and_nobody(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 's')
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(path)
            sock.listen(1)
            self.assertEqual(os.getpid(), target_process.socket_owner(path))
        self.assertIsNone(target_process.socket_owner(path + '.none'))


class SupportedTest(base.TestCase):

    def test_labels(self):
        self.assertEqual('v26.01, v26.05', spdk_version.supported_text())
        self.assertIsNone(spdk_version.parse({'version': 'SPDK v26.05'}))
        self.assertFalse(spdk_version.is_supported(None))
