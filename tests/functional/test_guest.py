"""The test guest against real SPDK vhost-user-blk controllers.

A real interrupt-mode SPDK ``vhost`` target serves raw files (``bdev_aio``)
over vhost-user-blk; the guest boots under QEMU TCG with hugepage memory
and does real I/O, and the test checks the raw files on the host. This
proves the guest tooling the SPDK tests build on, and what a connected
guest means to SPDK (a session that holds its controller).
"""

import gzip
import hashlib
import json
import lzma
import os
import shutil
import subprocess
import time

import fixtures

from testbed.guest import initramfs
from testbed.guest import qemu
from testbed.guest import writer
from testbed import rpc_raw
from testbed import spdk_target
from tests import base

MiB = 1024 * 1024


class SpdkVhostExports(fixtures.Fixture):
    """A real SPDK ``vhost`` target exporting fresh raw files.

    exports: (name, size in bytes) pairs; each file is an AIO bdev (no
    cache in SPDK: the host reads what the guest wrote) behind a
    vhost-blk controller of the same name. After setUp, ``socket(name)``
    and ``image(name)`` give each export's paths.
    """

    def __init__(self, exports):
        super().__init__()
        self.exports = exports

    def socket(self, name):
        return os.path.join(self.target.vhost_dir, name)

    def image(self, name):
        return os.path.join(self.path, name + '.raw')

    def _setUp(self):
        self.path = self.useFixture(fixtures.TempDir()).path
        for name, size in self.exports:
            with open(self.image(name), 'wb') as f:
                f.truncate(size)
        self.target = self.useFixture(spdk_target.SpdkTarget(
            app='vhost', interrupt_mode=True, name='vhost'))
        self._export()

    def _export(self):
        for name, _size in self.exports:
            self.target.rpc('bdev_aio_create', {
                'name': name, 'filename': self.image(name),
                'block_size': 512})
            self.target.rpc('vhost_create_blk_controller', {
                'ctrlr': name, 'dev_name': name})

    def restart(self):
        """Stop and start again on the same files, like a service restart.

        The controllers are made again on the same socket paths, as the
        target's saved config would.
        """
        self.target.stop()
        self.target.start()
        self._export()

    def seen(self, guest):
        """What a guest that lost its disks and the target show."""
        try:
            controllers = self.target.rpc('vhost_get_controllers')
        except Exception as err:  # a failure message: say why not
            controllers = 'no answer: %s' % err
        try:
            kernel_log = '\n'.join(guest.kernel_log()[-20:])
        except Exception as err:
            kernel_log = 'no answer: %s' % err
        # A new request kicks the queue: whether the writer then goes on
        # tells a lost notification from a lost connection.
        try:
            before = guest.execute(qemu.writer_status())['writer.writes']
            guest.execute(qemu.read_back('vda', 0, 4096), timeout=30)
            after = guest.execute(qemu.writer_status())['writer.writes']
            probe = ('a read of vda returned; the writer went from %s to %s '
                     'writes' % (before, after))
        except Exception as err:
            probe = 'a read of vda did not return: %s' % err
        return ('--- vhost controllers ---\n%s\n--- guest kernel ---\n%s\n'
                '--- probe ---\n%s\n--- guest ---\n%s\n--- target log ---\n'
                '%s' % (controllers, kernel_log, probe, guest.failure_tail(),
                        self.target.log()))

    def controller(self, name):
        [ctrlr] = self.target.rpc('vhost_get_controllers', {'name': name})
        return ctrlr

    def wait_sessions(self, name, count, timeout=60):
        """The controller once it has ``count`` connected guests."""
        deadline = time.monotonic() + timeout
        while True:
            ctrlr = self.controller(name)
            if len(ctrlr['sessions']) == count:
                return ctrlr
            if time.monotonic() > deadline:
                raise AssertionError('%s sessions: %r' % (
                    name, ctrlr['sessions']))
            time.sleep(0.1)


class TestGuestOnSpdk(base.TestCase):
    """Boot the guest on real SPDK vhost-blk controllers, check the I/O."""

    def setUp(self):
        super().setUp()
        initramfs.find_kernel()
        self.assertIsNotNone(shutil.which('qemu-system-x86_64'),
                             'qemu-system-x86_64 not installed (bindep.txt)')
        # TCG boots take ~5 s here; leave room for slow, busy CI hosts.
        self.useFixture(fixtures.Timeout(400, gentle=True))

    def _guest(self, disks, **kwargs):
        guest = qemu.Guest(disks, **kwargs)
        self.addCleanup(guest.cleanup)
        return guest

    def _read(self, path, offset, length):
        with open(path, 'rb') as f:
            f.seek(offset)
            return f.read(length)

    def test_two_disks_pattern_size_and_queues(self):
        exports = self.useFixture(SpdkVhostExports(
            [('big', 64 * MiB), ('small', 24 * MiB)]))
        guest = self._guest(
            [qemu.VhostUserDisk(exports.socket('big'), num_queues=2),
             qemu.VhostUserDisk(exports.socket('small'), num_queues=1)],
            vcpus=2)
        big_at, small_at, length = 5 * MiB + 4096, 20 * MiB, 12288
        results = guest.run(qemu.script(
            qemu.all_disks(),
            qemu.check_pattern('vda', big_at, length, 'big-disk-pattern'),
            qemu.write_pattern('vdb', small_at, length, 'small-pattern')))

        self.assertEqual('vda,vdb', results['disks'])
        self.assertEqual(str(64 * MiB), results['vda.size'])
        self.assertEqual(str(24 * MiB), results['vdb.size'])
        self.assertEqual('2', results['vda.queues'])
        self.assertEqual('1', results['vdb.queues'])
        self.assertEqual('0000:00:10.0', results['vda.pci'])
        self.assertEqual('0000:00:11.0', results['vdb.pci'])
        self.assertEqual('ok', results['vda.verify@%d' % big_at])

        # The bytes really reached each backing file, at the right offset
        # and nowhere around it.
        for name, offset, token in (('big', big_at, 'big-disk-pattern'),
                                    ('small', small_at, 'small-pattern')):
            image = exports.image(name)
            self.assertEqual(qemu.pattern_bytes(token, length),
                             self._read(image, offset, length))
            self.assertEqual(b'\0' * 4096,
                             self._read(image, offset - 4096, 4096))
            self.assertEqual(b'\0' * 4096,
                             self._read(image, offset + length, 4096))
        self.assertIsNotNone(guest.boot_seconds)
        self.assertFalse(guest.running)

    def test_queues_capped_by_vcpus(self):
        # The guest uses min(vCPUs, device queues), as Nova configures it.
        exports = self.useFixture(SpdkVhostExports([('disk', 8 * MiB)]))
        guest = self._guest(
            [qemu.VhostUserDisk(exports.socket('disk'), num_queues=2)],
            vcpus=1)
        results = guest.run(qemu.disk_info('vda'))
        self.assertEqual('1', results['vda.queues'])

    def test_long_running_guest_takes_commands(self):
        exports = self.useFixture(SpdkVhostExports([('disk', 16 * MiB)]))
        guest = self.useFixture(qemu.GuestFixture(
            [qemu.VhostUserDisk(exports.socket('disk'))],
            memory_backend='file')).guest
        self.assertTrue(guest.running)

        guest.execute(qemu.write_pattern('vda', 4096, 8192, 'first'))
        self.assertEqual(qemu.pattern_bytes('first', 8192),
                         self._read(exports.image('disk'), 4096, 8192))
        # Data written behind the guest's back is what it reads back:
        # its reads bypass the page cache.
        with open(exports.image('disk'), 'r+b') as f:
            f.seek(4096)
            f.write(qemu.pattern_bytes('host', 8192))
        read = guest.execute(qemu.read_back('vda', 4096, 8192))
        self.assertEqual(
            hashlib.sha256(qemu.pattern_bytes('host', 8192)).hexdigest(),
            read['vda.read@4096'])
        timed = guest.execute(qemu.time_read('vda', 0, 16 * MiB))
        self.assertLess(int(timed['vda.read_ms@0']), 60000)

        # Errors come back as results, the guest stays up.
        failed = guest.execute(
            qemu.write_pattern('vda', 16 * MiB, 4096, 'beyond'),
            check=False)
        self.assertEqual(1, failed.rc)
        self.assertIn('No space left on device', failed.errors[0])
        self.assertRaises(qemu.GuestScriptError, guest.execute, 'false')
        self.assertTrue(any('virtio_blk' in line
                            for line in guest.kernel_log()))
        guest.stop()
        self.assertFalse(guest.running)

    def _connected(self, exports, name):
        guest = self.useFixture(qemu.GuestFixture(
            [qemu.VhostUserDisk(exports.socket(name))])).guest
        exports.wait_sessions(name, 1)
        return guest

    def test_connected_guest_holds_its_controller(self):
        # A connected guest is an SPDK session. Deleting its controller
        # gets no EBUSY: SPDK v26.05 re-queues the request until the guest
        # goes, then answers (the connector must not ask while a session
        # is listed). The session's open I/O channel also lets a QoS limit
        # change (with none, any change after the first fails: EAGAIN).
        exports = self.useFixture(SpdkVhostExports([('disk', 8 * MiB)]))
        target = exports.target
        target.rpc('bdev_set_qos_limit', {'name': 'disk',
                                          'rw_ios_per_sec': 2000})
        guest = self._connected(exports, 'disk')
        pending = rpc_raw.RawClient(target.socket_path, timeout=120)
        self.addCleanup(pending.close)
        pending.send_raw(json.dumps({
            'jsonrpc': '2.0', 'id': 1, 'method': 'vhost_delete_controller',
            'params': {'ctrlr': 'disk'}}).encode())

        self.assertTrue(target.rpc('bdev_set_qos_limit', {
            'name': 'disk', 'rw_ios_per_sec': 5000}))
        [bdev] = target.rpc('bdev_get_bdevs', {'name': 'disk'})
        self.assertEqual(5000, bdev['assigned_rate_limits']['rw_ios_per_sec'])
        self.assertEqual(1, len(exports.controller('disk')['sessions']))

        guest.stop()
        self.assertEqual({'jsonrpc': '2.0', 'id': 1, 'result': True},
                         pending.recv())
        self.assertEqual([], target.rpc('vhost_get_controllers'))

    def test_bdev_removed_under_a_connected_guest(self):
        # SPDK does not refuse it: the controller stays, with no bdev, so
        # the drivers must refuse to delete a volume in use themselves.
        exports = self.useFixture(SpdkVhostExports([('disk', 8 * MiB)]))
        guest = self._connected(exports, 'disk')

        self.assertTrue(exports.target.rpc('bdev_aio_delete',
                                           {'name': 'disk'}))

        ctrlr = exports.controller('disk')
        self.assertIsNone(ctrlr['backend_specific']['block']['bdev'])
        failed = guest.execute(qemu.read_back('vda', 0, 4096), check=False,
                               timeout=60)
        self.assertNotEqual(0, failed.rc, failed)

    def test_writing_guest_survives_storage_restart(self):
        exports = self.useFixture(SpdkVhostExports([('disk', 8 * MiB)]))
        guest = self.useFixture(qemu.GuestFixture(
            [qemu.VhostUserDisk(exports.socket('disk'), reconnect=1)])).guest
        guest.execute(qemu.writer_start('vda', MiB, 65536, 'background'))
        before = writer.writes(writer.writes_after(guest, 0, timeout=60))

        exports.restart()

        # QEMU reconnects every second; a TCG guest on a loaded machine
        # may take a while to get its requests going again.
        writer.writes_after(guest, timeout=180,
                            on_timeout=lambda: exports.seen(guest))
        stopped = guest.execute(qemu.writer_stop())
        self.assertGreater(int(stopped['writer.writes']), before)
        self.assertEqual('0', stopped['writer.failures'])
        self.assertEqual(qemu.pattern_bytes('background', 65536),
                         self._read(exports.image('disk'), MiB, 65536))

    def test_script_failure_reports_errors_and_kernel_log(self):
        exports = self.useFixture(SpdkVhostExports([('disk', 4 * MiB)]))
        guest = self._guest([exports.socket('disk')])
        err = self.assertRaises(
            qemu.GuestScriptError, guest.run,
            qemu.script(qemu.read_back('vda', 4 * MiB, 4096),
                        qemu.disk_info('vda')))
        self.assertEqual(1, err.results.rc)
        self.assertIn('short read', err.results.errors[0])
        # set -e stopped the script at the first failure.
        self.assertNotIn('vda.size', err.results.values)
        self.assertTrue(any('virtio_blk' in line
                            for line in err.results.kernel_log))

    def test_boot_timeout_kills_qemu(self):
        exports = self.useFixture(SpdkVhostExports([('disk', 4 * MiB)]))
        guest = self._guest([exports.socket('disk')], boot_timeout=0.5)
        err = self.assertRaises(qemu.GuestTimeout, guest.run, 'true')
        self.assertIn('not at boot', str(err))
        self.assertFalse(guest.running)

    def test_refuses_to_boot_without_enough_hugepages(self):
        exports = self.useFixture(SpdkVhostExports([('disk', 4 * MiB)]))
        info = qemu._meminfo('/proc/meminfo')
        too_much = (info['HugePages_Free'] + 1) * 2
        guest = self._guest([exports.socket('disk')], memory_mib=too_much)
        err = self.assertRaises(qemu.HugepagesUnavailable, guest.run, 'true')
        self.assertIn('setup-hugepages.sh', str(err))
        self.assertFalse(guest.running)


class TestCheckHugepages(base.TestCase):
    """The refusal logic, on meminfo/mounts files written by the test."""

    MEMINFO = ('HugePages_Total:     {total}\nHugePages_Free:      {free}\n'
               'HugePages_Rsvd:      {rsvd}\nHugepagesize:       {size} kB\n')

    def _files(self, free, rsvd=0, size=2048, mounts=''):
        tmp = self.useFixture(fixtures.TempDir()).path
        meminfo = os.path.join(tmp, 'meminfo')
        with open(meminfo, 'w') as f:
            f.write(self.MEMINFO.format(total=1024, free=free, rsvd=rsvd,
                                        size=size))
        mounts_path = os.path.join(tmp, 'mounts')
        with open(mounts_path, 'w') as f:
            f.write('proc /proc proc rw 0 0\n' + mounts)
        return meminfo, mounts_path

    def test_enough_pages(self):
        meminfo, mounts = self._files(
            free=128, mounts='nodev /mnt/huge hugetlbfs rw,pagesize=2M 0 0\n')
        self.assertEqual('/mnt/huge', qemu.check_hugepages(
            256, 'file', meminfo=meminfo, mounts=mounts))

    def test_reserved_pages_are_not_free(self):
        meminfo, mounts = self._files(free=128, rsvd=1)
        self.assertRaises(qemu.HugepagesUnavailable, qemu.check_hugepages,
                          256, meminfo=meminfo, mounts=mounts)

    def test_no_pages(self):
        meminfo, mounts = self._files(free=0)
        err = self.assertRaises(qemu.HugepagesUnavailable,
                                qemu.check_hugepages, 2,
                                meminfo=meminfo, mounts=mounts)
        self.assertIn('needs 1 free 2 MiB hugepages, the host has 0',
                      str(err))

    def test_file_backend_needs_a_2m_mount(self):
        meminfo, mounts = self._files(
            free=512, mounts='nodev /mnt/g hugetlbfs rw,pagesize=1024M 0 0\n')
        self.assertIsNone(qemu.check_hugepages(
            256, 'memfd', meminfo=meminfo, mounts=mounts))
        self.assertRaises(qemu.HugepagesUnavailable, qemu.check_hugepages,
                          256, 'file', meminfo=meminfo, mounts=mounts)

    def test_odd_memory_size(self):
        meminfo, mounts = self._files(free=512)
        self.assertRaises(qemu.HugepagesUnavailable, qemu.check_hugepages,
                          255, meminfo=meminfo, mounts=mounts)


class TestResults(base.TestCase):

    def test_parses_marked_lines_among_console_noise(self):
        results = qemu.Results([
            '\x1b[?7l@@RESULT vda.size=1048576',
            '[    1.2] virtio_blk virtio1: [vda] 2048 512-byte blocks',
            '@@RESULT key=value=with=equals',
            '@@ERROR vdb: short read',
            '@@DMESG-BEGIN',
            '[    0.0] Linux version 6.1',
            '@@DMESG-END',
        ], rc=1)
        self.assertEqual({'vda.size': '1048576',
                          'key': 'value=with=equals'}, results.values)
        self.assertEqual(['vdb: short read'], results.errors)
        self.assertEqual(['[    0.0] Linux version 6.1'], results.kernel_log)
        self.assertFalse(results.ok)

    def test_pattern_bytes(self):
        self.assertEqual(b'ab\nab\nab', qemu.pattern_bytes('ab', 8))
        self.assertEqual(b'', qemu.pattern_bytes('ab', 0))


class TestInitramfs(base.TestCase):
    """The cpio builder, on the real kernel modules and busybox."""

    def setUp(self):
        super().setUp()
        self.kernel = initramfs.find_kernel()
        self.busybox = initramfs.find_busybox()
        self.cache = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.EnvironmentVariable(
            initramfs.CACHE_ENV, self.cache))

    def _entries(self, path):
        with open(path, 'rb') as f:
            return {e.name: e for e in initramfs.read_cpio(f.read())}

    def test_archive_lists_expected_files(self):
        entries = self._entries(initramfs.build(self.kernel))
        order = [initramfs.module_name(m)
                 for m in initramfs.module_load_order(self.kernel)]
        self.assertIn('virtio_blk', order)
        self.assertLess(order.index('virtio'), order.index('virtio_blk'))
        self.assertEqual(''.join(m + '\n' for m in order).encode(),
                         entries['etc/modules'].data)
        for name in order:
            self.assertIn('lib/modules/%s.ko' % name, entries)
            self.assertEqual(b'\x7fELF',
                             entries['lib/modules/%s.ko' % name].data[:4])
        self.assertEqual(0o100755, entries['init'].mode)
        with open(self.busybox, 'rb') as f:
            self.assertEqual(f.read(), entries['bin/busybox'].data)
        self.assertEqual(b'busybox', entries['bin/sh'].data)
        self.assertEqual(0o020600, entries['dev/console'].mode)
        self.assertEqual((5, 1), entries['dev/console'].rdev)
        self.assertIn('lib/guest.sh', entries)

    def test_gnu_cpio_reads_the_archive(self):
        # An independent reader agrees with ours about the contents.
        cpio = shutil.which('cpio')
        self.assertIsNotNone(cpio, 'cpio not installed (bindep.txt)')
        path = initramfs.build(self.kernel)
        with open(path, 'rb') as f:
            listing = subprocess.run(
                [cpio, '-t', '--quiet'], input=gzip.decompress(f.read()),
                stdout=subprocess.PIPE, check=True).stdout.decode().split()
        self.assertEqual(sorted(self._entries(path)), sorted(listing))

    def test_cache_is_reused_and_keyed_by_inputs(self):
        first = initramfs.build(self.kernel)
        mtime = os.stat(first).st_mtime_ns
        self.assertEqual(first, initramfs.build(self.kernel))
        self.assertEqual(mtime, os.stat(first).st_mtime_ns)
        self.assertEqual([os.path.basename(first)], os.listdir(self.cache))

        other = os.path.join(self.useFixture(fixtures.TempDir()).path,
                             'busybox')
        shutil.copy(self.busybox, other)
        with open(other, 'ab') as f:
            f.write(b'\0')
        self.assertNotEqual(first, initramfs.build(self.kernel, other))

    def test_appended_script_archive(self):
        base_path = initramfs.build(self.kernel)
        with open(base_path, 'rb') as f:
            base_bytes = f.read()
        dest = os.path.join(self.useFixture(fixtures.TempDir()).path, 'rd')
        initramfs.make_initrd(dest, 'gt_disks\n', self.kernel)
        with open(dest, 'rb') as f:
            combined = f.read()
        self.assertTrue(combined.startswith(base_bytes))
        entries = initramfs.read_cpio(combined)
        self.assertEqual('run.sh', entries[-1].name)
        self.assertEqual(b'gt_disks\n', entries[-1].data)
        self.assertEqual(0o100755, entries[-1].mode)
        # The cached archive was not touched.
        with open(base_path, 'rb') as f:
            self.assertEqual(base_bytes, f.read())

    def test_builtin_modules_are_left_out(self):
        config = os.path.join(self.useFixture(fixtures.TempDir()).path,
                              'config')
        with open(config, 'w') as f:
            f.write('CONFIG_VIRTIO_PCI=y\nCONFIG_VIRTIO_BLK=m\n')
        kernel = self.kernel._replace(config=config)
        order = [initramfs.module_name(m)
                 for m in initramfs.module_load_order(kernel)]
        self.assertEqual('virtio_blk', order[-1])
        self.assertNotIn('virtio_pci', order)

    def test_missing_driver_is_an_error(self):
        kernel = self.kernel._replace(config=None)
        self.assertRaises(
            initramfs.InitramfsError, initramfs.module_load_order, kernel,
            (('no_such_module', 'CONFIG_NO_SUCH'),))

    def test_compressed_modules_are_decompressed(self):
        plain_path = os.path.join(
            self.kernel.modules_dir,
            initramfs.module_load_order(self.kernel)[-1])
        plain = initramfs.read_module(plain_path)
        tmp = self.useFixture(fixtures.TempDir()).path
        for suffix, compress in (('.xz', lzma.compress),
                                 ('.gz', gzip.compress)):
            path = os.path.join(tmp, 'virtio_blk.ko' + suffix)
            with open(path, 'wb') as f:
                f.write(compress(plain))
            self.assertEqual(plain, initramfs.read_module(path))
            self.assertEqual('virtio_blk', initramfs.module_name(path))

    def test_dynamic_busybox_is_refused(self):
        # Any dynamically linked binary stands in for a non-static busybox.
        dynamic = shutil.which('ls')
        self.assertRaises(initramfs.InitramfsError,
                          initramfs.find_busybox, dynamic)
