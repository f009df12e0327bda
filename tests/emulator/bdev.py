"""Generic bdevs (malloc, aio) and the RPCs every bdev answers.

A bdev here is a named block device with a data-plane ``source()``;
the JSON it reports follows SPDK v26.05's ``bdev_get_bdevs`` shape (see
transcripts/lvol.json) so clients parse the emulator like the real thing.
"""

import errno
import os
import time
import uuid as uuidlib

from tests.emulator import errors
from tests.emulator import params as p

QOS_KEYS = ('rw_ios_per_sec', 'rw_mbytes_per_sec', 'r_mbytes_per_sec',
            'w_mbytes_per_sec')
MIN_IOS_PER_SEC = 1000
TICK_RATE = 2000000000

_IO_TYPES = ('read', 'write', 'unmap', 'flush', 'reset', 'nvme_admin',
             'nvme_io', 'nvme_io_md', 'write_zeroes', 'zcopy',
             'get_zone_info', 'zone_management', 'zone_append', 'compare',
             'compare_and_write', 'abort', 'seek_hole', 'seek_data', 'copy',
             'nvme_iov_md', 'nvme_nssr', 'write_uncorrectable')


def io_types(*supported):
    unknown = set(supported) - set(_IO_TYPES)
    assert not unknown, unknown
    return {t: t in supported for t in _IO_TYPES}


class Bdev(object):
    """Common state: identity, geometry and the QoS limits SPDK stores."""

    product_name = 'bdev'
    write_hints = {'preferred_write_alignment': 0,
                   'preferred_write_granularity': 0,
                   'optimal_write_size': 0,
                   'preferred_unmap_alignment': 0,
                   'preferred_unmap_granularity': 0}
    memory_domains = ({'dma_device_type': 'DMA'},)

    def __init__(self, name, block_size, num_blocks, uuid=None):
        self.name = name
        self.aliases = []
        self.uuid = uuid or str(uuidlib.uuid4())
        self.block_size = block_size
        self.num_blocks = num_blocks
        self.qos = dict.fromkeys(QOS_KEYS, 0)
        self.claimed = False

    @property
    def size(self):
        return self.block_size * self.num_blocks

    def source(self):
        raise NotImplementedError

    def supported_io_types(self):
        return io_types('read', 'write', 'unmap', 'flush', 'reset',
                        'write_zeroes')

    def driver_specific(self):
        return {}

    def to_json(self, claim_type=None):
        """SPDK's JSON; ``claim_type`` names the claim a module holds."""
        info = {'name': self.name, 'aliases': list(self.aliases),
                'product_name': self.product_name,
                'block_size': self.block_size,
                'num_blocks': self.num_blocks}
        info.update(self.write_hints)
        info.update({'uuid': self.uuid, 'numa_id': -1,
                     'assigned_rate_limits': dict(self.qos),
                     'claimed': claim_type is not None,
                     'zoned': False,
                     'supported_io_types': self.supported_io_types(),
                     'memory_domains': [dict(d)
                                        for d in self.memory_domains],
                     'driver_specific': self.driver_specific()})
        if claim_type is not None:
            info['claim_type'] = claim_type
        return info


class MallocBdev(Bdev):
    """RAM disk: a sparse raw file under the state dir, gone at exit."""

    product_name = 'Malloc disk'

    def __init__(self, name, block_size, num_blocks, path, uuid=None):
        super().__init__(name, block_size, num_blocks, uuid)
        self.path = path

    def source(self):
        return (self.path, 'raw')

    def supported_io_types(self):
        return io_types('read', 'write', 'unmap', 'flush', 'reset',
                        'write_zeroes', 'zcopy', 'abort', 'copy')


class AioBdev(Bdev):
    """The user's own raw file; its lvstore data lives next to it."""

    product_name = 'AIO disk'

    def __init__(self, name, block_size, num_blocks, path, readonly,
                 fallocate, block_size_override, uuid=None):
        super().__init__(name, block_size, num_blocks, uuid)
        self.path = path
        self.readonly = readonly
        self.fallocate = fallocate
        self.block_size_override = block_size_override

    def source(self):
        return (self.path, 'raw')

    def driver_specific(self):
        return {'aio': {'filename': self.path,
                        'block_size_override': self.block_size_override,
                        'readable_view_only': self.readonly,
                        'fallocate': self.fallocate}}


def _check_new_name(target, name):
    if target.name_taken(name):
        raise errors.errno_error(errno.EEXIST)


def _uuid_param(args):
    value = args.get('uuid')
    if value is None:
        return None
    try:
        return str(uuidlib.UUID(value))
    except ValueError as err:
        raise p.decode_failed() from err


def bdev_malloc_create(target, args):
    block_size = args.get('block_size', 512)
    if block_size % 512 or not args['num_blocks']:
        raise errors.errno_error(errno.EINVAL)
    name = args.get('name')
    if name is None:
        index = 0
        while target.name_taken('Malloc%d' % index):
            index += 1
        name = 'Malloc%d' % index
    _check_new_name(target, name)
    path = os.path.join(target.private_dir('malloc'), name + '.raw')
    target.dataplane.create_raw(path, block_size * args['num_blocks'])
    target.add_bdev(MallocBdev(name, block_size, args['num_blocks'], path,
                               _uuid_param(args)))
    return name


def bdev_malloc_delete(target, args):
    bdev = target.find_bdev(args['name'])
    if not isinstance(bdev, MallocBdev):
        raise errors.errno_error(errno.ENODEV)
    target.lvol.base_removed(bdev, discard=True)
    target.remove_bdev(bdev)
    target.dataplane.delete_image(bdev.path)
    return True


def bdev_aio_create(target, args):
    name = args['name']
    _check_new_name(target, name)
    path = args['filename']
    try:
        size = os.stat(path).st_size
    except OSError as err:
        raise errors.errno_error(err.errno) from err
    block_size = args.get('block_size') or 512
    if block_size % 512 or size < block_size:
        raise errors.errno_error(errno.EINVAL)
    bdev = AioBdev(name, block_size, size // block_size, path,
                   args.get('readonly', False), args.get('fallocate', False),
                   bool(args.get('block_size')), _uuid_param(args))
    target.add_bdev(bdev)
    target.lvol.examine(bdev)
    return name


def bdev_aio_delete(target, args):
    bdev = target.find_bdev(args['name'])
    if not isinstance(bdev, AioBdev):
        raise errors.errno_error(errno.ENODEV)
    target.lvol.base_removed(bdev, discard=False)
    target.remove_bdev(bdev)
    return True


def _claim_type(target, bdev):
    # Both an lvstore and an NVMe-oF namespace take SPDK's legacy
    # exclusive-write claim on their bdev.
    if bdev.claimed or target.nvmf.exports_bdev(bdev):
        return 'exclusive_write'
    return None


def bdev_get_bdevs(target, args):
    if 'name' in args:
        bdevs = [target.get_bdev(args['name'])]
    else:
        bdevs = target.bdevs
    return [b.to_json(_claim_type(target, b)) for b in bdevs]


def _qos_error(err):
    return errors.RpcError(errors.INVALID_PARAMS,
                           'Failed to configure rate limit: %s'
                           % os.strerror(err))


def bdev_set_qos_limit(target, args):
    bdev = target.get_bdev(args['name'])
    limits = {k: args[k] for k in QOS_KEYS if k in args}
    if not limits:
        raise errors.RpcError(-errno.EINVAL, 'No rate limits specified')
    # SPDK quirk: an enabled QoS can only be changed through the thread
    # that owns an I/O channel of the bdev; with none open it is EAGAIN.
    if any(bdev.qos.values()) and not target.has_open_channel(bdev):
        raise _qos_error(errno.EAGAIN)
    if limits.get('rw_ios_per_sec', 0) % MIN_IOS_PER_SEC:
        raise _qos_error(errno.EINVAL)
    bdev.qos.update(limits)
    target.dataplane.set_qos(bdev.source(), dict(bdev.qos))
    return True


_IOSTAT_COUNTERS = (
    'bytes_read', 'num_read_ops', 'bytes_written', 'num_write_ops',
    'bytes_unmapped', 'num_unmap_ops', 'bytes_copied', 'num_copy_ops',
    'read_latency_ticks', 'max_read_latency_ticks',
    'min_read_latency_ticks', 'write_latency_ticks',
    'max_write_latency_ticks', 'min_write_latency_ticks',
    'unmap_latency_ticks', 'max_unmap_latency_ticks',
    'min_unmap_latency_ticks', 'copy_latency_ticks',
    'max_copy_latency_ticks', 'min_copy_latency_ticks')


def bdev_get_iostat(target, args):
    """Shape of SPDK's iostat; the data plane keeps no counters (zeros)."""
    if 'names' in args:
        bdevs = [target.get_bdev(n) for n in args['names']]
    else:
        bdevs = list(target.bdevs)
    stats = []
    for bdev in bdevs:
        entry = {'name': bdev.name}
        entry.update(dict.fromkeys(_IOSTAT_COUNTERS, 0))
        entry['io_error'] = {}
        stats.append(entry)
    return {'tick_rate': TICK_RATE,
            'ticks': int(time.monotonic() * TICK_RATE),
            'bdevs': stats}


def bdev_wait_for_examine(target, args):
    """Examine (lvstores on a new bdev) is synchronous here: no wait."""
    return True


METHODS = {
    'bdev_wait_for_examine': (p.NO_PARAMS, bdev_wait_for_examine),
    'bdev_malloc_create': (p.Object(
        name=p.Opt(p.string), num_blocks=p.uint64,
        block_size=p.Opt(p.uint32), physical_block_size=p.Opt(p.uint32),
        uuid=p.Opt(p.string), optimal_io_boundary=p.Opt(p.uint32),
        md_size=p.Opt(p.uint32), md_interleave=p.Opt(p.boolean),
        dif_type=p.Opt(p.int32), dif_is_head_of_md=p.Opt(p.boolean),
        dif_pi_format=p.Opt(p.uint32), numa_id=p.Opt(p.int32)),
        bdev_malloc_create),
    'bdev_malloc_delete': (p.Object(name=p.string), bdev_malloc_delete),
    'bdev_aio_create': (p.Object(
        name=p.string, filename=p.string, block_size=p.Opt(p.uint32),
        readonly=p.Opt(p.boolean), fallocate=p.Opt(p.boolean),
        uuid=p.Opt(p.string)), bdev_aio_create),
    'bdev_aio_delete': (p.Object(name=p.string), bdev_aio_delete),
    'bdev_get_bdevs': (p.Object(name=p.Opt(p.string),
                                timeout=p.Opt(p.uint64)), bdev_get_bdevs),
    'bdev_set_qos_limit': (p.Object(
        name=p.string, **{k: p.Opt(p.uint64) for k in QOS_KEYS}),
        bdev_set_qos_limit),
    'bdev_get_iostat': (p.Object(names=p.Opt(p.list_of(p.string)),
                                 per_channel=p.Opt(p.boolean)),
                        bdev_get_iostat),
}
