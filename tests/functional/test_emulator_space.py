"""Emulated lvstore space: copying data into a thin lvol needs free clusters.

SPDK's decouple_parent allocates every cluster the parent holds that the
lvol does not; on a full lvstore it fails with ENOSPC and changes nothing.
"""

import os

import fixtures

from tests import base
from tests.emulator import fixture as emulator_fixture

MIB = 1024 * 1024
NO_SPACE = {'code': -32602, 'message': 'No space left on device'}


class DecoupleSpaceTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(120, gentle=True))
        self.target = self.useFixture(emulator_fixture.EmulatorFixture(
            use_real=False))
        work = self.useFixture(fixtures.TempDir()).path
        # 16 MiB of 1 MiB clusters; some go to lvstore metadata.
        self.ok('bdev_malloc_create', name='Malloc0', num_blocks=32768,
                block_size=512)
        self.ok('bdev_lvol_create_lvstore', bdev_name='Malloc0',
                lvs_name='lvs0', cluster_sz=MIB)
        self.image = os.path.join(work, 'image.raw')
        with open(self.image, 'wb') as image:
            image.write(b'\xab' * (6 * MIB))
        self.ok('bdev_aio_create', name='img0', filename=self.image,
                block_size=512, readonly=True)
        self.ok('bdev_lvol_clone_bdev', bdev='img0', lvs_name='lvs0',
                clone_name='fromimg')

    def ok(self, method, **params):
        response = self.target.call(method, params)
        self.assertNotIn('error', response, method)
        return response['result']

    def free_clusters(self):
        [lvs] = self.ok('bdev_lvol_get_lvstores', lvs_name='lvs0')
        return lvs['free_clusters']

    def test_decouple_takes_the_base_clusters(self):
        free = self.free_clusters()
        self.assertTrue(self.ok('bdev_lvol_decouple_parent',
                                name='lvs0/fromimg'))
        self.assertEqual(free - 6, self.free_clusters())

    def test_decouple_without_room_fails_and_changes_nothing(self):
        filler = self.free_clusters() - 3
        self.ok('bdev_lvol_create', lvol_name='filler', size_in_mib=filler,
                lvs_name='lvs0', thin_provision=False)
        response = self.target.call('bdev_lvol_decouple_parent',
                                    {'name': 'lvs0/fromimg'})
        self.assertEqual(NO_SPACE, response.get('error'))
        [lvol] = self.ok('bdev_get_bdevs', name='lvs0/fromimg')
        self.assertTrue(lvol['driver_specific']['lvol']['esnap_clone'])
        self.assertEqual(3, self.free_clusters())
