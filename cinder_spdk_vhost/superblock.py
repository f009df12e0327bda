"""Read the compute host's RAID1 superblock off a replicated volume's copies.

Every copy of a replicated volume starts with the superblock SPDK's raid
module writes on each member (``struct raid_bdev_superblock``, v26.05
``module/bdev/raid/bdev_raid.h``; little-endian). Each write raises its
sequence number, and SPDK rewrites it on every member still in the
mirror when a member fails or a rebuild ends: so the copy holding the
highest number knows which members were in sync, and a copy that missed
writes (failed out, or being rebuilt) holds an older number. That is how
the storage side tells whether the volume's own copy is a sound source
for a snapshot without asking the compute host. It also tells the mirror
its size: a volume extended while no mirror ran has it rewritten
(:func:`resized`), as SPDK rewrites it when a running mirror grows.
"""

import struct
import uuid

SIGNATURE = b'SPDKRAID'
#: Bytes read from a copy: the header and every member's entry fit.
HEAD_BYTES = 4096
#: Where the guest's disk starts on each member (RAID_BDEV_MIN_DATA_OFFSET
#: rounded up to the namespace's optimal I/O boundary, which an SPDK
#: NVMe-oF export caps at its transfer size, so never beyond it).
DATA_OFFSET = 1024 * 1024
CONFIGURED = 1
FAILED = 2

_HEADER = struct.Struct('<8s4xII4x16s64sQIIIIQB118xB')
_MEMBER = struct.Struct('<16sQQIIB23x')
# Where resized() and failed() write: the checksum, raid_size, the
# sequence number, and each member's data_size and state (in its entry).
_CRC_AT = 16
_RAID_SIZE_AT = 104
_SEQ_AT = 128
_DATA_SIZE_IN_MEMBER = 24
_STATE_IN_MEMBER = 32
_CASTAGNOLI = 0x82F63B78


def _crc_table():
    table = []
    for byte in range(256):
        crc = byte
        for _bit in range(8):
            crc = (crc >> 1) ^ (_CASTAGNOLI if crc & 1 else 0)
        table.append(crc)
    return table


_CRC_TABLE = _crc_table()


def crc32c(data, crc=0):
    """CRC-32C of ``data`` as SPDK's ``spdk_crc32c_update`` (no inversion)."""
    for byte in data:
        crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc


class Superblock(object):
    """What the snapshot check reads of one superblock."""

    def __init__(self, seq_number, members, slots=None):
        self.seq_number = seq_number
        #: How many members the mirror has, present or not.
        self.slots = len(members) if slots is None else slots
        #: Member UUID (the copy's lvol UUID, which its export passes on
        #: to the compute host's NVMe bdev) -> its state in the mirror.
        self.members = members

    def in_sync(self, lvol_uuid):
        return self.members.get(uuid.UUID(lvol_uuid)) == CONFIGURED


def parse(head):
    """The superblock at the start of ``head`` (bytes), or None if absent.

    A copy never attached has none; neither has one whose superblock was
    wiped (:data:`HEAD_BYTES` of zeros, a clone's new copies).
    """
    if len(head) < _HEADER.size or not head.startswith(SIGNATURE):
        return None
    (_sig, length, _crc, _raid_uuid, _name, _size, _block, _level, _strip,
     _state, seq_number, count, entries) = _HEADER.unpack_from(head)
    members = {}
    for index in range(entries):
        offset = _HEADER.size + index * _MEMBER.size
        if offset + _MEMBER.size > min(length, len(head)):
            break
        member, _data_offset, _data_size, state, _flags, _slot = (
            _MEMBER.unpack_from(head, offset))
        members[uuid.UUID(bytes=member)] = state
    return Superblock(seq_number, members, count)


def resized(head, size_bytes):
    """``head`` with its superblock saying ``size_bytes``; None if it has none.

    The mirror's size (``raid_size``) and each member's data area
    (``data_size``), in the superblock's blocks, then its checksum: what
    SPDK's raid module writes when a running RAID1 grows. Its sequence
    number stays, so every copy rewritten alike still holds the newest.
    """
    if parse(head) is None:
        return None
    fields = _HEADER.unpack_from(head)
    length, block_size, entries = fields[1], fields[6], fields[12]
    blocks = size_bytes // block_size
    out = bytearray(head)
    struct.pack_into('<Q', out, _RAID_SIZE_AT, blocks)
    for index in range(entries):
        struct.pack_into('<Q', out, _HEADER.size + index * _MEMBER.size +
                         _DATA_SIZE_IN_MEMBER, blocks)
    return _sealed(out, length)


def failed(head, lvol_uuid):
    """``head`` with member ``lvol_uuid`` failed out; None if it has none.

    What SPDK's raid module writes on the members left when one fails:
    that member's state FAILED and the sequence number raised, so a
    mirror started from it runs without that member, and adds it back
    (rebuilt) into the empty slot.
    """
    sb = parse(head)
    member = uuid.UUID(lvol_uuid)
    if sb is None or member not in sb.members:
        return None
    fields = _HEADER.unpack_from(head)
    length, entries = fields[1], fields[12]
    out = bytearray(head)
    for index in range(entries):
        at = _HEADER.size + index * _MEMBER.size
        if _MEMBER.unpack_from(head, at)[0] == member.bytes:
            struct.pack_into('<I', out, at + _STATE_IN_MEMBER, FAILED)
    struct.pack_into('<Q', out, _SEQ_AT, sb.seq_number + 1)
    return _sealed(out, length)


def _sealed(out, length):
    """The superblock in ``out`` with its checksum, as bytes."""
    struct.pack_into('<I', out, _CRC_AT, 0)
    struct.pack_into('<I', out, _CRC_AT, crc32c(out[:length]))
    return bytes(out)


def _newest(heads):
    found = [sb for sb in heads if sb is not None]
    return max(found, key=lambda sb: sb.seq_number) if found else None


def _why_stale(sb, newest, lvol_uuid):
    """Why the copy holding ``sb`` may lack writes, or None."""
    if newest is None:
        return None  # never attached: every copy is all zeros
    if sb is None or sb.seq_number != newest.seq_number:
        return ('another copy holds a newer RAID superblock (sequence %d, '
                'its own %s)' % (newest.seq_number,
                                 'none' if sb is None else sb.seq_number))
    if not newest.in_sync(lvol_uuid):
        return 'the RAID superblock marks it out of sync'
    return None


def absent_in_sync(heads, lvol_uuids):
    """Members the newest superblock counts in sync that no copy is.

    SPDK's examine waits for every one of them before it starts the
    mirror: a superblock naming a lost copy so never starts it.
    ``heads`` and ``lvol_uuids`` as for :func:`out_of_sync`; the UUIDs
    of those members, as text.
    """
    newest = _newest(heads)
    present = {uuid.UUID(lvol_uuid) for lvol_uuid in lvol_uuids}
    return sorted(str(member) for member, state in
                  (newest.members.items() if newest else ())
                  if state == CONFIGURED and member not in present)


def unstartable(heads, lvol_uuids, copies):
    """Why no mirror can start from these copies alone, or None.

    ``heads`` and ``lvol_uuids`` as for :func:`out_of_sync`, of the
    copies that answer; ``copies``: how many the volume has. The compute
    host's mirror starts from the newest superblock when it names a
    member for every copy and counts none of those absent in sync (a
    copy failed out while the guest wrote is not): the absent ones are
    added back, and rebuilt, when they return. Without a superblock it
    would make a mirror of the present copies alone, with no member for
    the others.
    """
    newest = _newest(heads)
    if newest is None or newest.slots != copies:
        return ('no RAID superblock on its copies names a member for each '
                'of its %d copies' % copies)
    absent = absent_in_sync(heads, lvol_uuids)
    if absent:
        return ('its RAID superblock counts the absent copies %s in sync, '
                'and a mirror waits for those' % ', '.join(absent))
    return None


def unsound_snapshot(before, others, own_uuid):
    """Why a snapshot of the volume's own copy is unsound, or None.

    ``before``: its own copy's superblock read just before the snapshot;
    ``others``: every other copy's, read just after. Sound when no copy
    has a newer superblock than its own had (nothing failed or finished
    a rebuild across the snapshot) and that one counts it in sync, or
    when no copy carries one.
    """
    return _why_stale(before, _newest([before] + list(others)), own_uuid)


def out_of_sync(heads, lvol_uuids):
    """The copies lacking writes: [] if none, or none was ever attached.

    ``lvol_uuids``: each copy's lvol, ``heads`` what was read from it.
    """
    newest = _newest(heads)
    return [lvol_uuid for sb, lvol_uuid in zip(heads, lvol_uuids)
            if _why_stale(sb, newest, lvol_uuid)]
