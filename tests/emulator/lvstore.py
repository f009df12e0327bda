"""Logical volume stores and lvols: the model, cluster accounting, disk.

Each lvol is a qcow2 file in the lvstore's data directory; snapshots and
clones share data through qcow2 backing chains, as SPDK blobs share
clusters. Cluster accounting follows SPDK: thick lvols own all their
clusters from creation, thin ones own the clusters they have written
(the data plane's allocated extents rounded out to lvstore clusters).
The metadata JSON is rewritten after each change, so an lvstore on an
aio file is found again when the file is re-added after a restart.
"""

import json
import os

from tests.emulator import bdev as bdev_mod

MIB = 1024 * 1024
_MD_PAGE = 4096
_MD_MASK_HEADER = 5  # struct spdk_bs_md_mask: type (u8) + length (u32)
METADATA = 'lvstore.json'


def _ceil_div(a, b):
    return -(-a // b)


def _mask_pages(bits):
    return _ceil_div(_MD_MASK_HEADER + _ceil_div(bits, 8), _MD_PAGE)


def clusters_of(extents, cluster_size, limit):
    """Indices (below limit) of the clusters that byte extents touch."""
    clusters = set()
    for offset, length in extents:
        if length > 0:
            clusters.update(range(offset // cluster_size,
                                  (offset + length - 1) // cluster_size + 1))
    return {c for c in clusters if c < limit}


class Lvstore(object):
    """A blobstore on a base bdev."""

    def __init__(self, target, uuid, name, base, cluster_size, data_dir,
                 persistent):
        self.target = target
        self.uuid = uuid
        self.name = name
        self.base = base
        self.cluster_size = cluster_size
        self.data_dir = data_dir
        self.persistent = persistent
        self.lvols = []
        clusters = base.size // cluster_size
        # Super block, one metadata page per cluster and three bit masks,
        # rounded up to whole clusters, like SPDK's blobstore layout.
        md_pages = (1 + clusters + _mask_pages(clusters) +
                    2 * _mask_pages(clusters))
        md_clusters = _ceil_div(md_pages * _MD_PAGE, cluster_size)
        self.total_data_clusters = max(clusters - md_clusters, 0)
        self.max_growable_clusters = (
            (_mask_pages(clusters) * _MD_PAGE - _MD_MASK_HEADER) * 8)

    @property
    def block_size(self):
        return self.base.block_size

    def clusters_for(self, size_bytes):
        return _ceil_div(size_bytes, self.cluster_size)

    def free_clusters(self):
        used = sum(lvol.allocated_clusters() for lvol in self.lvols)
        return max(self.total_data_clusters - used, 0)

    def find_lvol(self, lvol_name):
        for lvol in self.lvols:
            if lvol.lvol_name == lvol_name:
                return lvol
        return None

    def image_path(self, lvol_uuid):
        return os.path.join(self.data_dir, lvol_uuid + '.qcow2')

    def to_json(self):
        return {'uuid': self.uuid, 'name': self.name,
                'base_bdev': self.base.name,
                'total_data_clusters': self.total_data_clusters,
                'free_clusters': self.free_clusters(),
                'block_size': self.block_size,
                'cluster_size': self.cluster_size,
                'max_growable_size':
                    self.max_growable_clusters * self.cluster_size}

    def save(self):
        if not self.persistent:
            return
        meta = {'uuid': self.uuid, 'name': self.name,
                'cluster_size': self.cluster_size,
                'lvols': [lvol.to_meta() for lvol in self.lvols]}
        path = os.path.join(self.data_dir, METADATA)
        tmp = path + '.tmp'
        with open(tmp, 'w') as out:
            json.dump(meta, out, indent=1)
        os.replace(tmp, path)

    @classmethod
    def load(cls, target, base, data_dir):
        """The lvstore saved in ``data_dir``, or None (SPDK "examine")."""
        try:
            with open(os.path.join(data_dir, METADATA)) as src:
                meta = json.load(src)
        except FileNotFoundError:
            return None
        lvs = cls(target, meta['uuid'], meta['name'], base,
                  meta['cluster_size'], data_dir, persistent=True)
        by_uuid = {}
        for entry in meta['lvols']:
            lvol = Lvol.from_meta(lvs, entry)
            by_uuid[lvol.uuid] = lvol
            lvs.lvols.append(lvol)
        for entry, lvol in zip(meta['lvols'], lvs.lvols):
            lvol.parent = by_uuid.get(entry.get('parent'))
        return lvs


class Lvol(bdev_mod.Bdev):
    """An lvol bdev: named by its UUID, aliased "lvs/name"."""

    product_name = 'Logical Volume'
    memory_domains = ({'dma_device_type': 'DMA'},
                      {'dma_device_type': 'ACCEL'})

    def __init__(self, lvs, lvol_name, size_bytes, thin, uuid=None):
        num_blocks = (lvs.clusters_for(size_bytes) * lvs.cluster_size //
                      lvs.block_size)
        super().__init__(None, lvs.block_size, num_blocks, uuid)
        self.name = self.uuid
        self.lvs = lvs
        self.lvol_name = lvol_name
        self.thin = thin
        self.parent = None       # the snapshot this lvol is a clone of
        self.esnap = None        # {'uuid', 'path', 'fmt'} of an esnap base
        self.frozen = False      # a snapshot: data is read-only
        self.read_only = False   # bdev_lvol_set_read_only
        self.path = lvs.image_path(self.uuid)

    @property
    def aliases(self):
        return ['%s/%s' % (self.lvs.name, self.lvol_name)]

    @aliases.setter
    def aliases(self, value):
        """Derived from the names; the base class's initial [] is ignored."""

    def source(self):
        return (self.path, 'qcow2')

    @property
    def num_clusters(self):
        return self.lvs.clusters_for(self.size)

    def clones(self):
        return [lvol for lvol in self.lvs.lvols if lvol.parent is self]

    def is_snapshot(self):
        # SPDK keeps a blob in its snapshot list only while it has clones.
        return bool(self.clones())

    def own_clusters(self):
        """Indices of the clusters this lvol's own layer holds."""
        if not self.thin:
            return set(range(self.num_clusters))
        return clusters_of(self.lvs.target.dataplane.allocated_extents(
            self.path), self.lvs.cluster_size, self.num_clusters)

    def allocated_clusters(self):
        return len(self.own_clusters())

    def is_degraded(self):
        return (self.esnap is not None and
                self.lvs.target.find_bdev(self.esnap['uuid']) is None)

    def supported_io_types(self):
        if self.frozen:
            return bdev_mod.io_types('read', 'reset', 'seek_hole',
                                     'seek_data')
        return bdev_mod.io_types('read', 'write', 'unmap', 'reset',
                                 'write_zeroes', 'seek_hole', 'seek_data')

    def driver_specific(self):
        info = {'lvol_store_uuid': self.lvs.uuid,
                'base_bdev': self.lvs.base.name,
                'thin_provision': self.thin,
                'num_allocated_clusters': self.allocated_clusters(),
                'snapshot': self.is_snapshot(),
                'clone': self.parent is not None}
        if self.parent is not None:
            info['base_snapshot'] = self.parent.lvol_name
        if self.is_snapshot():
            info['clones'] = [c.lvol_name for c in self.clones()]
        info['esnap_clone'] = self.esnap is not None
        if self.esnap is not None:
            info['external_snapshot_name'] = self.esnap['uuid']
        return {'lvol': info}

    def lvol_json(self):
        """The entry ``bdev_lvol_get_lvols`` lists."""
        return {'alias': self.aliases[0], 'uuid': self.uuid,
                'name': self.lvol_name,
                'is_thin_provisioned': self.thin,
                'is_snapshot': self.is_snapshot(),
                'is_clone': self.parent is not None,
                'is_esnap_clone': self.esnap is not None,
                'is_degraded': self.is_degraded(),
                'num_allocated_clusters': self.allocated_clusters(),
                'lvs': {'name': self.lvs.name, 'uuid': self.lvs.uuid}}

    def to_meta(self):
        return {'uuid': self.uuid, 'name': self.lvol_name,
                'num_blocks': self.num_blocks, 'thin': self.thin,
                'parent': self.parent.uuid if self.parent else None,
                'esnap': self.esnap, 'frozen': self.frozen,
                'read_only': self.read_only}

    @classmethod
    def from_meta(cls, lvs, meta):
        lvol = cls(lvs, meta['name'], meta['num_blocks'] * lvs.block_size,
                   meta['thin'], meta['uuid'])
        lvol.esnap = meta['esnap']
        lvol.frozen = meta['frozen']
        lvol.read_only = meta['read_only']
        return lvol
