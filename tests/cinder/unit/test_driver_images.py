"""The image methods of image_ops.ImageOps, against FakeSpdk."""

from cinder import exception

from cinder_spdk_vhost import image_cache
from cinder_spdk_vhost import lvols
from tests.cinder.unit import driver_base as dbase

MIB = dbase.MIB


class ImageToVolumeTest(dbase.ImageTestCase):

    def test_image_replaces_the_empty_lvol(self):
        meta = self.image(size=3 * MIB - 100)
        volume = self.volume(size=1, vtype=self.make_type(
            {'total_iops_sec': '1000'}))
        old_uuid = self.fake.lvol(self.alias(volume))['uuid']
        self.driver.copy_image_to_volume(self.ctxt, volume, self.glance,
                                         meta['id'])
        lvol = self.fake.lvol(self.alias(volume))
        self.assertNotEqual(old_uuid, lvol['uuid'])
        # Decoupled from the image file, grown to the volume, thin, QoS.
        self.assertEqual((None, None, 1024 * MIB, True, 1000),
                         (lvol['parent'], lvol['esnap'], lvol['size'],
                          lvol['thin'], lvol['qos']['rw_ios_per_sec']))
        self.assertEqual([volume.name], self.names())
        self.assertEqual({}, self.fake.aio)
        self.assertEqual([], self.staged())

    def test_thick_volume_inflated(self):
        drv = self.make_driver(spdk_thin_provision=False)
        volume = self.make_volume()
        drv.create_volume(volume)
        drv.copy_image_to_volume(self.ctxt, volume, self.glance,
                                 self.image()['id'])
        self.assertFalse(self.fake.lvol(self.alias(volume))['thin'])

    def test_exported_volume_refused(self):
        volume = self.volume()
        self.fake.add_controller('vhost.0', self.alias(volume))
        self.assertRaises(exception.VolumeIsBusy,
                          self.driver.copy_image_to_volume, self.ctxt,
                          volume, self.glance, self.image()['id'])
        self.assertEqual([], self.fetched)


class VolumeToImageTest(dbase.ImageTestCase):

    def test_volume_copied_to_a_file_then_uploaded(self):
        volume = self.volume(size=1)
        before = self.fake.state()
        meta = self.image()
        self.driver.copy_volume_to_image(self.ctxt, volume, self.glance,
                                         meta)
        # A sparse volume-sized file (the fake moves no data).
        self.assertEqual(1024 * MIB, self.uploaded[meta['id']][0])
        self.assertEqual(before, self.fake.state())
        self.assertEqual([], self.staged())

    def test_volume_with_parent_is_flattened_first(self):
        src = self.volume()
        volume = self.make_volume()
        self.driver.create_cloned_volume(volume, src)
        before = self.fake.state()
        self.driver.copy_volume_to_image(self.ctxt, volume, self.glance,
                                         self.image())
        calls = [c[0] for c in self.fake.calls]
        self.assertIn('bdev_lvol_decouple_parent', calls)
        self.assertIn('bdev_lvol_set_read_only', calls)
        self.assertEqual(before, self.fake.state())


class CloneImageTest(dbase.ImageTestCase):

    def setUp(self):
        super().setUp()
        self.driver = self.make_driver(spdk_image_cache_enabled=True)

    def clone(self, meta, size=1):
        volume = self.make_volume(size=size)
        return volume, self.driver.clone_image(
            self.ctxt, volume, None, meta, self.glance)

    def test_cache_off_declines(self):
        drv = self.make_driver(spdk_image_cache_enabled=False)
        meta = self.image()
        self.assertEqual((None, False), drv.clone_image(
            self.ctxt, self.make_volume(), None, meta, self.glance))
        self.assertEqual([], self.names())

    def test_replicated_volume_declines(self):
        """Its copies hold the image 1 MiB in; a cached base at 0."""
        volume = self.make_volume(vtype=self.make_type(
            extra_specs={'spdk:replicas': '2'}))
        self.assertEqual((None, False), self.driver.clone_image(
            self.ctxt, volume, None, self.image(), self.glance))
        self.assertEqual([], self.names())

    def test_second_volume_is_a_clone_of_one_base(self):
        meta = self.image()
        first, result = self.clone(meta)
        self.assertEqual((None, True), result)
        second, _result = self.clone(meta, size=2)
        base = image_cache.base_name(meta)
        self.assertEqual([meta['id']], self.fetched)
        self.assertEqual(sorted([base, first.name, second.name]),
                         self.names())
        self.assertTrue(self.fake.lvol('lvs0/' + base)['read_only'])
        self.assertEqual(2048, self.size_mib(self.alias(second)))
        self.driver.delete_volume(first)
        self.assertIn(base, self.names())
        self.driver.delete_volume(second)
        # The base goes with its last clone.
        self.assertEqual([], self.names())

    def test_full_cache_declines(self):
        drv = self.make_driver(spdk_image_cache_enabled=True,
                               spdk_image_cache_max_count=1)
        drv.clone_image(self.ctxt, self.make_volume(), None, self.image(),
                        self.glance)
        self.assertEqual((None, False), drv.clone_image(
            self.ctxt, self.make_volume(), None, self.image(), self.glance))
        drv = self.make_driver(spdk_image_cache_enabled=True,
                               spdk_image_cache_max_size_gb=1)
        self.assertEqual((None, False), drv.clone_image(
            self.ctxt, self.make_volume(), None,
            self.image(size=1024 * MIB), self.glance))

    def test_image_larger_than_volume_refused(self):
        meta = self.image(size=1024 * MIB + MIB)
        self.clone(meta, size=2)
        before = self.fake.state()
        self.assertRaises(exception.ImageUnacceptable, self.clone, meta)
        self.assertEqual(before, self.fake.state())

    def test_scratch_names_are_temporary(self):
        self.assertTrue(lvols.is_temp(lvols.temp_name('img', 'x')))
        self.assertFalse(image_cache.is_base(lvols.temp_name('img', 'x')))
