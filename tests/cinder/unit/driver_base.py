"""A real SpdkVhostDriver on real Cinder objects, talking to FakeSpdk.

Only the RPC client is replaced (``SpdkClient.from_conf`` hands out the
fake), so do_setup, the exporter, locks and rollback are the product's.
"""

import io
import os
import uuid

from cinder.image import image_utils
from cinder.tests.unit.image import fake as fake_image
from cinder.volume import configuration
from cinder.volume import driver as cinder_driver
from cinder.volume import volume_utils
import fixtures
from oslo_config import cfg

from cinder_spdk_vhost import dd
from cinder_spdk_vhost import driver as spdk_driver
from spdk_vhost_core import spdk_rpc
from tests.cinder import base
from tests.cinder.unit import fake_spdk

CONF = cfg.CONF
LVS = base.LVS
TARGET_ID = 'storage-target'
HOST_NQN = 'nqn.2014-08.org.nvmexpress:uuid:1b4e28ba-0000-0000-0000-000001'
OTHER_NQN = 'nqn.2014-08.org.nvmexpress:uuid:1b4e28ba-0000-0000-0000-000002'
REMOTE = {'host': 'compute1', 'nqn': HOST_NQN, 'spdk_target_id': 'compute1'}
LOCAL = {'host': 'storage', 'spdk_target_id': TARGET_ID}
MIB = fake_spdk.MIB


class DriverTestCase(base.CinderTestCase):
    """One set-up driver (``self.driver``) on ``self.fake``."""

    lvstores = (LVS,)
    #: 1 MiB clusters in each lvol store.
    clusters = 1024

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MockPatchObject(
            spdk_rpc.SpdkClient, 'from_conf',
            side_effect=lambda conf: self.fake))
        self.reset()

    def reset(self):
        """A new empty target, and a driver set up on it."""
        self.fake = fake_spdk.FakeSpdk(lvstores=self.lvstores,
                                       clusters=self.clusters)
        self.driver = self.make_driver()
        return self.driver

    def make_driver(self, **overrides):
        conf = configuration.Configuration(cinder_driver.volume_opts,
                                           config_group=base.BACKEND)
        drv = spdk_driver.SpdkVhostDriver(configuration=conf,
                                          host=base.HOST)
        settings = {'spdk_target_id': TARGET_ID,
                    'spdk_lvstores': list(self.lvstores),
                    'volume_backend_name': base.BACKEND,
                    'spdk_sweep_interval': 0,
                    # Checked at start; the fake target's copies never run
                    # it (tests of spdk_dd's command line stand in).
                    'spdk_dd_path': 'true'}
        settings.update(overrides)
        for name, value in settings.items():
            CONF.set_override(name, value, group=base.BACKEND)
        drv.do_setup(self.ctxt)
        drv.check_for_setup_error()
        return drv

    def alias(self, obj, lvs=LVS):
        return '%s/%s' % (lvs, obj.name)

    def names(self):
        return sorted(lvol['name'] for lvol in self.fake.lvols.values())

    def size_mib(self, name):
        return self.fake.lvol(name)['size'] // MIB

    def volume(self, size=1, vtype=None):
        """A volume the driver created."""
        volume = self.make_volume(size=size, vtype=vtype)
        self.driver.create_volume(volume)
        return volume

    def snapshot(self, volume):
        """A snapshot of ``volume`` the driver created."""
        snap = self.make_snapshot(volume)
        self.driver.create_snapshot(snap)
        return snap

    def snapshot_with_clones(self):
        """A volume, its snapshot and two volumes made from it."""
        volume = self.volume()
        snap = self.snapshot(volume)
        clones = [self.make_volume(), self.make_volume()]
        for clone in clones:
            self.driver.create_volume_from_snapshot(clone, snap)
        return volume, snap, clones


class ImageTestCase(DriverTestCase):
    """Plus Cinder's fake Glance, and a staging directory.

    Cinder's fetch_to_raw and upload_volume (qemu-img conversions, run by
    the functional tests) are replaced by plain byte copies between the
    fake Glance and the staging file, which is what the driver relies on.
    """

    def setUp(self):
        self.staging = None
        super().setUp()
        self.glance = fake_image.FakeImageService()
        self.fetched = []
        self.uploaded = {}
        self.useFixture(fixtures.MockPatchObject(
            image_utils, 'fetch_to_raw', side_effect=self._fetch_to_raw))
        self.useFixture(fixtures.MockPatchObject(
            volume_utils, 'upload_volume', side_effect=self._upload))
        self.dd_runs = []
        self.useFixture(fixtures.MockPatchObject(
            dd, 'write_file', side_effect=self._spdk_dd))

    def make_driver(self, **overrides):
        if self.staging is None:
            self.staging = self.useFixture(fixtures.TempDir()).path
        overrides.setdefault('spdk_image_staging_dir', self.staging)
        return super().make_driver(**overrides)

    def _fetch_to_raw(self, context, image_service, image_id, dest,
                      blocksize, size=None, run_as_root=False,
                      disable_sparse=False):
        self.fetched.append(image_id)
        with open(dest, 'wb') as out:
            image_service.download(context, image_id, out)
            # Sparse up to the image's size, as a raw image of holes.
            out.truncate(image_service.show(context, image_id)['size'])

    def _spdk_dd(self, conf, path, params, secrets):
        """spdk_dd over the scratch export: its lvol gets the data clusters."""
        self.dd_runs.append(dict(params, secrets=secrets))
        for lvol_uuid in self.fake.subsystems[params['subnqn']]['namespaces']:
            self.fake.lvols[lvol_uuid]['allocated'] = dd.data_clusters(
                path, MIB)

    def _upload(self, context, image_service, image_meta, volume_path,
                volume, run_as_root=False):
        with open(volume_path, 'rb') as data:
            size = os.fstat(data.fileno()).st_size
            self.uploaded[image_meta['id']] = (size, data.read(4))

    def image(self, size=3 * MIB):
        """An image of ``size`` bytes in the fake Glance; its meta."""
        meta = {'id': str(uuid.uuid4()), 'size': size,
                'checksum': uuid.uuid4().hex, 'disk_format': 'raw',
                'container_format': 'bare', 'status': 'active'}
        return self.glance.create(self.ctxt, meta,
                                  data=io.BytesIO(b'\x01' * 4096))

    def staged(self):
        return os.listdir(self.staging)
