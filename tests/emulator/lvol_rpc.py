"""bdev_lvol_* RPCs: lvstores, lvols, snapshots, clones, shallow copy.

Error codes copy SPDK's split: failures found before the blobstore is
asked (unknown lvstore, duplicate lvol name at create) answer ``-errno``;
failures reported by the blobstore's callback answer -32602 with the
errno text (ENOSPC, duplicate snapshot name), and a snapshot with several
clones refuses deletion with -32603 "Operation not permitted".
"""

import errno
import os
import shutil
import uuid as uuidlib

from tests.emulator import bdev as bdev_mod
from tests.emulator import errors
from tests.emulator import lvstore
from tests.emulator import params as p
from tests.emulator import shallow_copy

DEFAULT_CLUSTER = 4 * lvstore.MIB


class LvolState(object):
    """The target's lvstores and its shallow copy operations."""

    def __init__(self, target):
        self.target = target
        self.lvstores = []
        self.copies = shallow_copy.ShallowCopies(target.dataplane)

    def examine(self, base):
        """Load an lvstore saved on ``base``, as SPDK's examine does."""
        if not isinstance(base, bdev_mod.AioBdev):
            return
        lvs = lvstore.Lvstore.load(self.target, base, base.path + '.lvs')
        if lvs is None or self.find(name=lvs.name):
            return
        base.claimed = True
        self.lvstores.append(lvs)
        for lvol in lvs.lvols:
            self.target.add_bdev(lvol)

    def base_removed(self, base, discard):
        for lvs in [s for s in self.lvstores if s.base is base]:
            self.unload(lvs, discard)

    def unload(self, lvs, discard):
        """Unregister the lvstore's lvols; with discard, delete their data."""
        for lvol in sorted(lvs.lvols, key=_depth, reverse=True):
            self.target.remove_bdev(lvol)
            if discard:
                self.target.dataplane.delete_image(lvol.path)
        self.lvstores.remove(lvs)
        lvs.base.claimed = False
        if discard:
            shutil.rmtree(lvs.data_dir, ignore_errors=True)

    def find(self, uuid=None, name=None):
        for lvs in self.lvstores:
            if (uuid is not None and lvs.uuid == uuid) or (
                    name is not None and lvs.name == name):
                return lvs
        return None

    def close(self):
        self.copies.wait(30)


def _depth(lvol):
    depth = 0
    while lvol.parent is not None:
        lvol, depth = lvol.parent, depth + 1
    return depth


def _lvs_from(target, args, uuid_key='uuid', name_key='lvs_name',
              required=True):
    """SPDK's vbdev_get_lvol_store_by_uuid_xor_name."""
    has_uuid, has_name = uuid_key in args, name_key in args
    if has_uuid and has_name or (required and not (has_uuid or has_name)):
        raise errors.errno_error(errno.EINVAL)
    if not (has_uuid or has_name):
        return None
    lvs = target.lvol.find(uuid=args.get(uuid_key), name=args.get(name_key))
    if lvs is None:
        raise errors.errno_error(errno.ENODEV)
    return lvs


def _get_lvol(target, name):
    bdev = target.find_bdev(name)
    if not isinstance(bdev, lvstore.Lvol):
        raise errors.errno_error(errno.ENODEV)
    return bdev


def _check_free_name(lvs, name, code=None):
    if not name or len(name) > 63:
        raise errors.errno_error(errno.EINVAL, code)
    if lvs.find_lvol(name) is not None:
        raise errors.errno_error(errno.EEXIST, code)


def _need_clusters(lvs, clusters):
    if clusters > lvs.free_clusters():
        raise errors.invalid_params(errno.ENOSPC)


def _register(target, lvol):
    lvol.lvs.lvols.append(lvol)
    target.add_bdev(lvol)
    lvol.lvs.save()
    return lvol.uuid


def _parent_source(lvol):
    """What an lvol's child reads through ``lvol``: its own backing."""
    if lvol.parent is not None:
        return lvol.parent.source()
    if lvol.esnap is not None:
        return (lvol.esnap['path'], lvol.esnap['fmt'])
    return None


def bdev_lvol_create_lvstore(target, args):
    base = target.get_bdev(args['bdev_name'])
    if base.claimed:
        raise errors.errno_error(errno.EPERM)
    if target.lvol.find(name=args['lvs_name']):
        raise errors.errno_error(errno.EEXIST)
    cluster = args.get('cluster_sz', DEFAULT_CLUSTER)
    if cluster < 4096 or cluster & (cluster - 1) or cluster > base.size:
        raise errors.errno_error(errno.EINVAL)
    lvs_uuid = str(uuidlib.uuid4())
    if isinstance(base, bdev_mod.AioBdev):
        data_dir, persistent = base.path + '.lvs', True
        # A new blobstore overwrites whatever the file held before.
        shutil.rmtree(data_dir, ignore_errors=True)
        os.makedirs(data_dir)
    else:
        data_dir = target.private_dir('lvs', lvs_uuid)
        persistent = False
    lvs = lvstore.Lvstore(target, lvs_uuid, args['lvs_name'], base,
                          cluster, data_dir, persistent)
    base.claimed = True
    target.lvol.lvstores.append(lvs)
    lvs.save()
    return lvs_uuid


def bdev_lvol_get_lvstores(target, args):
    lvs = _lvs_from(target, args, required=False)
    selected = [lvs] if lvs else target.lvol.lvstores
    return [s.to_json() for s in selected]


def bdev_lvol_delete_lvstore(target, args):
    target.lvol.unload(_lvs_from(target, args), discard=True)
    return True


def bdev_lvol_create(target, args):
    lvs = _lvs_from(target, args)
    _check_free_name(lvs, args['lvol_name'])
    size = args['size_in_mib'] * lvstore.MIB
    thin = args.get('thin_provision', False)
    if not thin:
        _need_clusters(lvs, lvs.clusters_for(size))
    lvol = lvstore.Lvol(lvs, args['lvol_name'], size, thin)
    target.dataplane.create_image(lvol.path, lvol.size, lvs.cluster_size,
                                  preallocate=not thin)
    return _register(target, lvol)


def bdev_lvol_get_lvols(target, args):
    lvs = _lvs_from(target, args, 'lvs_uuid', 'lvs_name', required=False)
    selected = [lvs] if lvs else target.lvol.lvstores
    return [lvol.lvol_json() for s in selected for lvol in s.lvols]


def bdev_lvol_snapshot(target, args):
    origin = _get_lvol(target, args['lvol_name'])
    lvs = origin.lvs
    _check_free_name(lvs, args['snapshot_name'], errors.INVALID_PARAMS)
    if origin.frozen or origin.read_only:
        raise errors.invalid_params(errno.EINVAL)
    snap = lvstore.Lvol(lvs, args['snapshot_name'], origin.size,
                        origin.thin)
    target.dataplane.snapshot_image(origin.path, snap.path)
    # The snapshot takes the origin's clusters and place in the chain;
    # the origin becomes a thin clone of it (SPDK semantics).
    snap.frozen = True
    snap.parent, snap.esnap = origin.parent, origin.esnap
    origin.parent, origin.esnap, origin.thin = snap, None, True
    return _register(target, snap)


def bdev_lvol_clone(target, args):
    snap = _get_lvol(target, args['snapshot_name'])
    if not (snap.frozen or snap.read_only):
        raise errors.invalid_params(errno.EINVAL)
    _check_free_name(snap.lvs, args['clone_name'], errors.INVALID_PARAMS)
    clone = lvstore.Lvol(snap.lvs, args['clone_name'], snap.size, True)
    clone.parent = snap
    target.dataplane.create_image(clone.path, clone.size,
                                  snap.lvs.cluster_size,
                                  backing=snap.source())
    return _register(target, clone)


def bdev_lvol_clone_bdev(target, args):
    lvs = _lvs_from(target, args, 'lvs_uuid', 'lvs_name')
    base = target.get_bdev(args['bdev'])
    path, fmt = base.source()[:2]
    if path == 'nbd':
        raise errors.errno_error(errno.ENOTSUP)
    _check_free_name(lvs, args['clone_name'])
    clone = lvstore.Lvol(lvs, args['clone_name'], base.size, True)
    clone.esnap = {'uuid': base.uuid, 'path': path, 'fmt': fmt}
    target.dataplane.create_image(clone.path, clone.size, lvs.cluster_size,
                                  backing=(path, fmt))
    return _register(target, clone)


def bdev_lvol_resize(target, args):
    lvol = _get_lvol(target, args['name'])
    lvs = lvol.lvs
    new_size = lvs.clusters_for(args['size_in_mib'] * lvstore.MIB) * (
        lvs.cluster_size)
    if not lvol.thin:
        _need_clusters(lvs, lvs.clusters_for(new_size) - lvol.num_clusters)
    if new_size > lvol.size:
        target.dataplane.resize_image(lvol.path, new_size)
    # Shrinking only changes what SPDK reports: the data plane cannot
    # shrink an image, and nothing reads past num_blocks.
    lvol.num_blocks = new_size // lvol.block_size
    lvs.save()
    return True


def bdev_lvol_delete(target, args):
    lvol = _get_lvol(target, args['name'])
    clones = lvol.clones()
    if len(clones) > 1:
        raise errors.internal(errno.EPERM)
    if clones:
        child = clones[0]
        target.dataplane.rebase_image(child.path, _parent_source(lvol))
        child.parent, child.esnap = lvol.parent, lvol.esnap
    target.remove_bdev(lvol)
    target.dataplane.delete_image(lvol.path)
    lvol.lvs.lvols.remove(lvol)
    lvol.lvs.save()
    return True


def bdev_lvol_inflate(target, args):
    lvol = _get_lvol(target, args['name'])
    _need_clusters(lvol.lvs, lvol.num_clusters - lvol.allocated_clusters())
    if lvol.parent is not None or lvol.esnap is not None:
        target.dataplane.rebase_image(lvol.path, None)
    lvol.parent = lvol.esnap = None
    lvol.thin = False
    lvol.lvs.save()
    return True


def bdev_lvol_decouple_parent(target, args):
    lvol = _get_lvol(target, args['name'])
    parent = lvol.parent
    if parent is None and lvol.esnap is None:
        return True
    # SPDK allocates and copies each cluster the parent holds and the lvol
    # does not; the clusters it keeps thin stay thin.
    if parent is not None:
        below = parent.own_clusters()
    else:
        below = lvstore.clusters_of(
            target.dataplane.allocated_extents(lvol.esnap['path']),
            lvol.lvs.cluster_size, lvol.num_clusters)
    _need_clusters(lvol.lvs, len(below - lvol.own_clusters()))
    new_backing = _parent_source(parent) if parent else None
    target.dataplane.rebase_image(lvol.path, new_backing)
    if parent is not None:
        lvol.parent, lvol.esnap = parent.parent, parent.esnap
    else:
        lvol.esnap = None
    lvol.lvs.save()
    return True


def bdev_lvol_set_read_only(target, args):
    lvol = _get_lvol(target, args['name'])
    lvol.read_only = True
    lvol.lvs.save()
    return True


def bdev_lvol_rename(target, args):
    lvol = _get_lvol(target, args['old_name'])
    _check_free_name(lvol.lvs, args['new_name'], errors.INVALID_PARAMS)
    lvol.lvol_name = args['new_name']
    lvol.lvs.save()
    return True


def bdev_lvol_start_shallow_copy(target, args):
    src = _get_lvol(target, args['src_lvol_name'])
    dst = target.get_bdev(args['dst_bdev_name'])
    dst_path, dst_fmt = dst.source()[:2]
    if dst_fmt != 'raw' or dst.size < src.size:
        raise errors.invalid_params(errno.EINVAL)
    refused = None
    if not (src.frozen or src.read_only):
        refused = os.strerror(errno.EPERM)
    op_id = target.lvol.copies.start(src.path, dst_path,
                                     src.lvs.cluster_size, src.size,
                                     refused)
    return {'operation_id': op_id}


def bdev_lvol_check_shallow_copy(target, args):
    info = target.lvol.copies.check(args['operation_id'])
    if info is None:
        raise errors.errno_error(errno.ENODEV)
    return info


_NAME = p.Object(name=p.string)

METHODS = {
    'bdev_lvol_create_lvstore': (p.Object(
        bdev_name=p.string, lvs_name=p.string, cluster_sz=p.Opt(p.uint32),
        clear_method=p.Opt(p.string),
        num_md_pages_per_cluster_ratio=p.Opt(p.uint32),
        md_page_size=p.Opt(p.uint32)), bdev_lvol_create_lvstore),
    'bdev_lvol_get_lvstores': (p.Object(
        uuid=p.Opt(p.string), lvs_name=p.Opt(p.string)),
        bdev_lvol_get_lvstores),
    'bdev_lvol_delete_lvstore': (p.Object(
        uuid=p.Opt(p.string), lvs_name=p.Opt(p.string)),
        bdev_lvol_delete_lvstore),
    'bdev_lvol_create': (p.Object(
        lvol_name=p.string, size_in_mib=p.uint64,
        thin_provision=p.Opt(p.boolean), uuid=p.Opt(p.string),
        lvs_name=p.Opt(p.string), clear_method=p.Opt(p.string)),
        bdev_lvol_create),
    'bdev_lvol_get_lvols': (p.Object(
        lvs_uuid=p.Opt(p.string), lvs_name=p.Opt(p.string)),
        bdev_lvol_get_lvols),
    'bdev_lvol_snapshot': (p.Object(
        lvol_name=p.string, snapshot_name=p.string), bdev_lvol_snapshot),
    'bdev_lvol_clone': (p.Object(
        snapshot_name=p.string, clone_name=p.string), bdev_lvol_clone),
    'bdev_lvol_clone_bdev': (p.Object(
        bdev=p.string, lvs_name=p.Opt(p.string), lvs_uuid=p.Opt(p.string),
        clone_name=p.string), bdev_lvol_clone_bdev),
    'bdev_lvol_resize': (p.Object(name=p.string, size_in_mib=p.uint64),
                         bdev_lvol_resize),
    'bdev_lvol_delete': (_NAME, bdev_lvol_delete),
    'bdev_lvol_inflate': (_NAME, bdev_lvol_inflate),
    'bdev_lvol_decouple_parent': (_NAME, bdev_lvol_decouple_parent),
    'bdev_lvol_set_read_only': (_NAME, bdev_lvol_set_read_only),
    'bdev_lvol_rename': (p.Object(old_name=p.string, new_name=p.string),
                         bdev_lvol_rename),
    'bdev_lvol_start_shallow_copy': (p.Object(
        src_lvol_name=p.string, dst_bdev_name=p.string),
        bdev_lvol_start_shallow_copy),
    'bdev_lvol_check_shallow_copy': (p.Object(operation_id=p.uint32),
                                     bdev_lvol_check_shallow_copy),
}
