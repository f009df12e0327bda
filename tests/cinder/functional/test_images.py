"""Images into volumes and volumes into images, through aio files.

Real qemu-img images (raw and qcow2), Cinder's real image_utils and its
fake Glance; the bytes are checked in the lvol and in the uploaded image.
"""

import contextlib
import os

from cinder import exception
import fixtures
from oslo_config import cfg

from spdk_vhost_core import exception as rpc_exc
from tests.cinder import base
from tests.cinder.functional import imaging

IMAGE_LEN = 3 * imaging.MIB + 4096   # not a whole number of clusters
TAIL = imaging.MIB                   # zeros checked after the image


class _DriverImageTest(imaging.ImageTestCase):

    def setUp(self):
        super().setUp()
        self.driver = self.make_driver(**self.driver_opts())

    def from_image(self, image, size=1):
        volume = self.make_volume(size=size)
        self.driver.create_volume(volume)
        self.driver.copy_image_to_volume(self.ctxt, volume, self.glance,
                                         image['id'])
        return volume

    def check_volume(self, volume, data):
        got = self.lvol_bytes(volume.name, len(data) + TAIL)
        self.assertEqual(data, got[:len(data)])
        self.assertEqual(bytes(TAIL), got[len(data):])

    def failing(self, method):
        """A fixture making every ``method`` call fail with an SPDK error."""
        real = self.driver.client.call

        def call(client, name, params=None):
            if name == method:
                raise rpc_exc.SpdkRpcError(name, code=-32603,
                                           message='injected')
            return real(name, params)
        return fixtures.MonkeyPatch(
            'spdk_vhost_core.spdk_rpc.SpdkClient.call', call)


class ImageToVolumeTest(_DriverImageTest):

    def test_raw_image(self):
        data = imaging.pattern('raw', IMAGE_LEN)
        volume = self.from_image(self.add_image(data))
        self.check_volume(volume, data)
        self.assertEqual([volume.name], self.lvol_names())
        info = self.rpc('bdev_get_bdevs', {'name': 'lvs0/' + volume.name})[0]
        self.assertEqual(1024 * imaging.MIB,
                         info['num_blocks'] * info['block_size'])
        lvol = info['driver_specific']['lvol']
        self.assertFalse(lvol['esnap_clone'])
        self.assertFalse(lvol['clone'])
        # Thin: only the clusters the image's data is in.
        self.assertTrue(lvol['thin_provision'])
        self.assertEqual(-(-IMAGE_LEN // imaging.MIB),
                         lvol['num_allocated_clusters'])
        self.assert_no_scratch()

    def test_sparse_image_stays_thin(self):
        """Holes in the image allocate nothing, even at the far end."""
        data = imaging.pattern('head', imaging.MIB)
        image = self.add_image(data + bytes(510 * imaging.MIB) + data)
        volume = self.from_image(image)
        lvol = self.rpc('bdev_get_bdevs', {'name': 'lvs0/' + volume.name})[
            0]['driver_specific']['lvol']
        self.assertEqual(2, lvol['num_allocated_clusters'])
        self.check_volume(volume, data)

    def test_restore_of_a_file_of_holes_only(self):
        """A backup of zeros restores as holes only: nothing to copy.

        (spdk_dd --sparse aborts on a file without a data extent.)
        """
        volume = self.from_image(self.add_image(
            imaging.pattern('old', IMAGE_LEN)))
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 'f')
        with open(path, 'wb') as out:
            out.truncate(volume.size * 1024 * imaging.MIB)
        self.driver.backups.restore_from(volume, path)
        lvol = self.rpc('bdev_get_bdevs', {'name': 'lvs0/' + volume.name})[
            0]['driver_specific']['lvol']
        self.assertEqual(0, lvol['num_allocated_clusters'])
        self.check_volume(volume, bytes(IMAGE_LEN))
        self.assert_no_scratch()

    def test_qcow2_image(self):
        data = imaging.pattern('qcow2', IMAGE_LEN)
        volume = self.from_image(self.add_image(data, 'qcow2'))
        self.check_volume(volume, data)
        self.assert_no_scratch()

    def test_image_larger_than_volume(self):
        image = self.add_image(b'x' * 4096, 'qcow2',
                               virtual_size=2 * 1024 * imaging.MIB)
        volume = self.make_volume(size=1)
        self.driver.create_volume(volume)
        self.assertRaises(exception.ImageUnacceptable,
                          self.driver.copy_image_to_volume, self.ctxt,
                          volume, self.glance, image['id'])
        self.assertEqual([volume.name], self.lvol_names())
        self.assert_no_scratch()

    def test_format_mismatch_refused(self):
        """A qcow2 file registered as raw is not written as raw bytes."""
        image = self.add_image(b'y' * 4096, 'qcow2')
        self.glance.update(self.ctxt, image['id'], {'disk_format': 'raw'})
        volume = self.make_volume(size=1)
        self.driver.create_volume(volume)
        self.assertRaises(exception.ImageUnacceptable,
                          self.driver.copy_image_to_volume, self.ctxt,
                          volume, self.glance, image['id'])
        self.assert_no_scratch()

    def failed_import_leaves_volume_as_it_was(self, failing):
        image = self.add_image(imaging.pattern('f', IMAGE_LEN))
        volume = self.make_volume(size=1)
        self.driver.create_volume(volume)
        uuid = self.rpc('bdev_get_bdevs',
                        {'name': 'lvs0/' + volume.name})[0]['name']
        with failing:
            self.assertRaises(exception.VolumeBackendAPIException,
                              self.driver.copy_image_to_volume, self.ctxt,
                              volume, self.glance, image['id'])
        self.assertEqual([volume.name], self.lvol_names())
        self.assertEqual(uuid, self.rpc(
            'bdev_get_bdevs', {'name': 'lvs0/' + volume.name})[0]['name'])
        self.assert_no_scratch()

    def test_failure_at_export_leaves_volume_as_it_was(self):
        self.failed_import_leaves_volume_as_it_was(
            self.failing('nvmf_subsystem_add_listener'))

    def test_failure_of_spdk_dd_leaves_volume_as_it_was(self):
        self.failed_import_leaves_volume_as_it_was(self.spdk_dd('false'))

    @contextlib.contextmanager
    def spdk_dd(self, path):
        """The driver runs ``path`` instead of spdk_dd inside."""
        real = self.driver.configuration.spdk_dd_path
        cfg.CONF.set_override('spdk_dd_path', path, group=base.BACKEND)
        try:
            yield
        finally:
            cfg.CONF.set_override('spdk_dd_path', real, group=base.BACKEND)

    def test_lvstore_without_room_for_the_image(self):
        data = imaging.pattern('full', IMAGE_LEN)
        image = self.add_image(data)
        volume = self.make_volume(size=1)
        self.driver.create_volume(volume)
        [lvs] = self.rpc('bdev_lvol_get_lvstores', {'lvs_name': 'lvs0'})
        needed = -(-IMAGE_LEN // lvs['cluster_size'])
        room = lvs['free_clusters'] - needed + 1
        self.rpc('bdev_lvol_create', {
            'lvs_name': 'lvs0', 'lvol_name': 'filler',
            'size_in_mib': room * lvs['cluster_size'] // imaging.MIB,
            'thin_provision': False})
        err = self.assertRaises(exception.VolumeBackendAPIException,
                                self.driver.copy_image_to_volume, self.ctxt,
                                volume, self.glance, image['id'])
        self.assertIn('spdk_dd', str(err))
        self.assertEqual(['filler', volume.name], self.lvol_names())
        self.assert_no_scratch()
        # The target lived through it, and the volume is still usable.
        self.rpc('bdev_lvol_delete', {'name': 'lvs0/filler'})
        self.driver.copy_image_to_volume(self.ctxt, volume, self.glance,
                                         image['id'])
        self.check_volume(volume, data)


class VolumeToImageTest(_DriverImageTest):

    def upload(self, volume, disk_format):
        meta = self.empty_image(disk_format)
        self.driver.copy_volume_to_image(self.ctxt, volume, self.glance,
                                         meta)
        return meta['id']

    def check_upload(self, volume, data, disk_format='qcow2'):
        before = self.lvol_names()
        image_id = self.upload(volume, disk_format)
        got, size = self.image_bytes(image_id, len(data) + TAIL,
                                     disk_format)
        self.assertEqual(volume.size * 1024 * imaging.MIB, size)
        self.assertEqual(data, got[:len(data)])
        self.assertEqual(bytes(TAIL), got[len(data):])
        self.assertEqual(before, self.lvol_names())
        self.assert_no_scratch()

    def test_volume_without_parent(self):
        data = imaging.pattern('plain', IMAGE_LEN)
        volume = self.from_image(self.add_image(data))
        self.check_upload(volume, data)

    def test_volume_from_snapshot(self):
        """Its own clusters are empty: all content is in the snapshot."""
        data = imaging.pattern('snap', IMAGE_LEN)
        source = self.from_image(self.add_image(data))
        snapshot = self.make_snapshot(source)
        self.driver.create_snapshot(snapshot)
        volume = self.make_volume(size=2)
        self.driver.create_volume_from_snapshot(volume, snapshot)
        info = self.rpc('bdev_get_bdevs', {'name': 'lvs0/' + volume.name})
        lvol = info[0]['driver_specific']['lvol']
        self.assertEqual(snapshot.name, lvol['base_snapshot'])
        self.assertEqual(0, lvol['num_allocated_clusters'])
        self.check_upload(volume, data)
        lvol = self.rpc('bdev_get_bdevs', {'name': 'lvs0/' + volume.name})[
            0]['driver_specific']['lvol']
        self.assertEqual(snapshot.name, lvol['base_snapshot'])

    def test_cloned_volume_raw_upload(self):
        data = imaging.pattern('clone', IMAGE_LEN)
        source = self.from_image(self.add_image(data))
        volume = self.make_volume(size=1)
        self.driver.create_cloned_volume(volume, source)
        vtype = self.make_type()
        volume.volume_type_id = vtype['id']
        volume.save()
        self.check_upload(volume, data, 'raw')

    def test_failure_during_copy_cleans_up(self):
        volume = self.from_image(self.add_image(
            imaging.pattern('x', IMAGE_LEN)))
        before = self.lvol_names()
        with self.failing('bdev_lvol_check_shallow_copy'):
            self.assertRaises(exception.VolumeBackendAPIException,
                              self.upload, volume, 'qcow2')
        self.assertEqual(before, self.lvol_names())
        self.assert_no_scratch()

    def test_not_found_volume(self):
        volume = self.make_volume(size=1)
        self.assertRaises(exception.VolumeBackendAPIException,
                          self.upload, volume, 'qcow2')
        self.assert_no_scratch()


class ImageWithDhchapTest(_DriverImageTest):
    """spdk_dd proves itself on the scratch export with its own keys."""

    def setUp(self):
        super().setUp()
        self.key_dir = os.path.join(self.tmp, 'keys')
        self.driver = self.make_driver(**self.driver_opts(
            spdk_nvmf_auth='dhchap', spdk_nvmf_key_dir=self.key_dir))

    def test_raw_image(self):
        data = imaging.pattern('auth', IMAGE_LEN)
        volume = self.from_image(self.add_image(data))
        self.check_volume(volume, data)
        self.assert_no_scratch()
        self.assertEqual([], self.rpc('keyring_get_keys'))
        self.assertEqual([], os.listdir(self.key_dir))
