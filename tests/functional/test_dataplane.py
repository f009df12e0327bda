"""The emulator's data plane against real qemu-img and qemu-storage-daemon.

Every check reads real bytes: data goes in through qemu-io (offline, or
through an NBD export the data plane serves) and comes out of the files.
"""

import errno
import json
import os
import socket
import struct
import subprocess
import time

import fixtures

from tests import base
from tests.emulator import dataplane

MIB = 1024 * 1024
CLUSTER = MIB
QEMU_IO = os.environ.get('QEMU_IO', 'qemu-io')
QEMU_IMG = os.environ.get('QEMU_IMG', 'qemu-img')
VHOST_USER_GET_FEATURES = 1
VIRTIO_BLK_F_RO = 5


def qemu_io(target, command, fmt='raw', readonly=False):
    args = [QEMU_IO, '-f', fmt] + (['-r'] if readonly else [])
    proc = subprocess.run(args + ['-c', command, target],
                          capture_output=True, text=True, check=False)
    if proc.returncode or 'failed' in proc.stdout:
        raise AssertionError('qemu-io %s on %s: %s %s'
                             % (command, target, proc.stdout, proc.stderr))
    return proc.stdout


def backing_of(path):
    out = subprocess.run([QEMU_IMG, 'info', '-U', '--output=json', path],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout).get('backing-filename')


def vhost_features(socket_path):
    """Ask a vhost-user backend for its virtio features (GET_FEATURES)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(socket_path)
        sock.sendall(struct.pack('<III', VHOST_USER_GET_FEATURES, 1, 0))
        reply = b''
        while len(reply) < 20:
            chunk = sock.recv(20 - len(reply))
            if not chunk:
                raise AssertionError('vhost-user backend hung up')
            reply += chunk
    request, _flags, size, features = struct.unpack('<IIIQ', reply)
    assert (request, size) == (VHOST_USER_GET_FEATURES, 8), reply
    return features


class DataPlaneTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.dp = dataplane.DataPlane(os.path.join(self.dir, 'work'))
        self.addCleanup(self.dp.close)

    def path(self, name):
        return os.path.join(self.dir, name)

    def lvol(self, name='lvol', size=4 * MIB, pattern=None, **kwargs):
        path = self.path(name)
        self.dp.create_image(path, size, CLUSTER, **kwargs)
        if pattern is not None:
            qemu_io(path, 'write -P %d 0 64k' % pattern, fmt='qcow2')
        return path

    def nbd_io(self, path, command, fmt='qcow2', readonly=False):
        """Run qemu-io through a short-lived NBD export of the source."""
        sock = self.dp.export_nbd('io', (path, fmt))
        try:
            return qemu_io('nbd+unix:///io?socket=%s' % sock, command,
                           readonly=readonly)
        finally:
            self.dp.delete_nbd_export('io')

    def export(self, export_id, path, **kwargs):
        sock = self.path(export_id + '.sock')
        self.dp.export_vhost_blk(export_id, (path, 'qcow2'), sock, **kwargs)
        return sock

    def assertFails(self, err, func, *args):
        exc = self.assertRaises(dataplane.DataPlaneError, func, *args)
        self.assertEqual(err, exc.errno, exc)
        return exc


class TestOfflineImages(DataPlaneTestCase):

    def test_create_read_resize(self):
        path = self.lvol(pattern=0x11)
        self.assertEqual(b'\x11' * 8, self.dp.read(path, 100, 8))
        self.assertEqual(b'\x11\x11\0\0', self.dp.read(path, 65534, 4))
        self.dp.resize_image(path, 8 * MIB)
        self.assertEqual(b'\0' * 16, self.dp.read(path, 8 * MIB - 16, 16))
        self.assertFails(errno.EINVAL, self.dp.resize_image, path, MIB)
        self.assertFails(errno.EEXIST, self.dp.create_image, path, MIB,
                         CLUSTER)
        self.assertIsNone(self.dp.daemon_pid)

    def test_raw_is_sparse(self):
        path = self.path('malloc')
        self.dp.create_raw(path, 2 * MIB)
        self.assertEqual(2 * MIB, os.path.getsize(path))
        self.assertEqual([], self.dp.allocated_extents(path))
        self.assertEqual(b'\0' * 4, self.dp.read(path, MIB, 4))

    def test_snapshot_freezes_data_and_clone_sees_it(self):
        path = self.lvol(pattern=0x11)
        snap = self.path('snap')
        self.dp.snapshot_image(path, snap)
        self.assertEqual(snap, backing_of(path))
        qemu_io(path, 'write -P 0x22 0 4k', fmt='qcow2')
        self.assertEqual(b'\x22', self.dp.read(path, 0, 1))
        self.assertEqual(b'\x11', self.dp.read(path, 4096, 1))
        self.assertEqual(b'\x11' * 4, self.dp.read(snap, 0, 4))
        clone = self.lvol('clone', backing=(snap, 'qcow2'))
        self.assertEqual(b'\x11' * 4, self.dp.read(clone, 0, 4))
        self.assertEqual([], self.dp.allocated_extents(clone))

    def test_rebase_to_none_inflates(self):
        path = self.lvol(pattern=0x11)
        self.dp.snapshot_image(path, self.path('snap'))
        qemu_io(path, 'write -P 0x22 1M 4k', fmt='qcow2')
        self.dp.rebase_image(path, None)
        self.assertIsNone(backing_of(path))
        self.dp.delete_image(self.path('snap'))
        self.assertEqual(b'\x11' * 4, self.dp.read(path, 0, 4))
        self.assertEqual(b'\x22' * 4, self.dp.read(path, MIB, 4))

    def _three_layers(self):
        """base <- snap1 (0x11 at 0) <- snap2 (0x22 at 1M) <- lvol."""
        path = self.lvol(pattern=0x11)
        self.dp.snapshot_image(path, self.path('snap1'))
        qemu_io(path, 'write -P 0x22 1M 4k', fmt='qcow2')
        self.dp.snapshot_image(path, self.path('snap2'))
        return path

    def test_rebase_to_grandparent_decouples(self):
        path = self._three_layers()
        self.dp.rebase_image(path, (self.path('snap1'), 'qcow2'))
        self.assertEqual(self.path('snap1'), backing_of(path))
        self.dp.delete_image(self.path('snap2'))
        self.assertEqual(b'\x11\x22', self.dp.read(path, 0, 1) +
                         self.dp.read(path, MIB, 1))

    def test_allocated_extents_and_copy(self):
        path = self.lvol()
        self.assertEqual([], self.dp.allocated_extents(path))
        qemu_io(path, 'write -P 0x33 2M 4k', fmt='qcow2')
        extents = self.dp.allocated_extents(path)
        self.assertEqual([(2 * MIB, CLUSTER)], extents)
        dst = self.path('dst')
        self.dp.create_raw(dst, 4 * MIB)
        self.dp.copy_extents(path, extents, dst)
        with open(dst, 'rb') as f:
            f.seek(2 * MIB)
            self.assertEqual(b'\x33' * 4096 + b'\0' * 4,
                             f.read(4100))
            f.seek(0)
            self.assertEqual(b'\0' * 4, f.read(4))

    def test_extents_of_an_esnap_clone_whose_base_is_gone(self):
        # SPDK lists such a clone as degraded; listing lvols must not fail.
        base = self.path('image.raw')
        self.dp.create_raw(base, 4 * MIB)
        clone = self.lvol('clone', backing=(base, 'raw'))
        qemu_io(clone, 'write -P 0x44 1M 4k', fmt='qcow2')
        os.unlink(base)
        self.assertEqual([(MIB, CLUSTER)], self.dp.allocated_extents(clone))

    def test_errors_name_the_path(self):
        missing = self.path('missing')
        exc = self.assertFails(errno.ENOENT, self.dp.read, missing, 0, 1)
        self.assertIn(missing, str(exc))
        self.assertFails(errno.ENOENT, self.dp.delete_image, missing)
        self.assertFails(errno.ENOENT, self.dp.export_vhost_blk, 'x',
                         (missing, 'qcow2'), self.path('x.sock'))


class TestExports(DataPlaneTestCase):

    def test_vhost_socket_accepts_and_counts_sessions(self):
        path = self.lvol()
        sock = self.export('vhost.0', path, num_queues=2)
        self.assertEqual(0, self.dp.connected_sessions('vhost.0'))
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(client.close)
        client.connect(sock)
        self._wait_sessions('vhost.0', 1)
        self.assertFails(errno.EBUSY, self.dp.delete_export, 'vhost.0')
        self.assertFails(errno.EBUSY, self.dp.delete_image, path)
        client.close()
        self._wait_sessions('vhost.0', 0)
        self.dp.delete_export('vhost.0')
        self.assertFalse(os.path.exists(sock))
        self.dp.delete_image(path)

    def _wait_sessions(self, export_id, count):
        deadline = time.monotonic() + 10
        while self.dp.connected_sessions(export_id) != count:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.05)

    def test_two_exports_of_one_source_and_readonly(self):
        path = self.lvol(pattern=0x11)
        rw = self.export('rw', path)
        ro = self.export('ro', path, readonly=True)
        self.assertFalse(vhost_features(rw) & (1 << VIRTIO_BLK_F_RO))
        self.assertTrue(vhost_features(ro) & (1 << VIRTIO_BLK_F_RO))
        self.assertFails(errno.EEXIST, self.export, 'rw', path)
        self.dp.delete_export('rw')
        self.assertFails(errno.EBUSY, self.dp.delete_image, path)
        self.dp.delete_export('ro')
        self.dp.delete_image(path)

    def test_backing_of_open_image_is_busy(self):
        path = self.lvol(pattern=0x11)
        snap = self.path('snap')
        self.dp.snapshot_image(path, snap)
        self.export('vhost.0', path)
        self.assertFails(errno.EBUSY, self.dp.delete_image, snap)
        self.assertFails(errno.EBUSY, self.dp.resize_image, snap, 8 * MIB)

    def test_nbd_export_is_readable(self):
        path = self.lvol(pattern=0x44)
        sock = self.dp.export_nbd('vol', (path, 'qcow2'))
        qemu_io('nbd+unix:///vol?socket=%s' % sock, 'read -P 0x44 0 64k',
                readonly=True)
        self.assertFails(errno.EEXIST, self.dp.export_nbd, 'vol',
                         (path, 'qcow2'))
        self.dp.delete_nbd_export('vol')
        self.assertFails(errno.ENOENT, self.dp.delete_nbd_export, 'vol')

    def test_vhost_export_of_nbd_source(self):
        """A remote namespace: a second target's QSD serves it over NBD."""
        path = self.lvol(pattern=0x55)
        storage = dataplane.DataPlane(self.path('storage'))
        self.addCleanup(storage.close)
        sock = storage.export_nbd('remote', (path, 'qcow2'))
        source = ('nbd', sock, 'remote')
        self.assertFails(errno.EINVAL, self.dp.export_nbd, 'loop',
                         ('nbd', self.dp.export_nbd('x', (path, 'qcow2')),
                          'x'))
        self.dp.export_vhost_blk('vhost.0', source, self.path('v.sock'))
        self.dp.set_qos(source, {'rw_ios_per_sec': 1000})
        self.assertEqual(1000, self.dp.throttle_limits(source)['iops-total'])
        self.assertFails(errno.EBUSY, storage.delete_image, path)
        self.dp.delete_export('vhost.0')

    def test_set_qos_changes_throttle_groups(self):
        path = self.lvol()
        source = (path, 'qcow2')
        self.dp.set_qos(source, {'rw_ios_per_sec': 2000,
                                 'r_mbytes_per_sec': 3})
        self.export('vhost.0', path)
        limits = self.dp.throttle_limits(source)
        self.assertEqual(2000, limits['iops-total'])
        self.assertEqual(3 * MIB, limits['bps-read'])
        self.dp.set_qos(source, {'rw_mbytes_per_sec': 10,
                                 'w_mbytes_per_sec': 1,
                                 'r_mbytes_per_sec': 0})
        limits = self.dp.throttle_limits(source)
        self.assertEqual((2000, 10 * MIB, 0, MIB),
                         (limits['iops-total'], limits['bps-total'],
                          limits['bps-read'], limits['bps-write']))
        self.assertFails(errno.EINVAL, self.dp.set_qos, source,
                         {'r_ios_per_sec': 1})

    def test_close_kills_daemon_and_removes_sockets(self):
        path = self.lvol()
        sock = self.export('vhost.0', path)
        nbd = self.dp.export_nbd('vol', (path, 'qcow2'))
        pid = self.dp.daemon_pid
        self.dp.close()
        self.assertFalse(os.path.exists(sock))
        self.assertFalse(os.path.exists(nbd))
        self.assertFalse(os.path.exists('/proc/%d' % pid))
        self.assertEqual(['lvol'], sorted(
            n for n in os.listdir(self.dir) if n != 'work'))
        self.dp.delete_image(path)


class TestLive(DataPlaneTestCase):

    def test_live_snapshot_keeps_export(self):
        path = self.lvol(pattern=0x11)
        self.export('vhost.0', path)
        snap = self.path('snap')
        self.dp.snapshot_image(path, snap)
        self.nbd_io(path, 'write -P 0x22 0 4k')
        self.assertEqual(b'\x22\x11', self.dp.read(path, 4095, 2))
        self.assertEqual(b'\x11\x11', self.dp.read(snap, 4095, 2))
        self.assertEqual(snap, backing_of(path))
        self.assertFails(errno.EBUSY, self.dp.delete_image, snap)
        self.assertEqual([(0, CLUSTER)], self.dp.allocated_extents(path))

    def test_live_resize(self):
        path = self.lvol(pattern=0x11)
        self.export('vhost.0', path)
        self.dp.export_nbd('vol', (path, 'qcow2'))
        self.assertFails(errno.EBUSY, self.dp.resize_image, path, 8 * MIB)
        self.dp.delete_nbd_export('vol')
        self.dp.resize_image(path, 8 * MIB)
        self.nbd_io(path, 'write -P 0x66 7M 4k')
        self.assertEqual(b'\x66\x00', self.dp.read(path, 7 * MIB + 4095, 2))
        self.assertEqual(b'\x11', self.dp.read(path, 0, 1))

    def test_live_rebase_to_none(self):
        path = self.lvol(pattern=0x11)
        self.export('vhost.0', path)
        self.dp.snapshot_image(path, self.path('snap'))
        self.nbd_io(path, 'write -P 0x22 1M 4k')
        self.dp.rebase_image(path, None)
        self.assertIsNone(backing_of(path))
        self.dp.delete_image(self.path('snap'))
        self.assertEqual(b'\x11\x22', self.dp.read(path, 0, 1) +
                         self.dp.read(path, MIB, 1))
        self.nbd_io(path, 'read -P 0x11 0 64k', readonly=True)

    def test_live_rebase_to_grandparent(self):
        path = self.lvol(pattern=0x11)
        self.export('vhost.0', path)
        self.dp.snapshot_image(path, self.path('snap1'))
        self.nbd_io(path, 'write -P 0x22 1M 4k')
        self.dp.snapshot_image(path, self.path('snap2'))
        self.nbd_io(path, 'write -P 0x33 2M 4k')
        elsewhere = self.lvol('elsewhere')
        self.assertFails(errno.EINVAL, self.dp.rebase_image, path,
                         (elsewhere, 'qcow2'))
        self.dp.rebase_image(path, (self.path('snap1'), 'qcow2'))
        self.assertEqual(self.path('snap1'), backing_of(path))
        self.dp.delete_image(self.path('snap2'))
        self.assertFails(errno.EBUSY, self.dp.delete_image,
                         self.path('snap1'))
        self.assertEqual(b'\x11\x22\x33', self.dp.read(path, 0, 1) +
                         self.dp.read(path, MIB, 1) +
                         self.dp.read(path, 2 * MIB, 1))
