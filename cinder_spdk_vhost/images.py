"""Move image data between raw files and lvols, with SPDK doing the I/O.

The storage node needs no nbd, nvme-tcp or ublk kernel module and never
maps a volume: SPDK opens a raw file in the staging directory as an aio
bdev. Importing makes an "esnap" clone of that bdev and decouples it, so
the lvol owns the image's clusters and the file can go; exporting
shallow-copies
a read-only lvol's own clusters into a fresh sparse file. Hence the
staging directory must be on the SPDK target's host, readable and
writable by the SPDK process.
"""

import contextlib
import os
import tempfile
import time

from cinder import exception
from oslo_log import log
from oslo_utils import fileutils

from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import rollback
from os_brick_connector import exception as rpc_exc

LOG = log.getLogger(__name__)

_POLL_FIRST = 0.05
# Snapshot chains are a handful deep; more means decouple does not work.
MAX_CHAIN = 128
_POLL_MAX = 1.0


def remove_file(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        LOG.debug('%s was already gone', path)


@contextlib.contextmanager
def staging_file(directory, prefix):
    """A new empty file in ``directory``, removed afterwards."""
    fileutils.ensure_tree(directory)
    handle, path = tempfile.mkstemp(prefix=prefix, suffix='.raw',
                                    dir=directory)
    os.close(handle)
    try:
        yield path
    finally:
        remove_file(path)


def pad(path, multiple):
    """Grow a raw file to whole ``multiple`` bytes (zeros, sparse).

    An esnap clone's size is its bdev's size, which SPDK wants in whole
    lvstore clusters.
    """
    size = os.path.getsize(path)
    if size % multiple:
        os.truncate(path, size + multiple - size % multiple)


def delete_lvol(client, alias):
    try:
        client.bdev_lvol_delete(alias)
    except rpc_exc.NotFound:
        LOG.debug('lvol %s was already gone', alias)


def delete_aio(client, name):
    try:
        client.bdev_aio_delete(name)
    except rpc_exc.NotFound:
        LOG.debug('aio bdev %s was already gone', name)


def _open_file(client, path, name, block_size, readonly, cleanup):
    """Open ``path`` as aio bdev ``name`` until ``cleanup`` runs."""
    # One left by an interrupted attempt would make the name taken.
    delete_aio(client, name)
    client.bdev_aio_create(path, name, block_size=block_size,
                           readonly=readonly or None)
    cleanup.add('delete aio bdev %s' % name, delete_aio, client, name)


def import_file(client, path, lvs, lvol_name, aio_name, block_size, rb):
    """Make new lvol ``lvs/lvol_name`` hold the bytes of raw ``path``.

    Esnap clone of the file, then decouple: afterwards the lvol owns the
    image's clusters and neither the aio bdev nor the file is needed.
    Decouple rather than inflate: inflate would also make it thick, so
    growing it to the volume's size would allocate the whole volume. Its
    undo is registered on ``rb``.
    """
    alias = lvols.alias(lvs, lvol_name)
    delete_lvol(client, alias)
    with rollback.Cleanup('import %s' % path) as cleanup:
        _open_file(client, path, aio_name, block_size, True, cleanup)
        client.bdev_lvol_clone_bdev(aio_name, lvs, lvol_name)
        rb.add('delete lvol %s' % alias, delete_lvol, client, alias)
        client.bdev_lvol_decouple_parent(alias)
    return alias


def flat_source(client, lvol, volume_id, cleanup):
    """A read-only lvol whose own clusters hold all of ``lvol``'s data.

    A snapshot freezes the content (the volume may stay attached). A
    shallow copy takes only the source's own clusters, so when the volume
    has a parent (made from a snapshot, an image base or a clone) the
    snapshot owns just what was written since: a clone of it is decoupled
    from each parent in turn until it owns all the data. (Inflate would
    do it in one call, but also allocates the never-written clusters:
    the whole volume's size in scratch space.) The scratch lvols are
    deleted by ``cleanup``; the snapshot, having one clone left, folds
    back into the volume.
    """
    for kind in ('flat', 'export'):
        delete_lvol(client, lvols.alias(lvol.lvs,
                                        lvols.temp_name(kind, volume_id)))
    snap = lvols.temp_name('export', volume_id)
    client.bdev_lvol_snapshot(lvol.alias, snap)
    snap_alias = lvols.alias(lvol.lvs, snap)
    cleanup.add('delete snapshot %s' % snap_alias, delete_lvol, client,
                snap_alias)
    if not lvol.has_parent:
        return snap_alias
    flat = lvols.temp_name('flat', volume_id)
    client.bdev_lvol_clone(snap_alias, flat)
    flat_alias = lvols.alias(lvol.lvs, flat)
    cleanup.add('delete clone %s' % flat_alias, delete_lvol, client,
                flat_alias)
    _decouple_all(client, flat_alias)
    client.bdev_lvol_set_read_only(flat_alias)
    return flat_alias


def _decouple_all(client, alias):
    """Copy into ``alias`` the data of all its ancestors."""
    for _level in range(MAX_CHAIN):
        if not lvols.get(client, alias).has_parent:
            return
        client.bdev_lvol_decouple_parent(alias)
    raise exception.VolumeBackendAPIException(
        data='%s still has a parent after %d decouples' % (alias, MAX_CHAIN))


def export_to_file(client, src_alias, lvol, path, aio_name, timeout):
    """Fill ``path`` with the content of read-only lvol ``src_alias``.

    ``lvol`` gives size and block size; unwritten clusters stay holes.
    """
    with open(path, 'wb') as out:
        out.truncate(lvol.size_bytes)
    with rollback.Cleanup('export %s' % src_alias) as cleanup:
        _open_file(client, path, aio_name, lvol.block_size, False, cleanup)
        started = client.bdev_lvol_start_shallow_copy(src_alias, aio_name)
        return wait_shallow_copy(client, started['operation_id'], src_alias,
                                 timeout)


def wait_shallow_copy(client, operation_id, what, timeout):
    """Poll a shallow copy to its end; its final report, or raise."""
    deadline = time.monotonic() + timeout
    delay = _POLL_FIRST
    while True:
        info = client.bdev_lvol_check_shallow_copy(operation_id)
        if info['state'] == 'complete':
            LOG.debug('Shallow copy of %(what)s: %(info)s',
                      {'what': what, 'info': info})
            return info
        if info['state'] != 'in progress':
            raise exception.VolumeBackendAPIException(
                data='shallow copy of %s failed: %s'
                     % (what, info.get('error', info['state'])))
        if time.monotonic() > deadline:
            raise exception.VolumeBackendAPIException(
                data='shallow copy of %s did not finish in %d s (%d of %d '
                     'clusters)' % (what, timeout, info['copied_clusters'],
                                    info['total_clusters']))
        time.sleep(delay)
        delay = min(delay * 2, _POLL_MAX)
