"""Lvol lookups on the SPDK target, and the names the driver gives lvols.

Volumes and snapshots are named after their Cinder names (``volume-<id>``,
``snapshot-<id>``) so they can be found again from Cinder's records alone;
the snapshot taken behind a cloned volume, and a deleted Cinder snapshot
that volumes still depend on, are "hidden" (no Cinder record) and carry
:data:`HIDDEN_PREFIX` so they can be recognised and removed once at most
one lvol needs them; scratch lvols of image transfers carry
:data:`TEMP_PREFIX`.
"""

import collections

from os_brick_connector import exception as rpc_exc

HIDDEN_PREFIX = 'clonesnap-'
# Scratch lvols (and aio bdevs) of image transfers; any found at start-up
# were left by an interrupted operation and are removed.
TEMP_PREFIX = 'tmp-'
MIB = 1024 * 1024
GIB = 1024 * MIB


class Lvol(collections.namedtuple('Lvol', [
        'uuid', 'alias', 'lvs', 'name', 'block_size', 'num_blocks',
        'is_snapshot', 'clones', 'base_snapshot', 'rate_limits', 'esnap',
        'allocated_clusters'],
        defaults=(False, None))):
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


def retired_snapshot_name(lvol_uuid):
    """The hidden name of a deleted snapshot that clones still need.

    From the lvol's UUID, unique on its target, so it cannot collide
    with another hidden snapshot (those of clones carry a volume id).
    """
    return HIDDEN_PREFIX + lvol_uuid


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
                allocated_clusters=info.get('num_allocated_clusters'))


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
