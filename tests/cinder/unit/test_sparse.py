"""sparse: data extents of real sparse files, and shifted copies."""

import os

import fixtures
import testtools

from cinder_spdk_vhost import sparse

MIB = 1024 * 1024


class SparseTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path

    def make(self, name, size, writes):
        """A sparse file of ``size`` bytes with ``writes`` {offset: data}."""
        path = os.path.join(self.dir, name)
        with open(path, 'wb') as out:
            out.truncate(size)
            for offset, data in writes.items():
                out.seek(offset)
                out.write(data)
        return path

    def extents(self, path, *bounds):
        with open(path, 'rb') as src:
            return list(sparse.extents(src.fileno(), *bounds))

    def read(self, path):
        with open(path, 'rb') as src:
            return src.read()

    def test_extents_of_data_and_holes(self):
        path = self.make('f', 8 * MIB, {MIB: b'a' * MIB, 5 * MIB: b'b'})
        found = self.extents(path)
        # File systems allocate whole blocks: the second extent is the
        # block holding b'b'.
        self.assertEqual((MIB, 2 * MIB), found[0])
        self.assertEqual(2, len(found))
        self.assertLessEqual(found[1][0], 5 * MIB)
        self.assertGreater(found[1][1], 5 * MIB)
        # Bounds cut extents.
        self.assertEqual([(MIB + 10, 2 * MIB)],
                         self.extents(path, MIB + 10, 3 * MIB))
        self.assertEqual([], self.extents(path, 2 * MIB, 4 * MIB))
        self.assertEqual([], self.extents(self.make('h', MIB, {})))

    def test_shifted_copy_moves_data_and_keeps_holes(self):
        src = self.make('src', 4 * MIB, {0: b'head', MIB: b'x' * MIB,
                                         3 * MIB: b'tail'})
        dst = os.path.join(self.dir, 'dst')
        # Out: skip the first MiB (a replicated copy's superblock room).
        sparse.shifted_copy(src, dst, MIB, 0, 3 * MIB)
        data = self.read(dst)
        self.assertEqual(3 * MIB, len(data))
        self.assertEqual(b'x' * MIB, data[:MIB])
        self.assertEqual(b'tail', data[2 * MIB:2 * MIB + 4])
        self.assertEqual([(0, MIB)], self.extents(dst, 0, 2 * MIB))
        # Back: leave that room zero; what is past the size is cut.
        back = os.path.join(self.dir, 'back')
        sparse.shifted_copy(dst, back, 0, MIB, 3 * MIB)
        data = self.read(back)
        self.assertEqual(3 * MIB, len(data))
        self.assertEqual(bytes(MIB), data[:MIB])
        self.assertEqual(b'x' * MIB, data[MIB:2 * MIB])
        self.assertEqual([], self.extents(back, 0, MIB))
        self.assertEqual(0o600, os.stat(back).st_mode & 0o777)
