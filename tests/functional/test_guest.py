"""The test guest against real vhost-user-blk exports.

qemu-storage-daemon serves raw files over vhost-user-blk; the guest boots
under QEMU TCG with hugepage memory and does real I/O, and the test checks
the raw files on the host. No SPDK is involved: this proves the guest
tooling itself, which the SPDK tests build on.
"""

import gzip
import hashlib
import lzma
import os
import shutil
import subprocess
import time

import fixtures

from testbed.guest import initramfs
from testbed.guest import qemu
from tests import base

MiB = 1024 * 1024


class QemuStorageDaemon(fixtures.Fixture):
    """qemu-storage-daemon exporting fresh raw files over vhost-user-blk.

    exports: (name, size in bytes, num_queues) tuples. After setUp,
    ``socket(name)`` and ``image(name)`` give each export's paths.
    """

    def __init__(self, exports):
        super().__init__()
        self.exports = exports

    def socket(self, name):
        return os.path.join(self.path, name + '.sock')

    def image(self, name):
        return os.path.join(self.path, name + '.raw')

    def _setUp(self):
        # No skip when a part is missing: make test installs them all,
        # and a suite that skips its real parts proves nothing.
        self.binary = shutil.which('qemu-storage-daemon')
        if not self.binary:
            raise RuntimeError('qemu-storage-daemon is not installed '
                               '(see bindep.txt)')
        self.path = self.useFixture(fixtures.TempDir()).path
        for name, size, _queues in self.exports:
            with open(self.image(name), 'wb') as f:
                f.truncate(size)
        self.process = None
        self.addCleanup(self._stop)
        self._start()

    def _start(self):
        args = [self.binary]
        for name, _size, queues in self.exports:
            args += ['--blockdev', 'driver=file,node-name=%s,filename=%s'
                     % (name, self.image(name)),
                     '--export', 'type=vhost-user-blk,id=%s-export,'
                     'node-name=%s,addr.type=unix,addr.path=%s,writable=on,'
                     'num-queues=%d' % (name, name, self.socket(name), queues)]
        with open(self._log, 'ab') as log:
            self.process = subprocess.Popen(args, stdout=log,
                                            stderr=subprocess.STDOUT)
        self._wait_for_sockets()

    @property
    def _log(self):
        return os.path.join(self.path, 'qsd.log')

    def restart(self):
        """Stop and start again on the same images, like a target restart."""
        self._stop()
        for name, _size, _queues in self.exports:
            if os.path.exists(self.socket(name)):
                os.unlink(self.socket(name))
        self._start()

    def _wait_for_sockets(self):
        deadline = time.monotonic() + 10
        while not all(os.path.exists(self.socket(name))
                      for name, _size, _queues in self.exports):
            if self.process.poll() is not None or \
                    time.monotonic() > deadline:
                with open(self._log) as f:
                    raise RuntimeError('qemu-storage-daemon did not come up '
                                       '(rc=%s): %s'
                                       % (self.process.poll(), f.read()))
            time.sleep(0.05)

    def _stop(self):
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.process.wait()


class TestGuestOnStorageDaemon(base.TestCase):
    """Boot the guest on qemu-storage-daemon exports and check the I/O."""

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
        qsd = self.useFixture(QemuStorageDaemon(
            [('big', 64 * MiB, 2), ('small', 24 * MiB, 1)]))
        guest = self._guest(
            [qemu.VhostUserDisk(qsd.socket('big'), num_queues=2),
             qemu.VhostUserDisk(qsd.socket('small'), num_queues=1)],
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
            image = qsd.image(name)
            self.assertEqual(qemu.pattern_bytes(token, length),
                             self._read(image, offset, length))
            self.assertEqual(b'\0' * 4096,
                             self._read(image, offset - 4096, 4096))
            self.assertEqual(b'\0' * 4096,
                             self._read(image, offset + length, 4096))
        self.assertIsNotNone(guest.boot_seconds)
        self.assertFalse(guest.running)

    def test_queues_capped_by_vcpus(self):
        # The guest uses min(vCPUs, device queues), as DESIGN.md expects.
        qsd = self.useFixture(QemuStorageDaemon([('disk', 8 * MiB, 2)]))
        guest = self._guest(
            [qemu.VhostUserDisk(qsd.socket('disk'), num_queues=2)], vcpus=1)
        results = guest.run(qemu.disk_info('vda'))
        self.assertEqual('1', results['vda.queues'])

    def test_long_running_guest_takes_commands(self):
        qsd = self.useFixture(QemuStorageDaemon([('disk', 16 * MiB, 1)]))
        guest = self.useFixture(qemu.GuestFixture(
            [qemu.VhostUserDisk(qsd.socket('disk'))],
            memory_backend='file')).guest
        self.assertTrue(guest.running)

        guest.execute(qemu.write_pattern('vda', 4096, 8192, 'first'))
        self.assertEqual(qemu.pattern_bytes('first', 8192),
                         self._read(qsd.image('disk'), 4096, 8192))
        # Data written behind the guest's back is what it reads back:
        # its reads bypass the page cache.
        with open(qsd.image('disk'), 'r+b') as f:
            f.seek(4096)
            f.write(qemu.pattern_bytes('host', 8192))
        read = guest.execute(qemu.read_back('vda', 4096, 8192))
        self.assertEqual(
            hashlib.sha256(qemu.pattern_bytes('host', 8192)).hexdigest(),
            read['vda.read@4096'])

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

    def _writes_after(self, guest, count, timeout=60):
        """Poll the background writer until it has done more than count."""
        deadline = time.monotonic() + timeout
        while True:
            status = guest.execute(qemu.writer_status())
            if int(status['writer.writes']) > count:
                return int(status['writer.writes'])
            if time.monotonic() > deadline:
                self.fail('guest writer stuck at %s writes (%d s): %s'
                          % (count, timeout, status))
            time.sleep(0.5)

    def test_writing_guest_survives_storage_restart(self):
        qsd = self.useFixture(QemuStorageDaemon([('disk', 8 * MiB, 1)]))
        guest = self.useFixture(qemu.GuestFixture(
            [qemu.VhostUserDisk(qsd.socket('disk'), reconnect=1)])).guest
        guest.execute(qemu.writer_start('vda', MiB, 65536, 'background'))
        before = self._writes_after(guest, 0)

        qsd.restart()

        self._writes_after(guest, int(guest.execute(
            qemu.writer_status())['writer.writes']))
        stopped = guest.execute(qemu.writer_stop())
        self.assertGreater(int(stopped['writer.writes']), before)
        self.assertEqual('0', stopped['writer.failures'])
        self.assertEqual(qemu.pattern_bytes('background', 65536),
                         self._read(qsd.image('disk'), MiB, 65536))

    def test_script_failure_reports_errors_and_kernel_log(self):
        qsd = self.useFixture(QemuStorageDaemon([('disk', 4 * MiB, 1)]))
        guest = self._guest([qsd.socket('disk')])
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
        qsd = self.useFixture(QemuStorageDaemon([('disk', 4 * MiB, 1)]))
        guest = self._guest([qsd.socket('disk')], boot_timeout=0.5)
        err = self.assertRaises(qemu.GuestTimeout, guest.run, 'true')
        self.assertIn('not at boot', str(err))
        self.assertFalse(guest.running)

    def test_refuses_to_boot_without_enough_hugepages(self):
        qsd = self.useFixture(QemuStorageDaemon([('disk', 4 * MiB, 1)]))
        info = qemu._meminfo('/proc/meminfo')
        too_much = (info['HugePages_Free'] + 1) * 2
        guest = self._guest([qsd.socket('disk')], memory_mib=too_much)
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
