"""spdk-vhost-copies: what it prints and exits with, and what it refuses.

The comparison itself runs on real SPDK in
``tests/cinder/functional/test_replicated.py`` (``CompareTest``).
"""

import io
import types

from cinder import exception
from oslotest import base

from cinder_spdk_vhost import copies_cmd
from cinder_spdk_vhost import replica_compare

MIB = 1024 * 1024
VOLUME = types.SimpleNamespace(id='6a1c7b8e-0d2f-4c3e-9a51-0a2b3c4d5e6f',
                               host='ctl@spdk-a#lvs0')


def report(differ=(), stale=()):
    return replica_compare.Report(
        ['storage-a', 'storage-b (spdk-b)'], list(stale), 16, 64 * MIB,
        list(differ), 2 * (1024 + 1) * MIB, 12.5)


class FakeCompare(object):

    def __init__(self, found):
        self.found = found
        self.calls = []

    def report(self, volume, region_mib):
        self.calls.append(('report', volume.id, region_mib))
        return self.found

    def renew(self, volume, where):
        self.calls.append(('renew', volume.id, where))


class CopiesCommandTest(base.BaseTestCase):

    def run_command(self, compare, *argv):
        out = io.StringIO()
        code = copies_cmd.run(compare, VOLUME,
                              copies_cmd.parse_args(list(argv)), out)
        return code, out.getvalue()

    def test_copies_that_agree(self):
        compare = FakeCompare(report())
        code, out = self.run_command(compare, '--backend', 'spdk-a',
                                     'compare', VOLUME.id)
        self.assertEqual(0, code)
        self.assertEqual(
            'copies: storage-a, storage-b (spdk-b)\n'
            'superblocks: every copy in sync\n'
            '16 regions of 64 MiB compared, 0 differ\n'
            'read 2.0 GiB in 12.5 s (6.2 s per GiB)\n', out)
        self.assertEqual([('report', VOLUME.id, 64)], compare.calls)

    def test_a_region_that_differs(self):
        differ = [(128 * MIB, {'storage-a': 'a' * 64,
                               'storage-b (spdk-b)': 'b' * 64})]
        code, out = self.run_command(FakeCompare(report(differ)),
                                     '--backend', 'spdk-a', 'compare',
                                     VOLUME.id, '--region-mib', '16')
        self.assertEqual(1, code)
        self.assertIn('  at 128 MiB: storage-a aaaaaaaaaaaaaaaa, '
                      'storage-b (spdk-b) bbbbbbbbbbbbbbbb\n', out)

    def test_a_stale_copy(self):
        code, out = self.run_command(
            FakeCompare(report(stale=['storage-b (spdk-b)'])),
            '--backend', 'spdk-a', 'compare', VOLUME.id)
        self.assertEqual(1, code)
        self.assertIn('superblocks: stale: storage-b (spdk-b)\n', out)

    def test_renew(self):
        compare = FakeCompare(None)
        code, out = self.run_command(compare, '--backend', 'spdk-a', 'renew',
                                     VOLUME.id, '--copy', 'storage-b (spdk-b)')
        self.assertEqual(0, code)
        self.assertEqual([('renew', VOLUME.id, 'storage-b (spdk-b)')],
                         compare.calls)
        self.assertIn('rebuilt by the next mirror', out)

    def test_a_volume_of_another_backend(self):
        copies_cmd.check_backend(VOLUME, 'spdk-a')
        err = self.assertRaises(exception.InvalidInput,
                                copies_cmd.check_backend, VOLUME, 'spdk-b')
        self.assertIn('not on backend spdk-b', str(err))

    def test_renew_needs_the_copy(self):
        self.assertRaises(SystemExit, copies_cmd.parse_args,
                          ['--backend', 'spdk-a', 'renew', VOLUME.id])


class RegionTest(base.BaseTestCase):

    def test_regions_of_no_size_refused(self):
        compare = replica_compare.Compare(types.SimpleNamespace(pools=None))
        err = self.assertRaises(exception.InvalidInput, compare.report,
                                VOLUME, 0)
        self.assertIn('regions of 0 MiB', str(err))
