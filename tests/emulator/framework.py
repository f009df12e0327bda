"""Framework and discovery RPCs: version, methods, reactors, config.

``save_config`` is deliberately absent: in SPDK v26 it is an rpc.py
command assembled from ``framework_get_subsystems`` and
``framework_get_config``, not an RPC.
"""

import os
import threading

from tests.emulator import errors
from tests.emulator import params as p

VERSION = 'SPDK v26.05 git sha1 d519b163cb'
TICK_RATE = 2000000000

# (subsystem, depends_on) in SPDK v26.05's initialisation order.
SUBSYSTEMS = (
    ('keyring', []), ('iobuf', []), ('sock', []), ('vmd', []),
    ('accel', ['iobuf']),
    ('bdev', ['accel', 'keyring', 'vmd', 'sock', 'iobuf']),
    ('scsi', ['bdev']), ('scheduler', []), ('vhost_scsi', ['scsi']),
    ('vhost_blk', ['bdev']), ('nbd', ['bdev']),
    ('nvmf', ['bdev', 'keyring', 'sock', 'accel', 'iobuf']),
    ('iscsi', ['scsi', 'sock']))


def spdk_get_version(target, args):
    return {'version': VERSION,
            'fields': {'major': 26, 'minor': 5, 'patch': 0, 'suffix': '',
                       'commit': 'd519b163cb'}}


def rpc_get_methods(target, args):
    """The methods this emulator really implements."""
    return sorted(target.methods)


def framework_get_reactors(target, args):
    pid = os.getpid()
    reactors = []
    for index, (lcore, numa) in enumerate(target.reactors):
        threads = []
        if index == 0:
            threads.append({'name': 'app_thread', 'id': 1,
                            'cpumask': '1', 'elapsed': 0})
        reactors.append({'lcore': lcore, 'numa_id': numa,
                         'tid': threading.get_native_id(), 'busy': 0,
                         'idle': 0, 'in_interrupt': False, 'irq': 0,
                         'sys': 0, 'usr': 0, 'lw_threads': threads})
    return {'tick_rate': TICK_RATE, 'pid': pid, 'reactors': reactors}


def framework_get_subsystems(target, args):
    return [{'subsystem': name, 'depends_on': list(deps)}
            for name, deps in SUBSYSTEMS]


def _bdev_config(target):
    calls = []
    for bdev in target.bdevs:
        kind = type(bdev).__name__
        if kind == 'MallocBdev':
            calls.append({'method': 'bdev_malloc_create', 'params': {
                'name': bdev.name, 'num_blocks': bdev.num_blocks,
                'block_size': bdev.block_size, 'uuid': bdev.uuid}})
        elif kind == 'AioBdev':
            calls.append({'method': 'bdev_aio_create', 'params': {
                'name': bdev.name, 'filename': bdev.path,
                'block_size': bdev.block_size,
                'readonly': bdev.readonly}})
    for ctrlr in target.nvme.controllers.values():
        calls.append({'method': 'bdev_nvme_attach_controller',
                      'params': ctrlr.config()})
    for bdev in target.bdevs:
        limits = {k: v for k, v in bdev.qos.items() if v}
        if limits:
            calls.append({'method': 'bdev_set_qos_limit',
                          'params': dict(name=bdev.name, **limits)})
    calls.append({'method': 'bdev_wait_for_examine'})
    return calls


def framework_get_config(target, args):
    name = args['name']
    if name not in dict(SUBSYSTEMS):
        raise errors.RpcError(errors.INVALID_PARAMS, 'Subsystem not found')
    if name == 'bdev':
        return _bdev_config(target)
    if name == 'vhost_blk':
        return target.vhost.config()
    if name == 'nvmf':
        return target.nvmf.config()
    return [] if name != 'scsi' else None


METHODS = {
    'spdk_get_version': (p.NO_PARAMS, spdk_get_version),
    'rpc_get_methods': (p.Object(current=p.Opt(p.boolean),
                                 include_aliases=p.Opt(p.boolean)),
                        rpc_get_methods),
    'framework_get_reactors': (p.NO_PARAMS, framework_get_reactors),
    'framework_get_subsystems': (p.NO_PARAMS, framework_get_subsystems),
    'framework_get_config': (p.Object(name=p.string),
                             framework_get_config),
}
