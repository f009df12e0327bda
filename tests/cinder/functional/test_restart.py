"""The SPDK target restarts between two steps of a driver operation.

The lvol store lives on an aio file, so (as on a real target) it survives
the restart and is found again when the file is re-added; aio bdevs of
image files and the driver's connection do not survive. The operation
must fail with a Cinder error, then either complete on retry or be
swept at the next start-up, with no scratch lvol or aio bdev left.
"""

import os

from cinder import exception
import fixtures

from tests.cinder import base
from tests.cinder.functional import imaging
from tests.emulator import fixture as emulator_fixture

BASE_MIB = 256


class RestartTest(imaging.ImageTestCase):

    def setUp(self):
        # The lvstore goes on an aio file instead of the base's malloc.
        base.CinderTestCase.setUp(self)
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.target = self.useFixture(emulator_fixture.EmulatorFixture(
            use_real=False))
        self.base_file = os.path.join(self.tmp, 'lvs0.img')
        with open(self.base_file, 'wb') as out:
            out.truncate(BASE_MIB * imaging.MIB)
        self.add_base()
        self.rpc('bdev_lvol_create_lvstore', {'bdev_name': 'base0',
                                              'lvs_name': base.LVS,
                                              'cluster_sz': imaging.MIB})
        self.setup_images()
        self.driver = self.make_driver(**self.driver_opts())

    def setup_images(self):
        self.staging = os.path.join(self.tmp, 'staging')
        imaging.CONF.set_override('image_conversion_dir',
                                  os.path.join(self.tmp, 'conversion'))
        self.glance = imaging.Glance()
        imaging.use_privsep_in_process(self)

    def add_base(self):
        self.rpc('bdev_aio_create', {'name': 'base0',
                                     'filename': self.base_file})

    def restart_at(self, method):
        """A fixture: the target restarts just before ``method`` is sent."""
        real = self.driver.client.call

        def call(client, name, params=None):
            if name == method:
                self.target.stop()
            return real(name, params)
        return fixtures.MonkeyPatch(
            'os_brick_connector.spdk_rpc.SpdkClient.call', call)

    def interrupted_import(self):
        image = self.add_image(imaging.pattern('r', 2 * imaging.MIB))
        volume = self.make_volume(size=1)
        self.driver.create_volume(volume)
        # After the import, before the lvol swap: a restart at the
        # decouple would leave an esnap clone of a deleted file, which
        # the emulator cannot list (see the report on issue 3).
        with self.restart_at('bdev_lvol_rename'):
            self.assertRaises(exception.VolumeBackendAPIException,
                              self.driver.copy_image_to_volume, self.ctxt,
                              volume, self.glance, image['id'])
        self.target.start()
        self.add_base()
        return volume, image

    def test_import_completes_on_retry(self):
        volume, image = self.interrupted_import()
        self.assertIn('tmp-import-' + volume.id, self.lvol_names())
        self.driver.copy_image_to_volume(self.ctxt, volume, self.glance,
                                         image['id'])
        self.assertEqual([volume.name], self.lvol_names())
        self.assert_no_scratch()

    def test_startup_sweeps_interrupted_import(self):
        volume, _image = self.interrupted_import()
        self.make_driver(**self.driver_opts())
        self.assertEqual([volume.name], self.lvol_names())
        self.assert_no_scratch()

    def test_export_interrupted_then_retried(self):
        volume, image = self.interrupted_import()
        self.driver.copy_image_to_volume(self.ctxt, volume, self.glance,
                                         image['id'])
        meta = self.empty_image('qcow2')
        with self.restart_at('bdev_lvol_start_shallow_copy'):
            self.assertRaises(exception.VolumeBackendAPIException,
                              self.driver.copy_volume_to_image, self.ctxt,
                              volume, self.glance, meta)
        self.target.start()
        self.add_base()
        self.assertIn('tmp-export-' + volume.id, self.lvol_names())
        self.driver.copy_volume_to_image(self.ctxt, volume, self.glance,
                                         meta)
        got, _size = self.image_bytes(meta['id'], 2 * imaging.MIB, 'qcow2')
        self.assertEqual(imaging.pattern('r', 2 * imaging.MIB), got)
        self.assertEqual([volume.name], self.lvol_names())
        self.assert_no_scratch()
