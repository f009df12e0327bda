"""One logical volume, exposed over vhost-user-blk, written by a real guest.

The chain every later piece builds on: an lvol on a real SPDK target
(``spdk_tgt`` or ``vhost``) in an lvstore on a sparse AIO file, a vhost-blk
controller serving it, a QEMU guest on hugepage-backed memory writing
through that controller, and the bytes read back from the lvol itself. The
read-back uses only SPDK RPCs (the lvol is made read-only and
shallow-copied to an aio file), so it proves the data reached the volume
and not some cache on the way. The base is an AIO file, not malloc: it
costs no hugepages and lets an interrupt-mode target sleep when idle.
"""

import collections
import contextlib
import hashlib
import os
import time

from spdk_vhost_core import exception
from testbed.guest import qemu

MiB = 1024 * 1024

Step = collections.namedtuple('Step', 'name detail seconds')


class VhostChain(object):
    """Builds the chain on ``client``'s target and tears it all down."""

    def __init__(self, client, workdir, prefix='chain', lvol_mib=64,
                 cpumask='0x1'):
        self.client = client
        self.workdir = workdir
        self.prefix = prefix
        self.lvol_mib = lvol_mib
        self.cpumask = cpumask
        self.steps = []
        self._undo = []
        self.base = '%s_base' % prefix
        self.lvs = '%s_lvs' % prefix
        self.lvol = '%s/vol' % self.lvs
        self.ctrlr = '%s.vhost' % prefix
        self.socket = None

    @contextlib.contextmanager
    def _step(self, name):
        start = time.monotonic()
        detail = []
        yield detail
        self.steps.append(Step(name, ' '.join(detail),
                               time.monotonic() - start))

    def build(self):
        """Base bdev, lvstore, thin lvol and its vhost-blk controller."""
        with self._step('base bdev') as detail:
            base_mib = 2 * self.lvol_mib
            path = os.path.join(self._dir('base'), 'lvstore.raw')
            with open(path, 'wb') as image:
                image.truncate(base_mib * MiB)
            self.client.bdev_aio_create(path, self.base, block_size=512)
            self._undo.append(lambda: self.client.bdev_aio_delete(
                self.base))
            detail.append('aio %s, %d MiB sparse' % (self.base, base_mib))
        with self._step('lvstore') as detail:
            uuid = self.client.call('bdev_lvol_create_lvstore', {
                'bdev_name': self.base, 'lvs_name': self.lvs,
                'cluster_sz': MiB})
            self._undo.append(lambda: self.client.call(
                'bdev_lvol_delete_lvstore', {'lvs_name': self.lvs}))
            detail.append('%s (%s)' % (self.lvs, uuid))
        with self._step('thin lvol') as detail:
            uuid = self.client.bdev_lvol_create(
                'vol', self.lvol_mib, lvs_name=self.lvs, thin_provision=True)
            self._undo.append(lambda: self.client.bdev_lvol_delete(
                self.lvol))
            detail.append('%s = %s, %d MiB' % (self.lvol, uuid,
                                               self.lvol_mib))
        with self._step('vhost controller') as detail:
            self.client.vhost_create_blk_controller(
                self.ctrlr, self.lvol, cpumask=self.cpumask)
            self._undo.append(self._delete_controller)
            [ctrlr] = self.client.vhost_get_controllers(self.ctrlr)
            self.socket = ctrlr['socket']
            detail.append('%s cpumask %s' % (self.ctrlr, ctrlr['cpumask']))

    def _delete_controller(self):
        try:
            self.client.vhost_delete_controller(self.ctrlr)
        except exception.NotFound:
            pass  # already gone: read_back deletes it before the copy

    def guest_io(self, offset, length, token):
        """Boot a guest on the controller; it writes, then reads back."""
        with self._step('guest write + read') as detail:
            guest = qemu.Guest([qemu.VhostUserDisk(self.socket)],
                               workdir=self._dir('guest'))
            results = guest.run(qemu.script(
                qemu.disk_info('vda'),
                qemu.write_pattern('vda', offset, length, token),
                qemu.read_back('vda', offset, length)))
            detail.append('%d bytes at %d, guest booted in %.1f s'
                          % (length, offset, guest.boot_seconds or 0))
        return results

    def read_back(self, offset, length, timeout=60):
        """The lvol's bytes at offset, copied out through SPDK RPCs.

        Ends the chain's use of the lvol: the controller is deleted and the
        lvol made read-only, as a shallow copy requires.
        """
        with self._step('read lvol back') as detail:
            self._delete_controller()
            self.client.bdev_lvol_set_read_only(self.lvol)
            path = os.path.join(self._dir('export'), 'lvol.raw')
            with open(path, 'wb') as out:
                out.truncate(self.lvol_mib * MiB)
            out_bdev = '%s_out' % self.prefix
            self.client.bdev_aio_create(path, out_bdev, block_size=512)
            try:
                op = self.client.bdev_lvol_start_shallow_copy(self.lvol,
                                                              out_bdev)
                self._wait_copy(op['operation_id'], timeout)
            finally:
                self.client.bdev_aio_delete(out_bdev)
            with open(path, 'rb') as src:
                src.seek(offset)
                data = src.read(length)
            detail.append('shallow copy to %s' % out_bdev)
        return data

    def _wait_copy(self, operation_id, timeout):
        deadline = time.monotonic() + timeout
        while True:
            state = self.client.bdev_lvol_check_shallow_copy(operation_id)
            if state['state'] == 'complete':
                return
            if state['state'] != 'in progress':
                raise RuntimeError('shallow copy failed: %r' % (state,))
            if time.monotonic() > deadline:
                raise RuntimeError('shallow copy still running after %ss'
                                   % timeout)
            time.sleep(0.1)

    def _dir(self, name):
        path = os.path.join(self.workdir, name)
        os.makedirs(path, exist_ok=True)
        return path

    def teardown(self):
        """Undo every step that was done, newest first."""
        while self._undo:
            self._undo.pop()()


def sha256(data):
    return hashlib.sha256(data).hexdigest()
