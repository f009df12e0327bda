"""The SPDK target emulator's data plane: real bytes behind every bdev.

Every lvol, snapshot and clone is a qcow2 file (snapshots and clones share
data through backing chains), a malloc bdev a sparse raw file, an aio bdev
the user's raw file.  Exports (vhost-user-blk controllers, NBD for the
emulated NVMe-oF) are served by one qemu-storage-daemon (QSD), started at
the first export, so real QEMU guests do real I/O.

Each open source is one node chain in QSD, built explicitly layer by layer
(file nodes with locking off, so offline ``qemu-img -U`` queries keep
working) and topped by two throttle filters: QEMU refuses total and
read/write byte limits in one throttle group while SPDK allows both, so
``rw_*`` limits live in an outer group and ``r_``/``w_`` limits in an inner
one.  Exports point at the outer filter, so QoS changes and live snapshots
keep every export.  Exports are writethrough, so the files on disk are
always current for offline readers; jobs that write without exports
(block-stream) are followed by an explicit flush.
"""

import errno
import functools
import itertools
import os
import threading
import uuid

from tests.emulator import chains
from tests.emulator import images
from tests.emulator import qmp
from tests.emulator import qsd

DataPlaneError = images.DataPlaneError

QEMU_IO = os.environ.get('QEMU_IO', 'qemu-io')
QOS_KEYS = chains.QOS_KEYS


def _locked(method):
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)
    return wrapper


class DataPlane(object):
    """qcow2/raw files plus one qemu-storage-daemon for an emulated target.

    Methods are serialised by a lock: the control plane may call from
    several RPC threads, and QMP is one conversation.
    """

    def __init__(self, work_dir):
        self._dir = os.path.abspath(work_dir)
        self._lock = threading.RLock()
        self._tag = uuid.uuid4().hex[:8]  # tells our hard links apart
        self._daemon = None
        self._names = itertools.count(1)
        self._chains = {}
        self._vhost = {}
        self._nbd = {}
        self._qos = {}
        self._formats = {}
        self._nbd_path = os.path.join(self._dir, 'qsd-nbd.sock')
        self._nbd_started = False

    # -- daemon plumbing ---------------------------------------------------

    def _name(self, prefix):
        return '%s%d' % (prefix, next(self._names))

    @property
    def _qmp(self):
        if self._daemon is None:
            self._daemon = qsd.StorageDaemon(self._dir)
        return self._daemon.client

    def _call(self, what, command, **arguments):
        """QMP command; failures become DataPlaneError naming 'what'."""
        try:
            return self._qmp.execute(command, **arguments)
        except qmp.QMPError as err:
            raise self._error(what, err) from err

    @staticmethod
    def _error(what, err):
        desc = err.desc or ''
        if isinstance(err, qmp.QMPConnectionError):
            code = errno.EIO
        elif err.error_class == 'DeviceNotFound':
            code = errno.ENODEV
        elif 'in use' in desc or 'busy' in desc:
            code = errno.EBUSY
        elif 'No such file' in desc:
            code = errno.ENOENT
        elif 'already' in desc or 'Duplicate' in desc:
            code = errno.EEXIST
        else:
            code = errno.EINVAL
        return DataPlaneError(code, '%s: %s' % (what, err))

    @_locked
    def close(self):
        """Stop QSD: every export and its socket go; image files stay."""
        if self._daemon is not None:
            self._daemon.stop()
            self._daemon = None
        for export in self._vhost.values():
            if os.path.exists(export.socket_path):
                os.unlink(export.socket_path)
        if os.path.exists(self._nbd_path):
            os.unlink(self._nbd_path)
        for chain in self._chains.values():
            for layer in chain.layers:
                if layer.link and os.path.exists(layer.link):
                    os.unlink(layer.link)
        self._nbd_started = False
        self._chains.clear()
        self._vhost.clear()
        self._nbd.clear()

    @_locked
    def throttle_limits(self, source):
        """QSD's limits for an open source, both groups merged (qom-get).

        Reads the daemon's live state, for tests and debugging.
        """
        chain = self._chains.get(chains.source_key(source))
        if chain is None:
            raise DataPlaneError(errno.ENOENT, '%s is not open' % (source,))
        limits = {}
        for group in chain.groups:
            for name, value in self._call(
                    'read QoS of %s' % (chain.key,), 'qom-get', path=group,
                    property='limits').items():
                limits[name] = limits.get(name) or value
        return limits

    @property
    def daemon_pid(self):
        """The running qemu-storage-daemon's pid, or None."""
        return self._daemon.proc.pid if self._daemon else None

    # -- node chains ---------------------------------------------------------

    def _open(self, key):
        """The source's chain in QSD, built now if it is not open yet."""
        if key in self._chains:
            return self._chains[key]
        chain = chains.Chain(key)
        try:
            if key[0] == 'nbd':
                self._add_nbd_node(chain, key)
            else:
                self._add_image_nodes(chain, key)
            self._add_filters(chain)
        except DataPlaneError:
            self._drop_nodes(chain)
            raise
        self._chains[key] = chain
        return chain

    def _add_nbd_node(self, chain, key):
        if key[1] == self._nbd_path:
            # QSD's NBD client would block its own main loop connecting.
            raise DataPlaneError(errno.EINVAL, 'NBD export %s is served by '
                                 'this data plane itself' % key[2])
        node = self._name('nbd')
        # key[3]: seconds requests wait for a lost server (bdev_nvme's
        # reconnect timeouts); QEMU's NBD client re-runs them after.
        options = {'reconnect-delay': key[3]} if key[3:] and key[3] else {}
        self._call('open NBD export %s at %s' % (key[2], key[1]),
                   'blockdev-add', driver='nbd', **{'node-name': node},
                   server={'type': 'unix', 'path': key[1]}, export=key[2],
                   **options)
        chain.layers.append(chains.Layer(None, 'nbd', node))

    def _add_image_nodes(self, chain, key):
        path, fmt = key
        if not os.path.exists(path):
            raise DataPlaneError(errno.ENOENT, 'no image %s' % path)
        lower = None
        layers = images.backing_chain(path)
        for depth, (layer_path, layer_fmt) in reversed(
                list(enumerate(layers))):
            if depth == 0:
                layer_fmt = fmt
            layer = self._add_layer(layer_path, layer_fmt, lower,
                                    read_only=depth > 0)
            chain.layers.insert(0, layer)
            lower = layer.node

    def _add_layer(self, path, fmt, backing, read_only=False):
        node = self._name('img')
        head, tail = os.path.split(path)
        link = os.path.join(head, '.%s.%s-%s' % (tail, self._tag, node))
        try:
            os.link(path, link)
        except OSError as err:
            raise DataPlaneError(err.errno, 'open %s: cannot link it as %s: '
                                 '%s' % (path, link, err.strerror)) from err
        opts = {'driver': fmt, 'node-name': node, 'read-only': read_only,
                'file': {'driver': 'file', 'filename': link,
                         'locking': 'off'}}
        if fmt == 'qcow2':
            opts['backing'] = backing
        try:
            self._call('open %s' % path, 'blockdev-add', **opts)
        except DataPlaneError:
            os.unlink(link)
            raise
        return chains.Layer(path, fmt, node, link)

    def _del_layer(self, layer):
        self._call('close %s' % (layer.path or layer.node), 'blockdev-del',
                   **{'node-name': layer.node})
        if layer.link:
            os.unlink(layer.link)

    def _add_filters(self, chain):
        qos = self._qos.get(chain.key, dict.fromkeys(QOS_KEYS, 0))
        below = chain.top
        for limits in reversed(chains.throttle_limits(qos)):
            group = self._name('tg')
            self._call('create throttle group for %s' % (chain.key,),
                       'object-add', **{'qom-type': 'throttle-group',
                                        'id': group, 'limits': limits})
            chain.groups.insert(0, group)
            node = self._name('thr')
            self._call('add throttle for %s' % (chain.key,), 'blockdev-add',
                       driver='throttle', file=below,
                       **{'node-name': node, 'throttle-group': group})
            chain.filters.insert(0, node)
            below = node

    def _drop_nodes(self, chain):
        for node in chain.filters:
            self._call('close %s' % (chain.key,), 'blockdev-del',
                       **{'node-name': node})
        for layer in chain.layers:
            self._del_layer(layer)
        for group in chain.groups:
            self._call('delete throttle group of %s' % (chain.key,),
                       'object-del', id=group)

    def _release(self, key, user):
        chain = self._chains[key]
        chain.users.discard(user)
        if not chain.users:
            del self._chains[key]
            self._drop_nodes(chain)

    def _open_chain_of(self, path):
        """The open chain whose top image is path, or None."""
        path = os.path.abspath(path)
        for chain in self._chains.values():
            if chain.layers and chain.layers[0].path == path:
                return chain
        return None

    def _refuse_if_backing(self, path, action):
        path = os.path.abspath(path)
        for chain in self._chains.values():
            if path in chain.paths[1:]:
                raise DataPlaneError(
                    errno.EBUSY, 'cannot %s %s: it backs %s, open in '
                    'qemu-storage-daemon' % (action, path, chain.paths[0]))

    def _run_nbd_client(self, node, qemu_io_command):
        """Run one qemu-io command through a short-lived NBD export."""
        name = self._name('tmp')
        # Writable: a read-only client or export never sends the flush.
        self._export(name, 'nbd', node, name=name, writable=True)
        try:
            images.run([QEMU_IO, '-f', 'raw', '-c', qemu_io_command,
                        'nbd+unix:///%s?socket=%s' % (name, self._nbd_path)],
                       'qemu-io %s on node %s' % (qemu_io_command, node))
        finally:
            self._unexport(name, 'temporary export of %s' % node)

    def _flush(self, path):
        """Push QSD's cached qcow2 metadata of path to disk, if open."""
        chain = self._open_chain_of(path)
        if chain is not None:
            self._run_nbd_client(chain.top, 'flush')

    # -- exports -------------------------------------------------------------

    def _start_nbd_server(self):
        if not self._nbd_started:
            self._call('start NBD server at %s' % self._nbd_path,
                       'nbd-server-start',
                       addr={'type': 'unix',
                             'data': {'path': self._nbd_path}})
            self._nbd_started = True

    def _export(self, qsd_id, kind, node, **options):
        if kind == 'nbd':
            self._start_nbd_server()
        self._call('export %s' % qsd_id, 'block-export-add', type=kind,
                   id=qsd_id, writethrough=True, **{'node-name': node},
                   **options)

    def _unexport(self, qsd_id, what, force=False):
        """Delete a QSD export and wait until it is really gone.

        force drops connected clients (QSD's "hard" mode).
        """
        self._call('delete %s' % what, 'block-export-del', id=qsd_id,
                   mode='hard' if force else 'safe')
        try:
            self._qmp.wait_event('BLOCK_EXPORT_DELETED', {'id': qsd_id})
        except qmp.QMPError as err:
            raise self._error('delete %s' % what, err) from err

    def _check_export_id(self, export_id, table):
        if export_id in table:
            raise DataPlaneError(errno.EEXIST, 'export %s already exists'
                                 % export_id)

    @_locked
    def export_vhost_blk(self, export_id, source, socket_path,
                         readonly=False, num_queues=None):
        """Serve source as a vhost-user-blk socket a QEMU guest can use."""
        self._check_export_id(export_id, self._vhost)
        socket_path = os.path.abspath(socket_path)
        if any(e.socket_path == socket_path for e in self._vhost.values()):
            raise DataPlaneError(errno.EEXIST, 'socket %s already serves '
                                 'another export' % socket_path)
        key = chains.source_key(source)
        chain = self._open(key)
        qsd_id = self._name('vhost')
        chain.users.add(qsd_id)
        options = {'addr': {'type': 'unix', 'path': socket_path},
                   'writable': not readonly}
        if num_queues is not None:
            options['num-queues'] = num_queues
        try:
            self._export(qsd_id, 'vhost-user-blk', chain.filters[0],
                         **options)
        except DataPlaneError as err:
            self._release(key, qsd_id)
            raise DataPlaneError(err.errno, 'export %s at %s: %s' % (
                export_id, socket_path, err.message)) from err
        self._vhost[export_id] = chains.Export(qsd_id, key, socket_path)

    @_locked
    def delete_export(self, export_id, force=False):
        """Remove a vhost export; EBUSY while a guest is connected.

        force drops a connected guest instead: SPDK's hot remove, when the
        bdev under a controller is deleted.
        """
        export = self._vhost.get(export_id)
        if export is None:
            raise DataPlaneError(errno.ENOENT, 'no export %s' % export_id)
        # QSD would drop a connected guest; SPDK refuses instead.
        if not force and self._daemon.accepted_connections(
                export.socket_path):
            raise DataPlaneError(errno.EBUSY, 'export %s at %s has a '
                                 'connected client' % (export_id,
                                                       export.socket_path))
        self._unexport(export.qsd_id, 'export %s' % export_id, force)
        del self._vhost[export_id]
        if os.path.exists(export.socket_path):
            os.unlink(export.socket_path)
        self._release(export.key, export.qsd_id)

    @_locked
    def connected_sessions(self, export_id):
        """vhost-user clients connected to the export right now."""
        export = self._vhost.get(export_id)
        if export is None:
            raise DataPlaneError(errno.ENOENT, 'no export %s' % export_id)
        return self._daemon.accepted_connections(export.socket_path)

    @_locked
    def export_nbd(self, export_name, source):
        """Serve source over QSD's NBD server; return its unix socket."""
        self._check_export_id(export_name, self._nbd)
        key = chains.source_key(source)
        chain = self._open(key)
        qsd_id = self._name('nbd')
        chain.users.add(qsd_id)
        try:
            self._export(qsd_id, 'nbd', chain.filters[0], name=export_name,
                         writable=True)
        except DataPlaneError:
            self._release(key, qsd_id)
            raise
        self._nbd[export_name] = chains.Export(qsd_id, key)
        return self._nbd_path

    @_locked
    def delete_nbd_export(self, export_name):
        export = self._nbd.get(export_name)
        if export is None:
            raise DataPlaneError(errno.ENOENT, 'no NBD export %s'
                                 % export_name)
        self._unexport(export.qsd_id, 'NBD export %s' % export_name)
        del self._nbd[export_name]
        self._release(export.key, export.qsd_id)

    @_locked
    def set_qos(self, source, limits):
        """Set SPDK-style limits (MB = MiB, 0 = off) on a source.

        Kept while the source is closed and applied when it opens; while
        open, every export of it is throttled at once.
        """
        unknown = set(limits) - set(QOS_KEYS)
        if unknown:
            raise DataPlaneError(errno.EINVAL, 'unknown QoS limits %s'
                                 % sorted(unknown))
        if any(not isinstance(v, int) or v < 0 for v in limits.values()):
            raise DataPlaneError(errno.EINVAL, 'QoS limits must be '
                                 'non-negative integers: %s' % limits)
        key = chains.source_key(source)
        qos = dict(self._qos.get(key, dict.fromkeys(QOS_KEYS, 0)), **limits)
        chain = self._chains.get(key)
        if chain is not None:
            for group, value in zip(chain.groups, chains.throttle_limits(qos)):
                self._call('set QoS of %s' % (key,), 'qom-set', path=group,
                           property='limits', value=value)
        self._qos[key] = qos

    # -- images --------------------------------------------------------------

    def _format(self, path):
        path = os.path.abspath(path)
        if path not in self._formats:
            self._formats[path] = images.info(path)['format']
        return self._formats[path]

    def _refuse_existing(self, path):
        if os.path.exists(path):
            raise DataPlaneError(errno.EEXIST, '%s already exists' % path)

    @_locked
    def create_image(self, path, size_bytes, cluster_size, backing=None,
                     preallocate=False):
        """A qcow2 lvol; backing (path, fmt) makes it a thin clone."""
        self._refuse_existing(path)
        if backing is not None:
            if not os.path.exists(backing[0]):
                raise DataPlaneError(errno.ENOENT, 'no backing %s for %s'
                                     % (backing[0], path))
            if preallocate:
                raise DataPlaneError(errno.EINVAL, 'a clone (%s) cannot be '
                                     'preallocated' % path)
        images.create_qcow2(path, size_bytes, cluster_size, backing,
                            preallocate)
        self._formats[os.path.abspath(path)] = 'qcow2'

    @_locked
    def create_raw(self, path, size_bytes):
        images.create_raw(path, size_bytes)
        self._formats[os.path.abspath(path)] = 'raw'

    @_locked
    def resize_image(self, path, size_bytes):
        """Grow an image; live (block_resize) while QSD has it open."""
        self._refuse_if_backing(path, 'resize')
        self._flush(path)
        current = images.info(path)['virtual-size']
        if size_bytes < current:
            raise DataPlaneError(errno.EINVAL, 'cannot shrink %s from %d to '
                                 '%d bytes' % (path, current, size_bytes))
        chain = self._open_chain_of(path)
        if chain is None:
            images.resize(path, self._format(path), size_bytes)
            return
        if any(user.startswith('nbd') for user in chain.users):
            raise DataPlaneError(errno.EBUSY, 'cannot resize %s while it '
                                 'is exported over NBD (QEMU NBD exports '
                                 'do not allow resizing)' % path)
        # Through the outer filter: the filters do not share 'resize'.
        self._call('resize %s' % path, 'block_resize', size=size_bytes,
                   **{'node-name': chain.filters[0]})
        self._flush(path)

    @_locked
    def snapshot_image(self, path, snapshot_path):
        """Freeze path's data as snapshot_path; path becomes its clone.

        The file is renamed (QSD keeps it open through its fd) and a thin
        overlay is created in its place; while open, blockdev-snapshot moves
        the guest's writes to the overlay without touching the exports.
        """
        path = os.path.abspath(path)
        snapshot_path = os.path.abspath(snapshot_path)
        self._refuse_existing(snapshot_path)
        self._refuse_if_backing(path, 'snapshot')
        if self._format(path) != 'qcow2':
            raise DataPlaneError(errno.EINVAL, 'cannot snapshot raw %s'
                                 % path)
        self._flush(path)
        meta = images.info(path)
        chain = self._open_chain_of(path)
        os.rename(path, snapshot_path)
        overlay = None
        try:
            images.create_qcow2(path, meta['virtual-size'],
                                meta['cluster-size'],
                                (snapshot_path, 'qcow2'), unsafe=True)
            if chain is not None:
                overlay = self._add_layer(path, 'qcow2', None)
                self._call('snapshot %s as %s' % (path, snapshot_path),
                           'blockdev-snapshot', node=chain.top,
                           overlay=overlay.node)
        except DataPlaneError:
            if overlay is not None:
                self._del_layer(overlay)
            if os.path.exists(path):
                os.unlink(path)
            os.rename(snapshot_path, path)
            raise
        self._formats[snapshot_path] = 'qcow2'
        if chain is not None:
            chain.layers[0].path = snapshot_path
            chain.layers.insert(0, overlay)

    @_locked
    def rebase_image(self, path, new_backing):
        """Keep path's content, change its backing (None = inflate).

        While open this is a block-stream job, which can only drop layers:
        new_backing must then be None or a layer already under path.
        """
        self._refuse_if_backing(path, 'rebase')
        chain = self._open_chain_of(path)
        if new_backing is not None:
            new_backing = chains.source_key(new_backing)
            if not os.path.exists(new_backing[0]):
                raise DataPlaneError(errno.ENOENT, 'no backing %s for %s'
                                     % (new_backing[0], path))
        if chain is None:
            images.rebase(path, new_backing)
            return
        self._stream(chain, new_backing)

    def _stream(self, chain, new_backing):
        path = chain.paths[0]
        args = {'job-id': self._name('stream'), 'device': chain.top}
        keep = 1
        if new_backing is not None:
            if new_backing[0] not in chain.paths[1:]:
                raise DataPlaneError(
                    errno.EINVAL, 'cannot rebase open %s onto %s: not in '
                    'its backing chain %s' % (path, new_backing[0],
                                              chain.paths))
            keep = chain.paths.index(new_backing[0])
            args['base-node'] = chain.layers[keep].node
            args['backing-file'] = new_backing[0]
        what = 'rebase %s onto %s' % (path, new_backing)
        self._call(what, 'block-stream', **args)
        try:
            event = self._qmp.wait_event('BLOCK_JOB_COMPLETED',
                                         {'device': args['job-id']},
                                         timeout=600)
        except qmp.QMPError as err:
            raise self._error(what, err) from err
        if 'error' in event['data']:
            raise DataPlaneError(errno.EIO, '%s: %s'
                                 % (what, event['data']['error']))
        dropped = chain.layers[1:keep] if new_backing else chain.layers[1:]
        del chain.layers[1:1 + len(dropped)]
        for layer in dropped:
            self._del_layer(layer)
        self._flush(path)

    @_locked
    def allocated_extents(self, path):
        """[(offset, length)] allocated in path's own layer."""
        self._flush(path)
        return images.own_extents(path, self._format(path))

    @_locked
    def copy_extents(self, path, extents, dst_path):
        """Write path's visible bytes at extents into the raw dst_path."""
        if not os.path.exists(dst_path):
            raise DataPlaneError(errno.ENOENT, 'no destination %s'
                                 % dst_path)
        self._flush(path)
        fmt = self._format(path)
        for offset, length in extents:
            images.copy_window(path, fmt, offset, length, dst_path)

    @_locked
    def read(self, path, offset, length):
        """Visible bytes of path, backing chain resolved."""
        self._flush(path)
        return images.read(path, self._format(path), offset, length)

    @_locked
    def delete_image(self, path):
        """Remove an image file; EBUSY while QSD uses it."""
        path = os.path.abspath(path)
        for chain in self._chains.values():
            if path in chain.paths:
                raise DataPlaneError(errno.EBUSY, 'cannot delete %s: open '
                                     'in qemu-storage-daemon' % path)
        try:
            os.unlink(path)
        except OSError as err:
            raise DataPlaneError(err.errno, 'delete %s: %s'
                                 % (path, err.strerror)) from err
        self._formats.pop(path, None)
        for fmt in ('qcow2', 'raw'):
            self._qos.pop((path, fmt), None)
