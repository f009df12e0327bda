"""The SPDK patches the build applies (``tools/spdk-patches/``).

Each is meant to go upstream as is: a subject in SPDK's style
(``component: what it does``), a message that says why, and a unit test
in SPDK's own suite beside the fix. The built trees the suite runs on
must carry them.
"""

import glob
import os
import re
import shutil
import subprocess

import fixtures

from tests import base

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PATCH_DIR = os.path.join(REPO, 'tools', 'spdk-patches')
SUBJECT = re.compile(r'^Subject: \[PATCH\] [a-z0-9_/]+: \S.*$', re.M)
CHANGED = re.compile(r'^\+\+\+ b/(\S+)$', re.M)


def patches():
    return sorted(glob.glob(os.path.join(PATCH_DIR, '*', '*.patch')))


def read(path):
    with open(path) as src:
        return src.read()


class TestPatches(base.TestCase):

    def test_each_patch_is_ready_for_upstream(self):
        self.assertTrue(patches())
        for path in patches():
            text = read(path)
            message, _sep, diff = text.partition('\n---\n')
            self.assertRegex(message, SUBJECT, path)
            self.assertGreater(len(message.splitlines()), 8, path)
            self.assertIn('Signed-off-by:', message, path)
            files = CHANGED.findall(diff)
            self.assertTrue([f for f in files if f.startswith('module/')
                             or f.startswith('lib/')], path)
            self.assertTrue([f for f in files if f.startswith('test/unit/')
                             and f.endswith('_ut.c')], path)
            self.assertNotIn(REPO, text)

    def test_versions_are_supported_releases(self):
        from spdk_vhost_core import spdk_version
        supported = {'%d.%02d' % release
                     for release in spdk_version.SUPPORTED}
        for path in patches():
            self.assertIn(os.path.basename(os.path.dirname(path)),
                          supported, path)

    def test_built_trees_carry_them(self):
        trees = {name[len('SPDK_DIR_'):].replace('_', '.'): tree
                 for name, tree in os.environ.items()
                 if name.startswith('SPDK_DIR_') and tree}
        if not trees:
            self.skipTest('no SPDK_DIR_<version> (tools/run-tests.sh sets '
                          'them to the trees tools/build-spdk.sh built)')
        for version, tree in trees.items():
            self.assertReversible(tree, sorted(glob.glob(
                os.path.join(PATCH_DIR, version, '*.patch'))))

    def assertReversible(self, tree, paths):
        """Applied: ``paths`` undone last first, on a copy of their files.

        One by one on the tree they need not undo: a later patch may
        change the lines around an earlier one's.
        """
        scratch = self.useFixture(fixtures.TempDir()).path
        for name in {name for path in paths
                     for name in CHANGED.findall(read(path))}:
            os.makedirs(os.path.dirname(os.path.join(scratch, name)),
                        exist_ok=True)
            shutil.copy(os.path.join(tree, name), os.path.join(scratch, name))
        for path in reversed(paths):
            done = subprocess.run(
                ['patch', '-d', scratch, '-p1', '-R', '--force', '--quiet',
                 '-i', path], capture_output=True, text=True)
            self.assertEqual(0, done.returncode,
                             '%s on %s: %s' % (path, tree, done.stdout))
