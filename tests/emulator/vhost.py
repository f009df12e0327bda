"""vhost-blk controllers: each one a real vhost-user-blk socket.

The socket is served by the data plane (qemu-storage-daemon); this module
keeps SPDK's controller view: names, cpumask, coalescing settings, the
bdev (``null`` once the lvol is deleted under it) and the sessions of the
guests connected right now.
"""

import errno
import os

from tests.emulator import errors
from tests.emulator import params as p

DEFAULT_IOPS_THRESHOLD = 60000
# Real SPDK offers a guest up to SPDK_VHOST_MAX_VQUEUES (256) virtqueues
# per vhost-blk controller; qemu-storage-daemon defaults to one, which
# would refuse a multi-queue guest SPDK serves. 8 covers the guests here.
VHOST_BLK_QUEUES = 8


def parse_cpumask(text):
    """SPDK accepts hex ("0x3", "3") or a core list ("[0-1,3]")."""
    text = text.strip()
    try:
        if text.startswith('['):
            mask = 0
            for part in text[1:-1].split(','):
                low, _sep, high = part.partition('-')
                for core in range(int(low), int(high or low) + 1):
                    mask |= 1 << core
            return mask
        return int(text, 16)
    except ValueError as err:
        raise errors.invalid_params(errno.EINVAL) from err


class Controller(object):
    def __init__(self, name, bdev, cpumask, readonly, socket):
        self.name = name
        self.bdev = bdev
        self.cpumask = cpumask
        self.readonly = readonly
        self.socket = socket
        self.delay_base_us = 0
        self.iops_threshold = DEFAULT_IOPS_THRESHOLD


class VhostState(object):
    """The target's controllers, in creation order."""

    def __init__(self, target):
        self.target = target
        self.controllers = {}

    def get(self, name, code):
        try:
            return self.controllers[name]
        except KeyError:
            raise errors.errno_error(errno.ENODEV, code) from None

    def sessions(self, ctrl):
        if ctrl.bdev is None:
            return 0
        return self.target.dataplane.connected_sessions(ctrl.name)

    def sessions_on(self, bdev):
        return sum(self.sessions(c) for c in self.controllers.values()
                   if c.bdev is bdev)

    def bdev_removed(self, bdev):
        """Hot remove: the controller stays, its export goes.

        SPDK deletes the lvol even with a guest connected; the guest then
        gets I/O errors, so its connection is dropped here too.
        """
        for ctrl in self.controllers.values():
            if ctrl.bdev is bdev:
                self.target.dataplane.delete_export(ctrl.name, force=True)
                ctrl.bdev = None

    def to_json(self, ctrl):
        sessions = [{'vid': i, 'id': i, 'name': '%ss%d' % (ctrl.name, i),
                     'started': True}
                    for i in range(self.sessions(ctrl))]
        return {'ctrlr': ctrl.name, 'cpumask': '0x%x' % ctrl.cpumask,
                'delay_base_us': ctrl.delay_base_us,
                'iops_threshold': ctrl.iops_threshold,
                'socket': ctrl.socket, 'sessions': sessions,
                'backend_specific': {'block': {
                    'readonly': ctrl.readonly,
                    'bdev': ctrl.bdev.name if ctrl.bdev else None,
                    'transport': 'vhost_user_blk'}}}

    def config(self):
        """framework_get_config's vhost_blk calls."""
        return [{'method': 'vhost_create_blk_controller',
                 'params': {'ctrlr': c.name, 'dev_name': c.bdev.name,
                            'cpumask': '%x' % c.cpumask,
                            'readonly': c.readonly,
                            'transport': 'vhost_user_blk'}}
                for c in self.controllers.values() if c.bdev is not None]


def vhost_create_blk_controller(target, args):
    state = target.vhost
    bdev = target.get_bdev(args['dev_name'], errors.INVALID_PARAMS)
    mask = target.core_mask
    if 'cpumask' in args:
        mask = parse_cpumask(args['cpumask'])
        if not mask or mask & ~target.core_mask:
            raise errors.invalid_params(errno.EINVAL)
    name = args['ctrlr']
    if name in state.controllers:
        raise errors.invalid_params(errno.EEXIST)
    socket = os.path.join(target.vhost_dir, name)
    readonly = args.get('readonly', False)
    # A snapshot's data is immutable in SPDK whatever the controller says.
    frozen = getattr(bdev, 'frozen', False)
    target.dataplane.export_vhost_blk(name, bdev.source(), socket,
                                      readonly=readonly or frozen,
                                      num_queues=VHOST_BLK_QUEUES)
    state.controllers[name] = Controller(name, bdev, mask, readonly, socket)
    return True


def vhost_get_controllers(target, args):
    state = target.vhost
    if 'name' in args:
        ctrls = [state.get(args['name'], errors.INTERNAL_ERROR)]
    else:
        ctrls = list(state.controllers.values())
    return [state.to_json(c) for c in ctrls]


def vhost_delete_controller(target, args):
    state = target.vhost
    ctrl = state.get(args['ctrlr'], errors.INVALID_PARAMS)
    if state.sessions(ctrl):
        # lib/vhost refuses to unregister a device with live sessions.
        raise errors.invalid_params(errno.EBUSY)
    if ctrl.bdev is not None:
        target.dataplane.delete_export(ctrl.name)
    del state.controllers[ctrl.name]
    return True


def vhost_controller_set_coalescing(target, args):
    ctrl = target.vhost.get(args['ctrlr'], errors.INVALID_PARAMS)
    ctrl.delay_base_us = args['delay_base_us']
    ctrl.iops_threshold = args['iops_threshold']
    return True


METHODS = {
    'vhost_create_blk_controller': (p.Object(
        ctrlr=p.string, dev_name=p.string, cpumask=p.Opt(p.string),
        readonly=p.Opt(p.boolean), packed_ring=p.Opt(p.boolean),
        packed_ring_recovery=p.Opt(p.boolean), transport=p.Opt(p.string)),
        vhost_create_blk_controller),
    'vhost_get_controllers': (p.Object(name=p.Opt(p.string)),
                              vhost_get_controllers),
    'vhost_delete_controller': (p.Object(ctrlr=p.string),
                                vhost_delete_controller),
    'vhost_controller_set_coalescing': (p.Object(
        ctrlr=p.string, delay_base_us=p.uint32, iops_threshold=p.uint32),
        vhost_controller_set_coalescing),
}
