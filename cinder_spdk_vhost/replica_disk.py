"""The guest's disk of a replicated volume as a raw file, both ways.

cinder-backup, Glance and a change of layout read and write the guest's
disk, not a copy: a replicated copy holds it after the compute host's
RAID1 superblock, :data:`superblock.DATA_OFFSET` in. So the disk is read
out of the own copy, once its superblock and the others' prove it in
sync, from that offset on (:meth:`Disk.save`, :meth:`Disk.read`); and a
file is written into a new thin lvol for every copy, the superblock's
room left zero, so the next attach mirrors them afresh
(:meth:`Disk.write`). A single-copy volume's disk is its lvol, from 0.
"""

import contextlib

from cinder_spdk_vhost import image_ops
from cinder_spdk_vhost import images
from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import pools
from cinder_spdk_vhost import remote_copy
from cinder_spdk_vhost import replica_type
from cinder_spdk_vhost import rollback
from cinder_spdk_vhost import sparse


class Disk(pools.Part):
    """The guest's disk of a backend's volumes, in and out of files."""

    def __init__(self, pools, replicas, sync):
        super().__init__(pools)
        self.replicas = replicas
        self.sync = sync

    def save(self, volume, lvol, path, doing):
        """Fill ``path`` with the guest's disk, from own copy ``lvol``.

        Refused (naming ``doing``) when that copy lacks writes; the
        scratch lvols are gone afterwards.
        """
        with rollback.Cleanup('read volume %s' % volume.id) as cleanup:
            self.sync.check_in_sync(volume, lvol, doing)
            source = images.flat_source(self.client, lvol, volume.id,
                                        cleanup)
            self.read(volume, source, lvol, path,
                      lvols.temp_name('out', volume.id))

    def read(self, obj, source, lvol, path, aio_name):
        """Fill ``path`` with the guest's disk, from read-only ``source``.

        ``obj``: the volume or snapshot; ``lvol``: the lvol's size and
        block size. A replicated copy is staged whole in a scratch file
        first, then its data extents move down past the superblock's
        room. Returns the shallow copy's report.
        """
        offset = replica_type.data_offset(obj)
        if not offset:
            return images.export_to_file(self.exporter, self.conf, source,
                                         lvol, path, aio_name, obj.id)
        with images.staging_file(image_ops.staging_dir(self.conf),
                                 'raw-%s-' % obj.id) as raw:
            info = images.export_to_file(self.exporter, self.conf, source,
                                         lvol, raw, aio_name, obj.id)
            sparse.shifted_copy(raw, path, offset, 0,
                                lvol.size_bytes - offset)
        return info

    def write(self, volume, old, path, limits, rb, scratch, tag,
              placed=False):
        """Make raw ``path``, the guest's disk, every copy of ``volume``.

        A new thin lvol (first the scratch lvol of kind ``scratch``, which
        a retry finds and replaces) takes the place of each copy: the own
        copy ``old`` is set aside under ``tag`` and deleted
        (:meth:`pools.Pools.replace`); the others are set aside and
        returned, for :meth:`Replicas.drop` once the operation is done,
        or, with ``placed``, made anew where :meth:`Replicas.place` puts
        them.
        """
        size = replica_type.lvol_mib(volume) * lvols.MIB
        with self._at_offset(path, volume, size) as path:
            store = self.client.bdev_lvol_get_lvstores(lvs_name=old.lvs)[0]
            images.pad(path, store['cluster_size'])
            alias = images.import_file(
                self.client, self.exporter, self.conf, path, old.lvs,
                lvols.temp_name(scratch, volume.id), volume.id,
                store['cluster_size'], rb)
            stale = self._rewrite_peers(volume, path, limits, rb, placed)
        alias = self.pools.replace(old, alias, volume, limits, rb, tag,
                                   replica_type.lvol_mib(volume))
        if not self.conf.spdk_thin_provision:
            self.client.bdev_lvol_inflate(alias)
        return stale

    @contextlib.contextmanager
    def _at_offset(self, path, volume, size):
        """``path``, or a scratch copy with the data where copies hold it.

        The copy is ``size`` bytes, a whole copy's.
        """
        offset = replica_type.data_offset(volume)
        if not offset:
            yield path
            return
        with images.staging_file(image_ops.staging_dir(self.conf),
                                 'raw-%s-' % volume.id) as raw:
            sparse.shifted_copy(path, raw, 0, offset, size)
            yield raw

    def _rewrite_peers(self, volume, path, limits, rb, placed):
        """Make the other copies hold raw ``path``, as a revert does.

        ``path``: a whole copy's bytes, its superblock's room left zero;
        ``placed``: new copies, none set aside.
        """
        if replica_type.copies(volume) == 1:
            return []
        if placed:
            stale, made = [], self.replicas.place(volume, limits, rb)
        else:
            stale, made = self.replicas.renew(volume, limits, rb,
                                              'restored')
        remote_copy.copy_file(self.conf, path, [
            (peer, peer.pools.lvol(alias)) for peer, alias in made],
            volume.id)
        return stale
