"""qemu-img work on image files that qemu-storage-daemon does not hold open.

Every lvol, snapshot and clone of the emulator is a qcow2 file and every
malloc bdev a sparse raw file; this module is the only place that runs
qemu-img on them.  Read-only queries pass -U (force share) so they also
work on files the daemon has open (it opens them with locking off).
"""

import errno
import json
import os
import subprocess
import tempfile

QEMU_IMG = os.environ.get('QEMU_IMG', 'qemu-img')

# qcow2 accepts power-of-two clusters from 512 B to 2 MiB; SPDK clusters
# may be bigger (e.g. 4 MiB), which only changes allocation granularity.
MAX_QCOW2_CLUSTER = 2 * 1024 * 1024
MIN_QCOW2_CLUSTER = 512
SECTOR = 512

_ERRNO_HINTS = (
    ('No such file or directory', errno.ENOENT),
    ('lock', errno.EBUSY),
    ('File exists', errno.EEXIST),
    ('No space left', errno.ENOSPC),
    ('Invalid', errno.EINVAL),
    ('invalid', errno.EINVAL),
)


class DataPlaneError(Exception):
    """A data-plane operation failed; errno says how (EBUSY, ENOENT...)."""

    def __init__(self, err, message):
        self.errno = err
        self.message = message
        super().__init__('[%s] %s' % (errno.errorcode.get(err, err),
                                      message))


def _errno_of(text):
    for hint, err in _ERRNO_HINTS:
        if hint in text:
            return err
    return errno.EIO


def run(args, what):
    """Run a qemu tool; on failure raise DataPlaneError naming 'what'."""
    try:
        proc = subprocess.run(args, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, check=False)
    except OSError as err:
        raise DataPlaneError(err.errno, '%s: cannot run %s: %s'
                             % (what, args[0], err)) from err
    if proc.returncode:
        text = (proc.stderr or proc.stdout).strip()
        raise DataPlaneError(_errno_of(text), '%s: %s' % (what, text))
    return proc.stdout


def image_opts(fmt, path, offset=None, size=None):
    """--image-opts string for path, optionally a raw window onto it."""
    opts = [('driver', fmt), ('file.driver', 'file'),
            ('file.filename', path)]
    if offset is not None:
        opts = ([('driver', 'raw'), ('offset', offset), ('size', size)] +
                [('file.' + key, value) for key, value in opts])
    return ','.join('%s=%s' % (key, str(value).replace(',', ',,'))
                    for key, value in opts)


def info(path, chain=False):
    """qemu-img info as a dict (or the list for the whole backing chain)."""
    args = [QEMU_IMG, 'info', '-U', '--output=json']
    if chain:
        args.append('--backing-chain')
    return json.loads(run(args + [path], 'qemu-img info %s' % path))


def backing_chain(path):
    """[(filename, format)] from path (top) down to its bottom layer."""
    return [(os.path.abspath(layer['filename']), layer['format'])
            for layer in info(path, chain=True)]


def qcow2_cluster(cluster_size):
    """The qcow2 cluster size that stands in for an SPDK cluster size."""
    size = min(cluster_size, MAX_QCOW2_CLUSTER)
    if size < MIN_QCOW2_CLUSTER or size & (size - 1):
        raise DataPlaneError(errno.EINVAL, 'cluster size %d is not a power '
                             'of two of at least 512' % cluster_size)
    return size


def create_qcow2(path, size_bytes, cluster_size, backing=None,
                 preallocate=False, unsafe=False):
    """Create a qcow2 image; backing is a (path, fmt) source or None.

    unsafe skips opening the backing (needed while the daemon writes it).
    """
    opts = 'cluster_size=%d' % qcow2_cluster(cluster_size)
    if preallocate:
        opts += ',preallocation=metadata'
    args = [QEMU_IMG, 'create', '-q', '-f', 'qcow2', '-o', opts]
    if backing is not None:
        args += ['-b', os.path.abspath(backing[0]), '-F', backing[1]]
        if unsafe:
            args.append('-u')
    run(args + [path, str(size_bytes)], 'qemu-img create %s' % path)


def create_raw(path, size_bytes):
    """A sparse raw file: no block written, so nothing shows as allocated.

    (qemu-img create -f raw would write the first block for its alignment
    probe.)
    """
    try:
        with open(path, 'xb') as f:
            f.truncate(size_bytes)
    except OSError as err:
        raise DataPlaneError(err.errno, 'create raw %s: %s'
                             % (path, err.strerror)) from err


def resize(path, fmt, size_bytes):
    run([QEMU_IMG, 'resize', '-q', '-f', fmt, path, str(size_bytes)],
        'qemu-img resize %s' % path)


def rebase(path, backing):
    """Safe-mode rebase: copies what path needs so its content is kept."""
    args = [QEMU_IMG, 'rebase', '-q', '-f', 'qcow2']
    if backing is None:
        args += ['-b', '']
    else:
        args += ['-b', os.path.abspath(backing[0]), '-F', backing[1]]
    run(args + [path], 'qemu-img rebase %s' % path)


def own_extents(path, fmt):
    """[(offset, length)] allocated in path's own layer, merged.

    For qcow2 that is every cluster present at depth 0, zero clusters
    included (they hide the backing's data); for raw it is data, not holes.
    The backing file is not opened: only this layer is asked about, and an
    esnap clone whose external base is gone must still be listed (SPDK
    shows such an lvol as degraded, it does not fail).
    """
    image = ['-f', fmt, path]
    if fmt == 'qcow2':
        image = ['json:' + json.dumps({
            'driver': 'qcow2', 'backing': None,
            'file': {'driver': 'file', 'filename': os.path.abspath(path)}})]
    out = run([QEMU_IMG, 'map', '-U', '--output=json'] + image,
              'qemu-img map %s' % path)
    extents = []
    for entry in json.loads(out):
        own = entry['depth'] == 0 and entry.get('present', True)
        if not own or (fmt == 'raw' and not entry['data']):
            continue
        start, length = entry['start'], entry['length']
        if extents and extents[-1][0] + extents[-1][1] == start:
            extents[-1] = (extents[-1][0], extents[-1][1] + length)
        else:
            extents.append((start, length))
    return extents


def read(path, fmt, offset, length):
    """The visible bytes of path (backing chain resolved) at offset.

    qemu's raw window wants 512-byte multiples, so read the aligned window
    around the request and cut the answer out of it.
    """
    if length == 0:
        return b''
    start = offset - offset % SECTOR
    end = -(-(offset + length) // SECTOR) * SECTOR
    with tempfile.TemporaryDirectory(prefix='dp-read-') as tmp:
        out = os.path.join(tmp, 'window.raw')
        run([QEMU_IMG, 'convert', '-U', '--image-opts',
             image_opts(fmt, path, start, end - start), '-O', 'raw', out],
            'read %d bytes at %d of %s' % (length, offset, path))
        with open(out, 'rb') as f:
            f.seek(offset - start)
            return f.read(length)


def copy_window(path, fmt, offset, length, dst_path):
    """Write path's visible bytes [offset, offset+length) into raw dst."""
    run([QEMU_IMG, 'convert', '-U', '-n', '--image-opts',
         image_opts(fmt, path, offset, length), '--target-image-opts',
         image_opts('raw', dst_path, offset, length)],
        'copy %d bytes at %d of %s to %s' % (length, offset, path, dst_path))
