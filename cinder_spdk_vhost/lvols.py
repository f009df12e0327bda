"""Lvol lookups on the SPDK target, and the names the driver gives lvols.

Volumes and snapshots are named after their Cinder names (``volume-<id>``,
``snapshot-<id>``) so they can be found again from Cinder's records alone;
the snapshot taken behind a cloned volume is "hidden" (no Cinder record)
and carries :data:`HIDDEN_PREFIX` so it can be recognised and removed once
at most one lvol needs it; a deleted Cinder snapshot that clones still
need is marked by an empty lvol named with :data:`RETIRED_PREFIX` for the
same end; scratch lvols of image transfers carry :data:`TEMP_PREFIX`.
"""

import collections

from spdk_vhost_core import exception as rpc_exc

HIDDEN_PREFIX = 'clonesnap-'
# Scratch lvols (and aio bdevs) of image transfers; any found at start-up
# were left by an interrupted operation and are removed.
TEMP_PREFIX = 'tmp-'
RETIRED_PREFIX = 'retired-'
MIB = 1024 * 1024
GIB = 1024 * MIB


class Lvol(collections.namedtuple('Lvol', [
        'uuid', 'alias', 'lvs', 'name', 'block_size', 'num_blocks',
        'is_snapshot', 'clones', 'base_snapshot', 'rate_limits', 'esnap',
        'allocated_clusters', 'claimed'],
        defaults=(False, None, False))):
    """What the driver needs of one lvol bdev."""

    @property
    def size_bytes(self):
        return self.block_size * self.num_blocks

    @property
    def size_mib(self):
        return self.size_bytes // MIB

    @property
    def has_parent(self):
        """True when some of its content lives in another lvol or bdev."""
        return bool(self.base_snapshot) or self.esnap


def alias(lvs, name):
    return '%s/%s' % (lvs, name)


def hidden_snapshot_name(volume_id):
    """The snapshot behind the clone that became volume ``volume_id``."""
    return HIDDEN_PREFIX + volume_id


def retired_marker_name(lvol_uuid):
    """The marker saying snapshot lvol ``lvol_uuid`` has no Cinder record.

    SPDK cannot rename a snapshot (its metadata is read-only), so a
    snapshot deleted while clones need it keeps its name, and this empty
    thin lvol, named from its UUID (unique on the target), marks it for
    deletion with its second-last dependent; the name persists in the
    lvol store's metadata across target restarts.
    """
    return RETIRED_PREFIX + lvol_uuid


def is_marker(name):
    return bool(name) and name.startswith(RETIRED_PREFIX)


def temp_name(kind, volume_id):
    """The scratch lvol or aio bdev of one transfer step of a volume."""
    return '%s%s-%s' % (TEMP_PREFIX, kind, volume_id)


def is_temp(name):
    return bool(name) and name.startswith(TEMP_PREFIX)


def is_hidden(name):
    return bool(name) and name.startswith(HIDDEN_PREFIX)


def from_bdev(bdev):
    """Build an :class:`Lvol` from one ``bdev_get_bdevs`` entry."""
    info = bdev.get('driver_specific', {}).get('lvol', {})
    full = (bdev.get('aliases') or [''])[0]
    lvs, _sep, name = full.partition('/')
    return Lvol(uuid=bdev['name'], alias=full, lvs=lvs, name=name,
                block_size=bdev['block_size'],
                num_blocks=bdev['num_blocks'],
                is_snapshot=bool(info.get('snapshot')),
                clones=list(info.get('clones') or []),
                base_snapshot=info.get('base_snapshot'),
                rate_limits=dict(bdev.get('assigned_rate_limits') or {}),
                esnap=bool(info.get('esnap_clone')),
                allocated_clusters=info.get('num_allocated_clusters'),
                claimed=bool(bdev.get('claimed')))


def unallocated(lvol, cluster_size):
    """Bytes of ``lvol`` no cluster holds yet: what a full write needs.

    A rebuild writes every block of a copy, so a thin one needs that
    much more room in its store.
    """
    return max(0, lvol.size_bytes -
               (lvol.allocated_clusters or 0) * cluster_size)


def every(client, lvstores):
    """Every lvol of ``lvstores``, from one ``bdev_get_bdevs``."""
    found = [from_bdev(bdev) for bdev in client.bdev_get_bdevs()
             if bdev.get('product_name') == 'Logical Volume']
    return sorted((lvol for lvol in found if lvol.lvs in lvstores),
                  key=lambda lvol: lvol.alias)


def get(client, name):
    """The lvol called ``name`` (alias or UUID), or None."""
    try:
        bdevs = client.bdev_get_bdevs(name=name)
    except rpc_exc.NotFound:
        return None
    if bdevs[0].get('product_name') != 'Logical Volume':
        return None
    return from_bdev(bdevs[0])


def find(client, name, lvstores):
    """The lvol ``name`` in the first of ``lvstores`` that has it."""
    for lvs in lvstores:
        lvol = get(client, alias(lvs, name))
        if lvol is not None:
            return lvol
    return None


def size_in_mib(size_gb):
    return int(size_gb) * 1024
