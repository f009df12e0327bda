"""The benchmark guest: the test guest plus fio, on either data path.

Same kernel, initramfs, memory (hugepage-backed, shared) and vCPUs for
both paths, so the only difference measured is the disk's data path:

* ``HostBlockDisk``: QEMU's own virtio-blk on the host block layer
  (O_DIRECT, Linux AIO or io_uring, an IOThread): the baseline.
* ``qemu.VhostUserDisk``: vhost-user-blk on an SPDK controller socket.
"""

import base64
import collections
import gzip
import json
import os

from testbed.guest import initramfs
from testbed.guest import qemu

FIO = 'fio'
MEMORY_MIB = 512  # the initramfs with fio's libraries is ~90 MiB

HostBlockDisk = collections.namedtuple('HostBlockDisk', 'path aio')
HostBlockDisk.__new__.__defaults__ = ('io_uring',)
HostBlockDisk.__doc__ = """A host file or block device as QEMU virtio-blk.

aio: 'io_uring' or 'native' (Linux AIO); cache is always direct.
"""


def kvm_usable():
    """Whether this process may run KVM guests (else: TCG)."""
    return os.access('/dev/kvm', os.R_OK | os.W_OK)


def want_fio():
    """Make every test guest this process boots carry fio."""
    os.environ[initramfs.EXTRAS_ENV] = FIO


class BenchGuest(qemu.Guest):
    """A test guest whose disks may also be QEMU virtio-blk (baseline).

    Host-block disks come after the vhost-user ones (vda... first).
    """

    def __init__(self, disks=(), host_disks=(), vcpus=1, accel='tcg',
                 **kwargs):
        self.host_disks = list(host_disks)
        self.accel = accel
        count = len(disks) + len(self.host_disks)
        extra = tuple(kwargs.pop('cmdline_extra', ())) + (
            'gt.disks=%d' % count,)  # the last gt.disks= wins in /init
        kwargs.setdefault('memory_mib', MEMORY_MIB)
        super().__init__(list(disks), vcpus=vcpus, cmdline_extra=extra,
                         **kwargs)

    def _disk_args(self):
        args = super()._disk_args()
        first = len(self.disks)
        for index, disk in enumerate(self.host_disks, start=first):
            args += ['-object', 'iothread,id=iothread%d' % index,
                     '-blockdev', 'driver=file,node-name=file%d,'
                     'filename=%s,aio=%s,cache.direct=on,locking=off'
                     % (index, disk.path, disk.aio),
                     '-blockdev', 'driver=raw,node-name=disk%d,file=file%d'
                     % (index, index),
                     '-device', 'virtio-blk-pci,drive=disk%d,'
                     'iothread=iothread%d,addr=0x%x,id=vblk%d'
                     % (index, index, 0x10 + index, index)]
        return args

    def command_line(self, initrd, hugetlbfs=None):
        cmd = super().command_line(initrd, hugetlbfs)
        cmd[cmd.index('-accel') + 1] = self.accel
        # Thread names in /proc, so the IOThread's CPU time can be read.
        return cmd + ['-name', 'bench,debug-threads=on']

    @property
    def pid(self):
        return self._proc.pid if self._proc is not None else None

    def fio(self, args, timeout):
        """Run fio in the guest; its JSON report, as a dict.

        The report goes over the serial console gzip'd and base64'd on
        one marked line (the console protocol is line-based).
        """
        command = ('fio --output-format=json --output=/tmp/fio.json %s '
                   '>/tmp/fio.err 2>&1 || { gt_error "fio: $(tail -n 3 '
                   '/tmp/fio.err)"; exit 1; }; gt_result fio '
                   '"$(gzip -c /tmp/fio.json | base64 -w 0)"' % args)
        results = self.execute(command, timeout=timeout)
        return json.loads(gzip.decompress(
            base64.b64decode(results['fio'])))
