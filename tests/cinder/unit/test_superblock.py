"""Reading SPDK's RAID superblock, and when a snapshot of a copy is sound.

Superblocks are laid out here field by field at the offsets of v26.05's
``struct raid_bdev_superblock`` (header 256 bytes, 64 per member), not
with the module's own struct formats.
"""

import uuid

from oslotest import base

from cinder_spdk_vhost import superblock

OWN = str(uuid.uuid4())
OTHER = str(uuid.uuid4())
CONFIGURED, FAILED = 1, 2


def _put(buf, offset, value, size):
    buf[offset:offset + size] = value.to_bytes(size, 'little')


def make(seq, states, signature=b'SPDKRAID'):
    """A superblock with members ``{lvol uuid: state}``, 4 KiB long."""
    buf = bytearray(superblock.HEAD_BYTES)
    buf[0:8] = signature
    _put(buf, 12, 256 + 64 * len(states), 4)          # length
    buf[24:40] = uuid.uuid4().bytes                    # raid uuid
    buf[40:45] = b'raid0'                              # name
    _put(buf, 112, 4096, 4)                            # block_size
    _put(buf, 128, seq, 8)                             # seq_number
    _put(buf, 136, len(states), 1)                     # num_base_bdevs
    _put(buf, 255, len(states), 1)                     # base_bdevs_size
    for slot, (member, state) in enumerate(states.items()):
        entry = 256 + 64 * slot
        buf[entry:entry + 16] = uuid.UUID(member).bytes
        _put(buf, entry + 16, 2048, 8)                 # data_offset
        _put(buf, entry + 32, state, 4)
        _put(buf, entry + 40, slot, 1)
    return bytes(buf)


class ParseTest(base.BaseTestCase):

    def test_members_and_sequence(self):
        sb = superblock.parse(make(7, {OWN: CONFIGURED, OTHER: FAILED}))
        self.assertEqual(7, sb.seq_number)
        self.assertTrue(sb.in_sync(OWN))
        self.assertFalse(sb.in_sync(OTHER))
        self.assertFalse(sb.in_sync(str(uuid.uuid4())))

    def test_no_superblock(self):
        self.assertIsNone(superblock.parse(bytes(superblock.HEAD_BYTES)))
        self.assertIsNone(superblock.parse(
            make(1, {OWN: CONFIGURED}, signature=b'NOTARAID')))
        self.assertIsNone(superblock.parse(b'SPDKRAID'))


class SoundSnapshotTest(base.BaseTestCase):

    def check(self, before, *others):
        return superblock.unsound_snapshot(
            superblock.parse(before), [superblock.parse(o) for o in others],
            OWN)

    def test_never_attached(self):
        zeros = bytes(superblock.HEAD_BYTES)
        self.assertIsNone(self.check(zeros, zeros))

    def test_in_sync_and_unchanged(self):
        both = {OWN: CONFIGURED, OTHER: CONFIGURED}
        self.assertIsNone(self.check(make(3, both), make(3, both)))

    def test_degraded_but_own_copy_in_sync(self):
        # The other copy failed out: only the own one got the new one.
        self.assertIsNone(self.check(
            make(4, {OWN: CONFIGURED, OTHER: FAILED}),
            make(3, {OWN: CONFIGURED, OTHER: CONFIGURED})))

    def test_own_copy_failed_out(self):
        why = self.check(make(3, {OWN: CONFIGURED, OTHER: CONFIGURED}),
                         make(4, {OWN: FAILED, OTHER: CONFIGURED}))
        self.assertIn('newer RAID superblock', why)

    def test_own_copy_failed_and_rebuilt_across_the_snapshot(self):
        # Rebuilt after the snapshot: the others say in sync, but newer.
        why = self.check(make(3, {OWN: CONFIGURED, OTHER: CONFIGURED}),
                         make(5, {OWN: CONFIGURED, OTHER: CONFIGURED}))
        self.assertIn('sequence 5, its own 3', why)

    def test_own_copy_marked_out_of_sync_by_itself(self):
        why = self.check(make(3, {OWN: FAILED, OTHER: CONFIGURED}),
                         make(3, {OWN: FAILED, OTHER: CONFIGURED}))
        self.assertIn('marks it out of sync', why)

    def test_own_copy_without_one_while_another_has_one(self):
        why = self.check(bytes(superblock.HEAD_BYTES),
                         make(1, {OWN: CONFIGURED, OTHER: CONFIGURED}))
        self.assertIn('its own none', why)


class OutOfSyncTest(base.BaseTestCase):

    def test_every_copy_must_hold_the_newest_and_be_in_it(self):
        both = {OWN: CONFIGURED, OTHER: CONFIGURED}
        heads = [superblock.parse(make(3, both)),
                 superblock.parse(make(3, both))]
        self.assertEqual([], superblock.out_of_sync(heads, [OWN, OTHER]))
        heads[1] = superblock.parse(make(2, both))
        self.assertEqual([OTHER], superblock.out_of_sync(heads,
                                                         [OWN, OTHER]))
        failed = {OWN: CONFIGURED, OTHER: FAILED}
        heads = [superblock.parse(make(4, failed))] * 2
        self.assertEqual([OTHER], superblock.out_of_sync(heads,
                                                         [OWN, OTHER]))

    def test_never_attached(self):
        self.assertEqual([], superblock.out_of_sync([None, None],
                                                    [OWN, OTHER]))


class AbsentInSyncTest(base.BaseTestCase):
    """A lost copy the newest superblock still counts blocks a mirror."""

    def test_a_lost_copy_counted_in_sync(self):
        both = {OWN: CONFIGURED, OTHER: CONFIGURED}
        heads = [superblock.parse(make(2, both)),
                 superblock.parse(make(3, {OWN: CONFIGURED}))]
        # The newest (sequence 3) is the one that counts.
        self.assertEqual([], superblock.absent_in_sync(heads, [OWN]))
        self.assertEqual([OTHER], superblock.absent_in_sync(heads[:1],
                                                            [OWN]))

    def test_a_lost_copy_failed_out_or_never_attached(self):
        failed = {OWN: CONFIGURED, OTHER: FAILED}
        self.assertEqual([], superblock.absent_in_sync(
            [superblock.parse(make(4, failed))], [OWN]))
        self.assertEqual([], superblock.absent_in_sync([None], [OWN]))


class UnstartableTest(base.BaseTestCase):
    """Whether a mirror starts while a copy's target is away."""

    THIRD = str(uuid.uuid4())

    def why(self, states, copies=3, present=(OWN, OTHER)):
        heads = [superblock.parse(make(5, states))] if states else [None]
        return superblock.unstartable(heads, list(present), copies)

    def test_the_away_copy_was_failed_out(self):
        self.assertIsNone(self.why({OWN: CONFIGURED, OTHER: CONFIGURED,
                                    self.THIRD: FAILED}))

    def test_the_away_copy_is_counted_in_sync(self):
        why = self.why({OWN: CONFIGURED, OTHER: CONFIGURED,
                        self.THIRD: CONFIGURED})
        self.assertIn('counts the absent copies %s in sync' % self.THIRD,
                      why)

    def test_no_member_for_the_away_copy(self):
        # Never attached: a mirror of the present copies alone would
        # have no slot to add it back to.
        self.assertIn('names a member for each of its 3 copies',
                      self.why(None))
        self.assertIn('names a member for each of its 3 copies',
                      self.why({OWN: CONFIGURED, OTHER: CONFIGURED}))


class ResizedTest(base.BaseTestCase):
    """A detached volume's superblocks, told its new size."""

    def test_crc32c_is_castagnolis(self):
        # The standard check value, with the inversions SPDK's update
        # leaves to its callers.
        self.assertEqual(0xE3069283, ~superblock.crc32c(
            b'123456789', 0xFFFFFFFF) & 0xFFFFFFFF)

    def test_size_and_checksum(self):
        head = make(9, {OWN: CONFIGURED, OTHER: FAILED})
        new = superblock.resized(head, 2 * 1024 ** 3)
        self.assertIsNone(superblock.resized(bytes(4096), 1))
        sb = superblock.parse(new)
        self.assertEqual((9, 2), (sb.seq_number, sb.slots))
        blocks = 2 * 1024 ** 3 // 4096
        # raid_size, then each member's data_size.
        self.assertEqual([blocks] * 3, [
            int.from_bytes(new[at:at + 8], 'little')
            for at in (104, 256 + 24, 256 + 64 + 24)])
        length = int.from_bytes(new[12:16], 'little')
        crc = int.from_bytes(new[16:20], 'little')
        self.assertEqual(crc, superblock.crc32c(
            new[:16] + bytes(4) + new[20:length]))
        # Nothing past the superblock changed.
        self.assertEqual(head[length:], new[length:])


class FailedTest(base.BaseTestCase):
    """A copy failed out of the superblocks of the others, for a rebuild."""

    def test_member_failed_sequence_raised_checksum_anew(self):
        third = str(uuid.uuid4())
        head = make(9, {OWN: CONFIGURED, OTHER: CONFIGURED,
                        third: CONFIGURED})
        new = superblock.failed(head, OTHER)
        sb = superblock.parse(new)
        self.assertEqual((10, {uuid.UUID(OWN): CONFIGURED,
                               uuid.UUID(OTHER): FAILED,
                               uuid.UUID(third): CONFIGURED}),
                         (sb.seq_number, sb.members))
        length = int.from_bytes(new[12:16], 'little')
        crc = int.from_bytes(new[16:20], 'little')
        self.assertEqual(crc, superblock.crc32c(
            new[:16] + bytes(4) + new[20:length]))
        # Only the sequence number, the state and the checksum changed.
        changed = [at for at in range(len(head)) if head[at] != new[at]]
        self.assertTrue(set(changed) <= set(range(16, 20)) |
                        set(range(128, 136)) | set(range(320 + 32, 320 + 36)),
                        changed)
        # Its own wiped, the others' copies say it lacks writes.
        self.assertEqual([OTHER], superblock.out_of_sync(
            [sb, None, sb], [OWN, OTHER, third]))

    def test_no_superblock_or_no_such_member(self):
        self.assertIsNone(superblock.failed(bytes(4096), OWN))
        self.assertIsNone(superblock.failed(make(1, {OWN: CONFIGURED}),
                                            OTHER))
