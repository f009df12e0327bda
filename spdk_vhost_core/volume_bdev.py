"""The bdev a local volume's vhost controller exposes: named after it.

A guest finds its disk by the serial that ``/dev/disk/by-id/virtio-*``
is built from, and a vhost-blk controller answers the guest's
VIRTIO_BLK_T_GET_ID with the first 20 bytes of its bdev's *name*, space
padded (``lib/vhost/vhost_blk.c``; aliases are not used). Nova's
convention is the first 20 characters of the volume id. An lvol bdev is
named by a UUID SPDK picks (``bdev_lvol_rename`` renames the alias only),
so the connector stacks a bdev named after the volume id on the lvol.

That bdev is a raid0 with the lvol as its only member, checked on SPDK
v26.05:

* it follows a resize of the lvol (``raid0_resize``), so an online extend
  still reaches the guest; a passthru bdev would not (it ignores the
  resize event);
* one member: no I/O is split (no optimal I/O boundary); its size is the
  lvol's rounded down to the strip, and every lvol is a whole number of
  clusters, so a 4 KiB strip loses nothing;
* no superblock: nothing is written to the volume; the raid lives in the
  target's memory and its saved config (``bdev_raid_create`` replays
  before its lvol exists and completes when examine finds it);
* it claims the lvol (exclusive write): while the volume is attached
  here, its lvol cannot also be an NVMe-oF namespace (SPDK answers
  ``nvmf_subsystem_add_ns`` with -32602), nor be stacked on again; the
  Cinder driver reads the claim to know the volume is in use.

Front-end QoS limits go on this bdev, back-end ones stay on the lvol, so
neither overwrites the other.
"""

from spdk_vhost_core import exception as spdk_exc

LEVEL = 'raid0'
STRIP_KB = 4


def name(volume_id):
    """The bdev name that makes the guest's disk serial the volume id."""
    return volume_id


def config_entry(bdev, base):
    """The RPC that makes layer ``bdev`` on ``base``, as a config entry.

    What :func:`create` sends, and what a saved config replays.
    """
    return {'method': 'bdev_raid_create',
            'params': {'name': bdev, 'raid_level': LEVEL,
                       'strip_size_kb': STRIP_KB, 'base_bdevs': [base]}}


def create(client, bdev, base):
    """Create layer ``bdev`` on ``base`` (a bdev's canonical name)."""
    client.bdev_raid_create(**config_entry(bdev, base)['params'])


def _raids(client):
    """Every raid bdev of the target, configured or waiting for members.

    Empty on a target without the raid module's RPCs.
    """
    try:
        return client.bdev_raid_get_bdevs()
    except spdk_exc.MethodNotFound:
        return []


def _members(raid):
    return [base.get('name') for base in raid.get('base_bdevs_list') or ()]


def members(client, bdev):
    """The member names of layer ``bdev``; None if no raid has that name."""
    for raid in _raids(client):
        if raid['name'] == bdev:
            return _members(raid)
    return None


def is_layer_of(client, bdev, base):
    """Whether ``bdev`` is this module's layer over ``base`` alone."""
    return members(client, bdev) == [base]


def delete(client, bdev):
    """Delete layer ``bdev``; the lvol under it is untouched.

    Returns whether it existed.
    """
    try:
        client.bdev_raid_delete(bdev)
    except spdk_exc.NotFound:
        return False
    return True
