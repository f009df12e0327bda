"""The lvol data plane of a real SPDK target, checked on real bytes.

What the drivers build on: thin lvols allocate only the clusters written,
snapshots freeze data while the lvol stays exported, clones read through
their snapshot, decouple and inflate keep the data when a parent goes,
an exported lvol grows online, and decoupling an esnap clone (an image
import) copies every cluster of its base and fails cleanly, changing
nothing, when the lvstore lacks room. Bytes go in and come out through
NVMe/TCP with ``spdk_dd`` (testbed/spdk_dd.py).
"""

import os

import fixtures

from testbed import spdk_dd
from testbed import spdk_target
from tests import base

MIB = 1024 * 1024
KIB4 = 4096
NO_SPACE = {'code': -32602, 'message': 'No space left on device'}


def fill(byte, length):
    return bytes([byte]) * length


class LvolDataTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(300, gentle=True))
        self.target = self.useFixture(spdk_target.SpdkTarget(
            app='spdk_tgt', name='storage'))
        self.target.aio_lvstore(size_mib=64)
        self.work = self.useFixture(fixtures.TempDir()).path
        self.dd = spdk_dd.NvmfDd(self.target, self.work)

    def create(self, name, mib=4, thin=True):
        self.target.rpc('bdev_lvol_create', {
            'lvol_name': name, 'size_in_mib': mib, 'lvs_name': 'lvs0',
            'thin_provision': thin})
        return 'lvs0/' + name

    def lvol(self, name):
        [bdev] = self.target.rpc('bdev_get_bdevs', {'name': name})
        return bdev['driver_specific']['lvol']

    def snapshot(self, name, snap):
        self.target.rpc('bdev_lvol_snapshot', {'lvol_name': name,
                                               'snapshot_name': snap})
        return 'lvs0/' + snap

    def free_clusters(self):
        [lvs] = self.target.rpc('bdev_lvol_get_lvstores',
                                {'lvs_name': 'lvs0'})
        return lvs['free_clusters']

    def test_thin_write_allocates_only_its_cluster(self):
        vol = self.create('vol')
        self.assertEqual(0, self.lvol(vol)['num_allocated_clusters'])

        self.dd.write(vol, 2 * MIB, fill(0x33, KIB4))

        self.assertEqual(1, self.lvol(vol)['num_allocated_clusters'])
        self.assertEqual(fill(0, KIB4) + fill(0x33, KIB4) + fill(0, KIB4),
                         self.dd.read(vol, 2 * MIB - KIB4, 3 * KIB4))

    def test_live_snapshot_freezes_data_and_clone_sees_it(self):
        vol = self.create('vol')
        self.dd.write(vol, 0, fill(0x11, 2 * KIB4))
        snap = self.snapshot(vol, 'snap')  # while exported

        self.dd.write(vol, 0, fill(0x22, KIB4))
        self.target.rpc('bdev_lvol_clone', {'snapshot_name': snap,
                                            'clone_name': 'clone'})

        self.assertEqual(fill(0x22, KIB4) + fill(0x11, KIB4),
                         self.dd.read(vol, 0, 2 * KIB4))
        self.assertEqual(fill(0x11, 2 * KIB4),
                         self.dd.read('lvs0/clone', 0, 2 * KIB4))
        self.assertEqual(0, self.lvol('lvs0/clone')[
            'num_allocated_clusters'])
        self.assertTrue(self.lvol(snap)['snapshot'])

    def test_decouple_then_inflate_keep_the_data(self):
        vol = self.create('vol')
        self.dd.write(vol, 0, fill(0x11, KIB4))
        snap1 = self.snapshot(vol, 'snap1')
        self.dd.write(vol, MIB, fill(0x22, KIB4))
        snap2 = self.snapshot(vol, 'snap2')
        self.dd.write(vol, 2 * MIB, fill(0x33, KIB4))

        self.target.rpc('bdev_lvol_decouple_parent', {'name': vol})
        self.assertEqual('snap1', self.lvol(vol)['base_snapshot'])
        self.target.rpc('bdev_lvol_delete', {'name': snap2})
        self.target.rpc('bdev_lvol_inflate', {'name': vol})
        self.assertNotIn('base_snapshot', self.lvol(vol))
        self.target.rpc('bdev_lvol_delete', {'name': snap1})

        data = self.dd.read(vol, 0, 2 * MIB + KIB4)
        self.assertEqual((0x11, 0x22, 0x33),
                         (data[0], data[MIB], data[2 * MIB]))

    def test_exported_lvol_grows_online(self):
        vol = self.create('vol')
        self.dd.write(vol, 0, fill(0x11, KIB4))

        self.target.rpc('bdev_lvol_resize', {'name': vol, 'size_in_mib': 8})
        self.dd.write(vol, 7 * MIB, fill(0x66, KIB4))

        self.assertEqual(fill(0, KIB4) + fill(0x66, KIB4),
                         self.dd.read(vol, 7 * MIB - KIB4, 2 * KIB4))
        self.assertEqual(fill(0x11, KIB4), self.dd.read(vol, 0, KIB4))


class EsnapDecoupleTest(base.TestCase):
    """An image import: an esnap clone of a file, decoupled from it."""

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(300, gentle=True))
        self.target = self.useFixture(spdk_target.SpdkTarget(
            app='spdk_tgt', name='storage'))
        self.target.aio_lvstore(size_mib=16)
        work = self.useFixture(fixtures.TempDir()).path
        image = os.path.join(work, 'image.raw')
        with open(image, 'wb') as out:
            out.write(fill(0xab, 6 * MIB))
        self.target.rpc('bdev_aio_create', {
            'name': 'img0', 'filename': image, 'block_size': KIB4,
            'readonly': True})
        self.target.rpc('bdev_lvol_clone_bdev', {
            'bdev': 'img0', 'lvs_name': 'lvs0', 'clone_name': 'fromimg'})
        # Never leave the image bdev gone under its clone: SPDK crashes.
        self.addCleanup(self.target.call, 'bdev_lvol_delete',
                        {'name': 'lvs0/fromimg'})
        self.dd = spdk_dd.NvmfDd(self.target, work)

    def free_clusters(self):
        [lvs] = self.target.rpc('bdev_lvol_get_lvstores',
                                {'lvs_name': 'lvs0'})
        return lvs['free_clusters']

    def test_decouple_takes_every_base_cluster(self):
        free = self.free_clusters()
        self.target.rpc('bdev_lvol_decouple_parent',
                        {'name': 'lvs0/fromimg'})
        self.assertEqual(free - 6, self.free_clusters())
        self.assertEqual(fill(0xab, KIB4),
                         self.dd.read('lvs0/fromimg', 5 * MIB, KIB4))

    def test_decouple_without_room_fails_and_changes_nothing(self):
        filler = self.free_clusters() - 3
        self.target.rpc('bdev_lvol_create', {
            'lvol_name': 'filler', 'size_in_mib': filler,
            'lvs_name': 'lvs0', 'thin_provision': False})

        response = self.target.call('bdev_lvol_decouple_parent',
                                    {'name': 'lvs0/fromimg'})

        self.assertEqual(NO_SPACE, response.get('error'))
        [lvol] = self.target.rpc('bdev_get_bdevs', {'name': 'lvs0/fromimg'})
        self.assertTrue(lvol['driver_specific']['lvol']['esnap_clone'])
        self.assertEqual(3, self.free_clusters())
        self.assertEqual(fill(0xab, KIB4),
                         self.dd.read('lvs0/fromimg', 0, KIB4))
