"""The image cache: volumes from one image are clones of one base lvol."""

import collections

from cinder import exception
import fixtures

from cinder_spdk_vhost import image_cache
from tests.cinder.functional import imaging
from tests.cinder.functional import test_images


class ImageCacheTest(test_images._DriverImageTest):

    def setUp(self):
        super().setUp()
        self.driver = self.make_driver(**self.driver_opts(
            spdk_image_cache_enabled=True))
        self.data = imaging.pattern('cached', test_images.IMAGE_LEN)
        self.image = self.add_image(self.data, 'qcow2')

    def counting(self):
        """A fixture counting the RPCs the driver sends, by method."""
        counts = collections.Counter()
        real = self.driver.client.call

        def call(client, name, params=None):
            counts[name] += 1
            return real(name, params)
        self.useFixture(fixtures.MonkeyPatch(
            'spdk_vhost_core.spdk_rpc.SpdkClient.call', call))
        return counts

    def cloned(self, image=None, size=1):
        volume = self.make_volume(size=size)
        update, done = self.driver.clone_image(
            self.ctxt, volume, None, image or self.image, self.glance)
        self.assertTrue(done)
        return volume

    def bases(self):
        return [n for n in self.lvol_names() if image_cache.is_base(n)]

    def parent(self, volume):
        return self.rpc('bdev_get_bdevs', {'name': 'lvs0/' + volume.name})[
            0]['driver_specific']['lvol'].get('base_snapshot')

    def test_second_volume_is_a_clone_without_copy(self):
        first = self.cloned()
        [base] = self.bases()
        self.assertEqual(image_cache.base_name(self.image), base)
        counts = self.counting()
        second = self.cloned(size=2)
        self.assertEqual(0, counts['bdev_aio_create'])
        self.assertEqual(0, counts['bdev_lvol_decouple_parent'])
        self.assertEqual(1, counts['bdev_lvol_clone'])
        self.assertEqual([base], self.bases())
        for volume in (first, second):
            self.assertEqual(base, self.parent(volume))
            self.check_volume(volume, self.data)
        self.assert_no_scratch()

    def test_base_deleted_with_last_clone(self):
        first, second = self.cloned(), self.cloned()
        self.driver.delete_volume(first)
        self.assertEqual(1, len(self.bases()))
        self.driver.delete_volume(second)
        self.assertEqual([], self.lvol_names())

    def test_base_kept_while_a_snapshot_needs_it(self):
        volume = self.cloned()
        snapshot = self.make_snapshot(volume)
        self.driver.create_snapshot(snapshot)
        self.driver.delete_volume(volume)
        self.assertEqual(1, len(self.bases()))
        self.driver.delete_snapshot(snapshot)
        self.assertEqual([], self.lvol_names())

    def test_changed_image_gets_a_new_base(self):
        self.cloned()
        changed = dict(self.image, checksum='0' * 32)
        self.cloned(image=changed)
        self.assertEqual(2, len(self.bases()))

    def test_count_limit_declines(self):
        self.driver = self.make_driver(**self.driver_opts(
            spdk_image_cache_enabled=True, spdk_image_cache_max_count=1))
        self.cloned()
        other = self.add_image(imaging.pattern('other', 4096))
        volume = self.make_volume()
        self.assertEqual((None, False), self.driver.clone_image(
            self.ctxt, volume, None, other, self.glance))
        self.assertEqual(1, len(self.bases()))
        self.assertNotIn(volume.name, self.lvol_names())

    def test_size_limit_declines(self):
        self.driver = self.make_driver(**self.driver_opts(
            spdk_image_cache_enabled=True, spdk_image_cache_max_size_gb=1))
        big = dict(self.image, id='big', virtual_size=2 * 1024 ** 3)
        volume = self.make_volume(size=2)
        self.assertEqual((None, False), self.driver.clone_image(
            self.ctxt, volume, None, big, self.glance))
        self.assertEqual([], self.lvol_names())

    def test_disabled_declines(self):
        self.driver = self.make_driver(**self.driver_opts(
            spdk_image_cache_enabled=False))
        self.assertEqual((None, False), self.driver.clone_image(
            self.ctxt, self.make_volume(), None, self.image, self.glance))

    def test_failed_clone_leaves_no_base(self):
        volume = self.make_volume()
        with self.failing('bdev_set_qos_limit'):
            vtype = self.make_type({'total_iops_sec': '1000'})
            volume.volume_type_id = vtype['id']
            volume.save()
            self.assertRaises(exception.VolumeBackendAPIException,
                              self.driver.clone_image, self.ctxt, volume,
                              None, self.image, self.glance)
        self.assertEqual([], self.lvol_names())
        self.assert_no_scratch()

    def test_upload_of_cached_volume(self):
        volume = self.cloned()
        meta = self.empty_image('qcow2')
        self.driver.copy_volume_to_image(self.ctxt, volume, self.glance,
                                         meta)
        got, _size = self.image_bytes(meta['id'], len(self.data), 'qcow2')
        self.assertEqual(self.data, got)
        self.assertEqual(image_cache.base_name(self.image),
                         self.parent(volume))
