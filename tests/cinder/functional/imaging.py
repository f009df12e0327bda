"""Helpers for image tests: real image files, a fake Glance, lvol bytes.

Images are made by qemu-img; Glance is Cinder's own test fake holding
them in memory; Cinder's real image_utils fetches, converts and uploads.
An lvol's bytes are read over NVMe/TCP by SPDK's spdk_dd through an
export the test makes itself (:mod:`testbed.spdk_dd`),
independently of the driver code under test.
"""

import datetime
import io
import os
import subprocess
import uuid

from cinder import privsep
from cinder.tests.unit.image import fake as fake_image
import fixtures
from oslo_config import cfg

from cinder_spdk_vhost import lvols
from testbed import spdk_build
from testbed import spdk_dd
from tests.cinder import base

CONF = cfg.CONF
MIB = lvols.MIB


def pattern(seed, length):
    """Distinct, non-zero bytes for ``seed``."""
    block = (b'%s:' % seed.encode()) * 64
    return (block * (length // len(block) + 1))[:length]


def qemu_img(*args):
    subprocess.run(('qemu-img',) + args, check=True, capture_output=True)


def use_privsep_in_process(test):
    """Run Cinder's privsep functions in process, without sudo.

    image_utils inspects image files through privsep; the tests own the
    files, so no daemon is needed.
    """
    privsep.sys_admin_pctxt.set_client_mode(False)
    test.addCleanup(privsep.sys_admin_pctxt.set_client_mode, True)


class Glance(fake_image._FakeImageService):
    """Cinder's fake Glance, keeping what is uploaded (it drops it)."""

    def __init__(self):
        super().__init__()
        # The fake's MagicMock would stand in for image_utils' real cache
        # of downloaded images.
        self.temp_images = None

    def update(self, context, image_id, metadata, data=None, **kwargs):
        image = super().update(context, image_id, metadata, **kwargs)
        if data is not None:
            self._imagedata[image_id] = data.read()
        return image


class ImageTestCase(base.TargetTestCase):
    """A fake image service, a staging directory, image makers, readers."""

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.staging = os.path.join(self.tmp, 'staging')
        CONF.set_override('image_conversion_dir',
                          os.path.join(self.tmp, 'conversion'))
        self.glance = Glance()
        use_privsep_in_process(self)

    def driver_opts(self, **overrides):
        opts = {'spdk_image_staging_dir': self.staging,
                'spdk_dd_path': spdk_build.app_path('spdk_dd')}
        opts.update(overrides)
        return opts

    def add_image(self, data, disk_format='raw', virtual_size=None,
                  image_id=None):
        """Register an image in Glance; qcow2 is converted from ``data``."""
        raw = os.path.join(self.tmp, 'src-%s.raw' % uuid.uuid4().hex)
        with open(raw, 'wb') as out:
            out.write(data)
            if virtual_size:
                out.truncate(virtual_size)
        path = raw
        if disk_format != 'raw':
            path = raw + '.' + disk_format
            qemu_img('convert', '-f', 'raw', '-O', disk_format, raw, path)
        with open(path, 'rb') as src:
            blob = src.read()
        stamp = datetime.datetime(2024, 1, 1, 0, 0, 0)
        meta = {'id': image_id or str(uuid.uuid4()), 'name': 'test',
                'status': 'active', 'disk_format': disk_format,
                'container_format': 'bare', 'size': len(blob),
                'checksum': uuid.uuid4().hex, 'created_at': stamp,
                'updated_at': stamp, 'properties': {}}
        return self.glance.create(self.ctxt, meta, io.BytesIO(blob))

    def empty_image(self, disk_format):
        """Glance's record of a new image, to upload a volume into."""
        return self.glance.create(self.ctxt, {
            'id': str(uuid.uuid4()), 'name': 'upload', 'status': 'queued',
            'disk_format': disk_format, 'container_format': 'bare',
            'properties': {}})

    def image_bytes(self, image_id, length, disk_format):
        """The first ``length`` bytes of an uploaded image, as raw."""
        path = os.path.join(self.tmp, 'up-%s' % uuid.uuid4().hex)
        with open(path, 'wb') as out:
            out.write(self.glance._imagedata[image_id])
        raw = path + '.raw'
        qemu_img('convert', '-f', disk_format, '-O', 'raw', path, raw)
        with open(raw, 'rb') as src:
            data = src.read(length)
        return data, os.path.getsize(raw)

    def lvol_bytes(self, name, length):
        """The first ``length`` bytes of lvol ``name`` as a guest sees them."""
        return spdk_dd.read_once(self.target, '%s/%s' % (base.LVS, name),
                                 length, self.tmp)

    def aio_bdevs(self):
        return sorted(b['name'] for b in self.rpc('bdev_get_bdevs')
                      if b['product_name'] == 'AIO disk')

    def staged_files(self):
        found = []
        for directory in (self.staging, CONF.image_conversion_dir):
            if os.path.isdir(directory):
                found += os.listdir(directory)
        return found

    def assert_no_scratch(self):
        """No aio bdev, temporary lvol or staged file is left."""
        self.assertEqual([], [n for n in self.aio_bdevs()
                              if lvols.is_temp(n)])
        self.assertEqual([], [n for n in self.lvol_names()
                              if lvols.is_temp(n)])
        self.assertEqual([], self.staged_files())
        self.assertEqual([], [n for n in self.subsystems() if ':tmp-' in n])
