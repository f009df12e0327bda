"""Copy a snapshot's content into new lvols of other SPDK targets.

SPDK's NVMe-oF initiator does not run in interrupt mode, which idle
storage targets use, so no target attaches another's export. The copy
takes the way images do (:mod:`images`): the snapshot's target shallow
copies it (flattened first if it reads through parents) into a sparse
raw file in the staging directory, and ``spdk_dd --sparse`` writes that
file's data extents into each destination lvol over a scratch NVMe-oF
export (:mod:`dd`). Never-written clusters stay holes in the file and
unallocated in the copies. The first 4 KiB of the file are zeroed on the
way: they hold the source's RAID superblock, which a new copy must not
carry (:mod:`superblock`).
"""

from oslo_log import log

from cinder_spdk_vhost import dd
from cinder_spdk_vhost import image_ops
from cinder_spdk_vhost import images
from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import rollback
from cinder_spdk_vhost import superblock

LOG = log.getLogger(__name__)


def _wipe_head(path):
    with open(path, 'r+b') as out:
        out.write(bytes(superblock.HEAD_BYTES))


def copy_snapshot(exporter, conf, snap, copies, volume_id):
    """Copy read-only lvol ``snap`` into each of ``copies``, superblock off.

    ``copies``: [(peer, lvol)], each lvol at least ``snap``'s size.
    Scratch lvols, bdevs, exports and the file are gone afterwards.
    """
    with images.staging_file(image_ops.staging_dir(conf),
                             'replica-%s-' % volume_id) as path:
        with rollback.Cleanup('copy %s' % snap.alias) as cleanup:
            source = images.flat_snapshot(exporter.client, snap, volume_id,
                                          cleanup)
            images.export_to_file(exporter, conf, source, snap, path,
                                  lvols.temp_name('out', volume_id),
                                  volume_id)
        _wipe_head(path)
        copy_file(conf, path, copies, volume_id)


def copy_file(conf, path, copies, volume_id):
    """Write raw ``path``'s data extents into each of ``copies``, thin."""
    for peer, copy in copies:
        store = peer.client.bdev_lvol_get_lvstores(lvs_name=copy.lvs)[0]
        dd.fill(peer.exporter, conf, path, copy.uuid, volume_id,
                store['cluster_size'],
                lambda: peer.pools.lvol(copy.alias))
        LOG.info('Copied %(path)s into %(copy)s on %(peer)s',
                 {'path': path, 'copy': copy.alias, 'peer': peer})
