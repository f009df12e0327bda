"""Move image data between raw files and lvols, with SPDK doing the I/O.

The storage node needs no nbd, nvme-tcp or ublk kernel module and never
maps a volume. Importing writes a raw file into a new thin lvol with
``spdk_dd --sparse`` (see :mod:`dd`): only the clusters holding data are
allocated. Exporting makes SPDK open a fresh sparse file in the staging
directory as an aio bdev and shallow-copy a read-only lvol's own clusters
into it. Hence the staging directory must be on the SPDK target's host,
readable and writable by the SPDK process.
"""

import contextlib
import os
import tempfile
import time

from cinder import exception
from oslo_log import log
from oslo_utils import fileutils

from cinder_spdk_vhost import dd
from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import rollback
from spdk_vhost_core import exception as rpc_exc

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

    spdk_dd copies whole blocks into an lvol of whole clusters: the tail
    of a file of any other size would be refused or lost.
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


def _open_file(client, path, name, block_size, cleanup):
    """Open ``path`` as aio bdev ``name`` until ``cleanup`` runs.

    The target opens the path on its own host: only for a target on
    this host (:func:`export_to_file` reads one behind its node's agent
    over NVMe/TCP instead).
    """
    # One left by an interrupted attempt would make the name taken.
    delete_aio(client, name)
    client.bdev_aio_create(path, name, block_size=block_size)
    cleanup.add('delete aio bdev %s' % name, delete_aio, client, name)


def import_file(client, exporter, conf, path, lvs, lvol_name, volume_id,
                cluster_size, rb):
    """Make new thin lvol ``lvs/lvol_name`` hold the bytes of raw ``path``.

    The lvol is the file's size (whole clusters); spdk_dd writes the
    file's data extents into it over a scratch NVMe-oF export, which is
    gone afterwards. A file of holes only (a restored backup of zeros)
    needs no copy, and ``spdk_dd --sparse`` aborts on one. The lvol's
    undo is registered on ``rb``.
    """
    alias = lvols.alias(lvs, lvol_name)
    delete_lvol(client, alias)
    size_mib = -(-os.path.getsize(path) // lvols.MIB)
    with rb.change('delete lvol %s' % alias, delete_lvol, client, alias):
        lvol_uuid = client.bdev_lvol_create(lvol_name, size_mib,
                                            lvs_name=lvs, thin_provision=True)
    dd.fill(exporter, conf, path, lvol_uuid, volume_id, cluster_size,
            lambda: lvols.get(client, alias))
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
    return flat_clone(client, lvol.lvs, snap_alias, volume_id, cleanup)


def flat_snapshot(client, snap, obj_id, cleanup):
    """Snapshot ``snap`` itself, or a :func:`flat_clone` if it has parents.

    A retry first deletes the flat clone an interrupted attempt left.
    """
    if not snap.has_parent:
        return snap.alias
    delete_lvol(client, lvols.alias(snap.lvs, lvols.temp_name('flat',
                                                              obj_id)))
    return flat_clone(client, snap.lvs, snap.alias, obj_id, cleanup)


def flat_clone(client, lvs, snap_alias, obj_id, cleanup):
    """A read-only clone of snapshot ``snap_alias`` owning all its data.

    Decoupled from each parent in turn; deleted by ``cleanup``.
    """
    flat = lvols.temp_name('flat', obj_id)
    client.bdev_lvol_clone(snap_alias, flat)
    flat_alias = lvols.alias(lvs, flat)
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


def export_to_file(exporter, conf, src_alias, lvol, path, aio_name,
                   obj_id):
    """Fill ``path`` with the content of read-only lvol ``src_alias``.

    ``lvol`` gives size and block size; unwritten clusters stay holes. A
    target on this host shallow copies its allocated clusters into the
    file; one behind its node's agent is read over NVMe/TCP
    (:func:`dd.read_lvol`), whole. Returns what the copy reported.
    """
    client = exporter.client
    with open(path, 'wb') as out:
        out.truncate(lvol.size_bytes)
    if client.through_agent:
        source = lvols.get(client, src_alias)
        dd.read_lvol(exporter, conf, source.uuid, obj_id, path,
                     lvol.size_bytes)
        return {'state': 'complete', 'read_over': 'nvme-tcp'}
    timeout = conf.spdk_image_copy_timeout
    with rollback.Cleanup('export %s' % src_alias) as cleanup:
        _open_file(client, path, aio_name, lvol.block_size, cleanup)
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
