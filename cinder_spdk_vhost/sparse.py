"""Sparse raw files: their data extents, and copies that keep the holes.

A replicated volume's copies hold the guest's disk after the compute
host's RAID superblock (:data:`superblock.DATA_OFFSET` in), a backup's
file holds it from byte 0: what moves between the two moves the data
extents alone, so neither the file nor the lvols made from it gain
allocated space where the volume was never written.
"""

import os

from cinder import exception
from oslo_concurrency import processutils

CHUNK = 1024 * 1024


def extents(fd, start=0, end=None):
    """(first byte, end) of each data extent of ``fd`` in [start, end)."""
    if end is None:
        end = os.fstat(fd).st_size
    offset = start
    while offset < end:
        try:
            first = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError:  # ENXIO: no data after offset
            return
        if first >= end:
            return
        offset = min(os.lseek(fd, first, os.SEEK_HOLE), end)
        yield first, offset


def dig_holes(path):
    """Turn the zero-filled ranges of ``path`` into holes (util-linux).

    A file read whole (a staged restore, a copy read over NVMe/TCP, which
    says nothing of what was never written) becomes as thin as its data.
    """
    try:
        processutils.execute('fallocate', '--dig-holes', path)
    except (processutils.ProcessExecutionError, OSError) as err:
        raise exception.VolumeBackendAPIException(
            data='could not make %s sparse: %s' % (path, err)) from err


def shifted_copy(src, dst, skip, seek, size):
    """New sparse ``dst`` of ``size`` bytes: ``src`` from ``skip`` at ``seek``.

    Only ``src``'s data extents are written; the rest of ``dst`` is holes
    (zeros), and what would fall past ``size`` is left out.
    """
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(src, 'rb') as inp, os.fdopen(fd, 'wb') as out:
        out.truncate(size)
        for first, end in extents(inp.fileno(), skip, skip + size - seek):
            inp.seek(first)
            out.seek(first - skip + seek)
            left = end - first
            while left:
                chunk = inp.read(min(CHUNK, left))
                if not chunk:
                    break
                out.write(chunk)
                left -= len(chunk)
