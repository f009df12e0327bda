"""The SPDK target restarts between two steps of a driver operation.

The lvol store lives on an aio file, so (as on a real target) it survives
the restart and is found again when the file is re-added; aio bdevs of
image files and the driver's connection do not survive. The operation
must fail with a Cinder error, then either complete on retry or be
swept at the next start-up, with no scratch lvol or aio bdev left.
"""

from cinder import exception
import fixtures

from tests.cinder.functional import imaging
from tests.cinder.functional import test_driver


class RestartTest(imaging.ImageTestCase):

    def setUp(self):
        super().setUp()
        self.driver = self.make_driver(**self.driver_opts())

    def restart_at(self, method):
        """A fixture: the target restarts just before ``method`` is sent."""
        real = self.driver.client.call

        def call(client, name, params=None):
            if name == method:
                self.target.stop()
            return real(name, params)
        return fixtures.MonkeyPatch(
            'spdk_vhost_core.spdk_rpc.SpdkClient.call', call)

    def interrupted_import(self):
        image = self.add_image(imaging.pattern('r', 2 * imaging.MIB))
        volume = self.make_volume(size=1)
        self.driver.create_volume(volume)
        # After the import, before the lvol swap.
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

    def test_export_after_a_restart_without_saved_config(self):
        """The target comes back without its NVMe-oF transport."""
        volume = self.make_volume(size=1)
        self.driver.create_volume(volume)
        self.target.restart(crash=True)
        self.add_base()
        data = self.driver.initialize_connection(
            volume, test_driver.REMOTE)['data']
        self.assertEqual('tcp', data['transport'])
        self.assertEqual(['TCP'], [t['trtype'] for t in
                                   self.rpc('nvmf_get_transports')])
        self.assertEqual([data['nqn']], self.subsystems())

    def test_startup_sweeps_interrupted_copy(self):
        """A scratch export and lvol left by a cinder-volume killed mid-dd."""
        volume, _image = self.interrupted_import()
        tmp = 'lvs0/tmp-import-' + volume.id
        nqn = self.driver.exporter.nqn('tmp-dd-' + volume.id)
        self.rpc('nvmf_create_subsystem', {'nqn': nqn})
        self.rpc('nvmf_subsystem_add_ns', {'nqn': nqn, 'namespace': {
            'bdev_name': tmp}})
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
