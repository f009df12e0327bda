"""spdk-vhost-upgrade under a guest writing to a local and a remote disk.

One TCG guest (its boot is the slow part, so one for all the scenarios)
on two vhost-blk controllers of a polling compute ``vhost`` target: a
thin lvol of its own (vda) and a volume of an ``nvmf_tgt`` storage
target over NVMe/TCP (vdb). A background writer on each disk walks
through fresh blocks while, in turn, the compute target is upgraded
26.01 -> 26.05, the storage target 26.01 -> 26.05 (``force``: a host is
connected), and an upgrade of the compute target whose new binary fails
to start is rolled back. After each: no write failed, every block the
writer wrote reads back, a new write verifies, and the target takes new
objects (an lvol, a vhost controller, a snapshot of a volume in use).

The guest's longest I/O stall per disk and scenario is printed, not
asserted (but for a sanity bound): the figure of the upgrade guide.
"""

import hashlib
import os

import fixtures

from spdk_vhost_core import exception as spdk_exc
from testbed.guest import qemu
from testbed.guest import writer
from testbed import spdk_build
from tests.functional import test_upgrade

OLD, NEW = test_upgrade.OLD, test_upgrade.NEW
MiB = 1024 * 1024
BLOCK = 4096
#: Blocks each writer walks through in one scenario: more than it
#: writes there, so none is written twice and each can be checked.
BLOCKS = 1024
#: vda: the compute target's own lvol; vdb: the storage target's volume.
DISKS = {'vda': 'local lvol', 'vdb': 'remote volume'}
#: Where a fresh write is verified after each scenario (the lvols are
#: 16 MiB; the scenarios' blocks fill the first 12).
CHECK_AT = 15 * MiB
#: Far above any stall an upgrade causes; an I/O error would come first.
STALL_BOUND_MS = 30000
#: Below any stall of a disk whose target went away (a new target takes
#: 0.35 s to answer, QEMU and the NVMe-oF initiator retry each second):
#: a writer that saw less did not measure the gap.
STALL_SEEN_MS = 300


def sha256(data):
    return hashlib.sha256(data).hexdigest()


class UpgradeUnderGuestTest(test_upgrade.UpgradeCase):

    def setUp(self):
        super().setUp()
        # A guard against a hang, not a measure: three upgrades under one
        # TCG guest boot, on a machine the other test lane shares (180 s
        # ran out once while the benchmark test ran beside it). Each step
        # has a deadline of its own.
        self.useFixture(fixtures.Timeout(600, gentle=True))

    def test_upgrades_under_a_writing_guest(self):
        storage, storage_client = self._target('nvmf_tgt', OLD,
                                               interrupt_mode=True)
        port = self._export(storage, storage_client)
        # Polls: the NVMe-oF initiator does not work in interrupt mode.
        compute, client = self._target('vhost', OLD)
        lvol = self._local_volume(compute, client)
        client.call('vhost_create_blk_controller',
                    {'ctrlr': 'local.vhost', 'dev_name': lvol})
        self._attach(client, port)
        guest = self.useFixture(qemu.GuestFixture([
            qemu.VhostUserDisk(os.path.join(compute.vhost_dir, ctrlr),
                               reconnect=1)
            for ctrlr in ('local.vhost', 'remote.vhost')])).guest

        def upgrade_compute():
            self._upgrade(compute, spdk_build.tree(NEW))
            self.assertEqual(NEW, self._version(client))
            self._assert_connected(client)

        self._under_writers(guest, 0, 'compute target %s -> %s' % (
            OLD, NEW), upgrade_compute, stalled=DISKS)
        self._serves_compute(client, lvol, 'after-compute')

        def upgrade_storage():
            self._upgrade(storage, spdk_build.tree(NEW), force=True)
            self.assertEqual(NEW, self._version(storage_client))
            self._assert_connected(client)

        self._under_writers(guest, 1, 'storage target %s -> %s' % (
            OLD, NEW), upgrade_storage, stalled=['vdb'])
        self._serves_storage(storage_client, 'after-storage')
        self._serves_compute(client, lvol, 'after-storage')

        def failed_upgrade():
            err = self.assertRaises(spdk_exc.RolledBack, self._upgrade,
                                    compute, self._broken_tree('vhost'))
            self.assertIn('exited with 1', str(err))
            self.assertEqual(NEW, self._version(client))
            self._assert_connected(client)

        self._under_writers(guest, 2, 'compute target, new binary fails, '
                            'rolled back', failed_upgrade, stalled=DISKS)
        self._serves_compute(client, lvol, 'after-rollback')

    def _under_writers(self, guest, index, scenario, action, stalled):
        """``action`` under a writer on each disk; check and print.

        ``stalled``: the disks whose target ``action`` restarts.

        Each scenario's writers walk their own fresh (zero) blocks, so
        afterwards the first ``writes`` blocks must hold the pattern and
        the next one must still be zero: no acknowledged write lost, and
        none counted that did not land.
        """
        token = 'scenario-%d' % index
        offset = index * BLOCKS * BLOCK
        for dev in DISKS:
            guest.execute(qemu.writer_start(dev, offset, BLOCK, token,
                                            BLOCKS))
        before = {dev: writer.writes_after(guest, 3, timeout=60, dev=dev)
                  for dev in DISKS}

        action()

        for dev in DISKS:
            now = writer.writes(guest.execute(qemu.writer_status(dev)))
            writer.writes_after(guest, now + 3, timeout=60, dev=dev)
        for dev, label in DISKS.items():
            stopped = guest.execute(qemu.writer_stop(dev), timeout=60)
            writes = int(stopped['writer.writes'])
            gap = int(stopped['writer.max_gap_ms'])
            print('%s, %s: longest guest I/O stall %d ms (%s ms before '
                  'the upgrade), %d writes, %s failed' % (
                      scenario, label, gap,
                      before[dev]['writer.max_gap_ms'], writes,
                      stopped['writer.failures']))
            self.assertEqual('0', stopped['writer.failures'],
                             '%s, %s: %s' % (scenario, label,
                                             guest.kernel_log()[-20:]))
            self.assertLess(gap, STALL_BOUND_MS)
            if dev in stalled:
                self.assertGreater(gap, STALL_SEEN_MS)
            self._check_blocks(guest, dev, offset, token, writes)

    def _check_blocks(self, guest, dev, offset, token, writes):
        self.assertLess(writes, BLOCKS, 'the writer wrapped around')
        block = qemu.pattern_bytes(token, BLOCK)
        read = guest.execute(qemu.read_back(dev, offset, writes * BLOCK))
        self.assertEqual(sha256(block * writes),
                         read['%s.read@%d' % (dev, offset)])
        after = offset + writes * BLOCK
        read = guest.execute(qemu.read_back(dev, after, BLOCK))
        self.assertEqual(sha256(b'\0' * BLOCK), read['%s.read@%d'
                                                     % (dev, after)])
        checked = guest.execute(qemu.check_pattern(
            dev, CHECK_AT, BLOCK, token + '-after'))
        self.assertEqual('ok', checked['%s.verify@%d' % (dev, CHECK_AT)])

    def _serves_compute(self, client, lvol, name):
        """A new lvol and vhost controller, a snapshot of the guest's."""
        new = client.call('bdev_lvol_create', {
            'lvs_name': 'lvs0', 'lvol_name': name, 'size_in_mib': 4,
            'thin_provision': True})
        client.call('vhost_create_blk_controller',
                    {'ctrlr': name + '.vhost', 'dev_name': new})
        self.assertEqual([new], [
            c['backend_specific']['block']['bdev']
            for c in client.call('vhost_get_controllers',
                                 {'name': name + '.vhost'})])
        self._snapshot(client, lvol, name + '-snap')

    def _serves_storage(self, client, name):
        """A new lvol, and a snapshot of the exported volume."""
        client.call('bdev_lvol_create', {
            'lvs_name': 'lvs0', 'lvol_name': name, 'size_in_mib': 4,
            'thin_provision': True})
        self._snapshot(client, 'lvs0/vol', name + '-snap')

    def _snapshot(self, client, lvol, name):
        snap = client.call('bdev_lvol_snapshot',
                           {'lvol_name': lvol, 'snapshot_name': name})
        [bdev] = client.call('bdev_get_bdevs', {'name': snap})
        self.assertTrue(bdev['driver_specific']['lvol']['snapshot'])
