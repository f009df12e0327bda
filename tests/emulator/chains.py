"""What the data plane knows about sources open in qemu-storage-daemon.

Plain records, no I/O: the source key, the QSD node chain of an open source
(image layers and throttle filters) and the exports holding it open.
"""

import errno
import os

from tests.emulator import images

MIB = 1024 * 1024
QOS_KEYS = ('rw_ios_per_sec', 'rw_mbytes_per_sec', 'r_mbytes_per_sec',
            'w_mbytes_per_sec')


def source_key(source):
    """A hashable, normalised source: (abs path, fmt) or ('nbd', ...)."""
    if source[0] == 'nbd':
        _, sock, name, io_wait = (tuple(source) + (0,))[:4]
        return ('nbd', os.path.abspath(sock), name, io_wait)
    path, fmt = source
    if fmt not in ('qcow2', 'raw'):
        raise images.DataPlaneError(
            errno.EINVAL, 'unknown image format %r of %s' % (fmt, path))
    return (os.path.abspath(path), fmt)


def throttle_limits(qos):
    """QSD throttle-group limits (outer, inner) for SPDK QoS limits."""
    outer = {'iops-total': qos['rw_ios_per_sec'],
             'bps-total': qos['rw_mbytes_per_sec'] * MIB}
    inner = {'bps-read': qos['r_mbytes_per_sec'] * MIB,
             'bps-write': qos['w_mbytes_per_sec'] * MIB}
    return outer, inner


class Layer(object):
    """One image of an open chain and its QSD format node.

    QSD opens the file through a private hard link: QEMU reopens files by
    name (a live snapshot turns the old top read-only), and the public name
    may by then belong to a new overlay.
    """

    def __init__(self, path, fmt, node, link=None):
        self.path = path
        self.fmt = fmt
        self.node = node
        self.link = link


class Chain(object):
    """One open source: its QSD nodes and the files behind them."""

    def __init__(self, key):
        self.key = key
        self.layers = []    # [Layer], top first
        self.groups = []    # throttle-group ids, outer first
        self.filters = []   # throttle node names, outer first
        self.users = set()  # exports holding the chain open

    @property
    def top(self):
        return self.layers[0].node

    @property
    def paths(self):
        return [layer.path for layer in self.layers]


class Export(object):
    def __init__(self, qsd_id, key, socket_path=None):
        self.qsd_id = qsd_id
        self.key = key
        self.socket_path = socket_path
