"""Compare the copies of a detached replicated volume, region by region.

raid1 never compares its copies: a copy that diverged without its
mirror knowing (a bad disk under one lvol store, a write one storage
target lost) serves reads as if whole. With the volume detached, each
copy is read through a scratch export of its own with ``spdk_dd`` (as
:mod:`replica_sync` reads superblocks), one copy at a time, into a
staging file that is hashed per region of the guest's disk (after the
RAID's superblock) and deleted. The superblocks say which copies the
last mirror held in sync. A copy found wrong is *renewed*: its
superblock is wiped, so that the next mirror starts without it and its
compute host rebuilds it from the others.

An attached volume is refused: its guest writes while the copies are
read, so they would differ where nothing is wrong. What it costs: a read
of every copy's whole size, and that much room in
``spdk_image_staging_dir`` for one copy at a time.
"""

import collections
import hashlib
import time

from cinder import exception
from oslo_log import log

from cinder_spdk_vhost import dd
from cinder_spdk_vhost import image_ops
from cinder_spdk_vhost import images
from cinder_spdk_vhost import locks
from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import replica_type
from cinder_spdk_vhost import superblock

LOG = log.getLogger(__name__)

REGION_MIB = 64
_CHUNK = lvols.MIB

#: ``copies``: where each copy is, the backend's own first; ``stale``:
#: those the superblocks say lack writes; ``differ``: [(offset, {where:
#: sha256})] of each region not the same on every copy; ``regions`` and
#: ``region`` (bytes) say how the disk was cut; ``read`` bytes in
#: ``seconds``.
Report = collections.namedtuple(
    'Report', 'copies stale regions region differ read seconds')


class Compare(object):
    """The copies of one backend's replicated volumes, side by side."""

    def __init__(self, replicas):
        self.replicas = replicas
        self.pools = replicas.pools

    def _copies(self, volume):
        """[(where, exporter, lvol)] of every copy, the own first.

        :meth:`replication.Replicas.every_copy` refuses a copy missing
        or out of reach.
        """
        if replica_type.copies(volume) < 2:
            raise exception.InvalidVolume(
                reason='volume %s has a single copy' % volume.id)
        if volume.status != 'available':
            raise exception.InvalidVolume(
                reason='volume %s is %s: its guest would write while its '
                       'copies are read; detach it first'
                       % (volume.id, volume.status))
        return [(self.replicas.target_id, self.pools.exporter,
                 self.pools.get(volume))] + [
            (str(peer), peer.exporter, copy)
            for peer, copy in self.replicas.every_copy(volume)]

    def _heads(self, volume, copies):
        """(where -> the copy's first bytes, where the stale copies are).

        Stale: lacking writes, as the superblocks say.
        """
        raw = {where: self.replicas.sync.raw_head(exporter, lvol, volume.id)
               for where, exporter, lvol in copies}
        stale = superblock.out_of_sync(
            [superblock.parse(raw[where]) for where, _e, _l in copies],
            [lvol.uuid for _w, _e, lvol in copies])
        return raw, [where for where, _e, lvol in copies
                     if lvol.uuid in stale]

    def report(self, volume, region_mib=REGION_MIB):
        """Read and hash every copy of ``volume``: a :class:`Report`.

        Under the volume's lock: cinder-volume's operations on it wait.
        """
        if region_mib < 1:
            raise exception.InvalidInput(
                reason='regions of %s MiB: give 1 or more' % region_mib)
        region = region_mib * lvols.MIB
        size = volume.size * lvols.GIB
        start = time.monotonic()
        with locks.locked(locks.vlock(volume.id)):
            copies = self._copies(volume)
            _raw, stale = self._heads(volume, copies)
            digests = {where: self._digests(exporter, lvol, volume, region)
                       for where, exporter, lvol in copies}
        differ = [(index * region,
                   {where: digests[where][index] for where in digests})
                  for index in range(-(-size // region))
                  if len({found[index] for found in digests.values()}) > 1]
        seconds = time.monotonic() - start
        LOG.info('Compared the %(n)d copies of volume %(vol)s in %(s).1f s: '
                 '%(differ)d regions of %(mib)d MiB differ',
                 {'n': len(copies), 'vol': volume.id, 's': seconds,
                  'differ': len(differ), 'mib': region_mib})
        return Report([where for where, _e, _l in copies], stale,
                      -(-size // region), region, differ,
                      len(copies) * (superblock.DATA_OFFSET + size), seconds)

    def _digests(self, exporter, lvol, volume, region):
        """The sha256 of each region of the guest's disk on one copy."""
        size = volume.size * lvols.GIB
        with images.staging_file(image_ops.staging_dir(self.pools.conf),
                                 'compare-%s-' % volume.id) as path:
            dd.read_lvol(exporter, self.pools.conf, lvol.uuid, volume.id,
                         path, superblock.DATA_OFFSET + size, holes=False)
            with open(path, 'rb') as src:
                src.seek(superblock.DATA_OFFSET)
                return [_hash(src, min(region, size - offset))
                        for offset in range(0, size, region)]

    def renew(self, volume, where):
        """Make the copy on ``where`` one the next mirror rebuilds.

        The copies in sync fail it out of their superblocks (as SPDK
        does when a member fails), then its own is wiped: the next
        mirror starts without it, and the compute host adds it back and
        rebuilds it from them. Refused when no other copy would be left
        that the superblocks hold in sync.
        """
        with locks.locked(locks.vlock(volume.id)):
            copies = self._copies(volume)
            found = [item for item in copies if item[0] == where]
            if not found:
                raise exception.InvalidInput(
                    reason='volume %s has no copy on %s; its copies are on '
                           '%s' % (volume.id, where,
                                   ', '.join(item[0] for item in copies)))
            raw, stale = self._heads(volume, copies)
            if not [item for item in copies
                    if item[0] != where and item[0] not in stale]:
                raise exception.InvalidInput(
                    reason='volume %s: no copy but the one on %s is in sync; '
                           'it cannot be rebuilt from the others'
                           % (volume.id, where))
            _where, exporter, lvol = found[0]
            sync = self.replicas.sync
            sources = [(other_exporter, copy, raw[other])
                       for other, other_exporter, copy in copies
                       if other != where and other not in stale]
            if any(superblock.parse(head) is None
                   for _e, _c, head in sources):
                raise exception.InvalidInput(
                    reason='volume %s was never attached: no mirror ever '
                           'held its copies in sync, so none is a source '
                           'to rebuild another from' % volume.id)
            # The copies in sync fail it out first: a stop half-way leaves
            # it older than they are, stale, never a source.
            for other_exporter, copy, head in sources:
                sync.fail_member(other_exporter, copy, volume.id, head,
                                 lvol.uuid)
            sync.wipe(exporter, lvol, volume.id)
        LOG.warning('Volume %(vol)s: the superblock of its copy on %(where)s '
                    'is wiped; the next mirror rebuilds that copy from the '
                    'others', {'vol': volume.id, 'where': where})


def _hash(src, length):
    digest = hashlib.sha256()
    while length > 0:
        chunk = src.read(min(_CHUNK, length))
        if not chunk:
            # Past the end the copy read short: zeros, as a thin lvol.
            chunk = bytes(min(_CHUNK, length))
        digest.update(chunk)
        length -= len(chunk)
    return digest.hexdigest()
