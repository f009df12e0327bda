"""bdev_nvme initiator: attach a remote NVMe-oF subsystem as bdevs.

Attach probes the remote emulator over the link (refused host or nothing
listening is SPDK's -5 "Input/output error"), then makes one bdev
"<name>n<nsid>" per namespace whose data flows through an
``nvmf_link.InitiatorProxy`` into the storage side's NBD export.
"""

import errno
import os

from tests.emulator import bdev as bdev_mod
from tests.emulator import errors
from tests.emulator import keyring
from tests.emulator import nvmf_link
from tests.emulator import params as p

RECONNECT_KEYS = ('ctrlr_loss_timeout_sec', 'reconnect_delay_sec',
                  'fast_io_fail_timeout_sec')
# "For ever", in a unit the data plane's NBD client accepts.
FOREVER_SEC = 3600 * 24


class NvmeBdev(bdev_mod.Bdev):
    product_name = 'NVMe disk'
    write_hints = {'preferred_write_alignment': 1,
                   'preferred_write_granularity': 1,
                   'optimal_write_size': 256,
                   'preferred_unmap_alignment': 1,
                   'preferred_unmap_granularity': 1}

    def __init__(self, ctrlr, ns, proxy):
        super().__init__('%sn%d' % (ctrlr.name, ns['nsid']),
                         ns['block_size'], ns['num_blocks'], ns['uuid'])
        self.aliases = [ns['uuid']]
        self.ctrlr = ctrlr
        self.nsid = ns['nsid']
        self.proxy = proxy

    def source(self):
        return ('nbd', self.proxy.unix_path, self.proxy.export_name,
                self.ctrlr.io_wait_sec())

    def supported_io_types(self):
        return bdev_mod.io_types(
            'read', 'write', 'unmap', 'flush', 'reset', 'nvme_admin',
            'nvme_io', 'write_zeroes', 'compare', 'compare_and_write',
            'abort', 'copy')

    def driver_specific(self):
        return {'nvme': [{'trid': self.ctrlr.trid(),
                          'ns_data': {'id': self.nsid, 'can_share': True}}],
                'mp_policy': 'active_passive'}


class NvmeController(object):
    def __init__(self, name, args):
        self.name = name
        self.traddr = args['traddr']
        self.trsvcid = args.get('trsvcid', '4420')
        self.adrfam = {'IPV6': 'IPv6'}.get(
            args.get('adrfam', 'ipv4').upper(), 'IPv4')
        self.subnqn = args['subnqn']
        self.hostnqn = args.get('hostnqn', '')
        self.timeouts = {k: args[k] for k in RECONNECT_KEYS if k in args}
        self.keys = {k: args[k] for k in ('dhchap_key',) if k in args}
        self.bdevs = []

    def io_wait_sec(self):
        """How long I/O waits for a lost connection to come back.

        SPDK queues I/O for fast_io_fail_timeout_sec (0: until the
        controller is given up after ctrlr_loss_timeout_sec; -1: for
        ever); with neither set it fails I/O at once.
        """
        fast_fail = self.timeouts.get('fast_io_fail_timeout_sec', 0)
        loss = self.timeouts.get('ctrlr_loss_timeout_sec', 0)
        if fast_fail:
            return fast_fail
        return FOREVER_SEC if loss == -1 else loss

    def config(self):
        """The bdev_nvme_attach_controller call that re-creates it."""
        return dict(name=self.name, hostnqn=self.hostnqn, **self.trid(),
                    **self.timeouts, **self.keys)

    def trid(self):
        return {'trtype': 'TCP', 'adrfam': self.adrfam,
                'traddr': self.traddr, 'trsvcid': self.trsvcid,
                'subnqn': self.subnqn}

    def to_json(self):
        return {'name': self.name, 'ctrlrs': [{
            'state': 'enabled', 'trid': self.trid(), 'cntlid': 1,
            'host': {'nqn': self.hostnqn, 'addr': '', 'svcid': '',
                     'no_shn_notification': False}}]}


class NvmeState(object):
    def __init__(self, target):
        self.target = target
        self.controllers = {}

    def detach(self, ctrlr):
        _undo(self.target, ctrlr)
        del self.controllers[ctrlr.name]

    def close(self):
        for ctrlr in list(self.controllers.values()):
            self.detach(ctrlr)


def _undo(target, ctrlr):
    for bdev in ctrlr.bdevs:
        target.remove_bdev(bdev)
        bdev.proxy.close()


def _secret(target, args):
    """The DH-HMAC-CHAP secret named by ``dhchap_key``, or None.

    An unknown or unreadable key fails the attach before any connection
    (-ENOKEY here; SPDK's exact code for it is not in our transcripts).
    """
    name = args.get('dhchap_key')
    if name is None:
        return None
    secret = keyring.read_secret(target.keyring.path(name))
    if not secret:
        raise errors.errno_error(errno.ENOKEY)
    return secret


def bdev_nvme_attach_controller(target, args):
    state = target.nvme
    name = args['name']
    if args['trtype'].upper() != 'TCP':
        raise errors.errno_error(errno.EINVAL)
    if name in state.controllers:
        raise errors.errno_error(errno.EEXIST)
    ctrlr = NvmeController(name, args)
    secret = _secret(target, args)
    try:
        namespaces = nvmf_link.probe(ctrlr.traddr, ctrlr.trsvcid,
                                     ctrlr.subnqn, ctrlr.hostnqn,
                                     secret=secret)
    except (OSError, ConnectionError) as err:
        raise errors.errno_error(errno.EIO) from err
    link_dir = target.private_dir('nvme')
    try:
        for ns in namespaces:
            bdev_name = '%sn%d' % (name, ns['nsid'])
            if target.name_taken(bdev_name):
                raise errors.errno_error(errno.EEXIST)
            proxy = nvmf_link.InitiatorProxy(
                os.path.join(link_dir, bdev_name + '.sock'), ctrlr.traddr,
                ctrlr.trsvcid, ctrlr.subnqn, ctrlr.hostnqn, ns['nsid'],
                secret=secret)
            proxy.start()
            bdev = NvmeBdev(ctrlr, ns, proxy)
            ctrlr.bdevs.append(bdev)
            target.add_bdev(bdev)
    except (OSError, LookupError) as err:
        _undo(target, ctrlr)
        raise errors.errno_error(errno.EIO) from err
    except errors.RpcError:
        _undo(target, ctrlr)
        raise
    state.controllers[name] = ctrlr
    return [b.name for b in ctrlr.bdevs]


def bdev_nvme_detach_controller(target, args):
    ctrlr = target.nvme.controllers.get(args['name'])
    if ctrlr is None:
        raise errors.errno_error(errno.ENODEV)
    target.nvme.detach(ctrlr)
    return True


def bdev_nvme_get_controllers(target, args):
    ctrls = target.nvme.controllers
    if 'name' in args:
        if args['name'] not in ctrls:
            raise errors.errno_error(errno.ENODEV)
        return [ctrls[args['name']].to_json()]
    return [c.to_json() for c in ctrls.values()]


_OPTIONAL = {k: p.Opt(p.string) for k in (
    'adrfam', 'trsvcid', 'priority', 'subnqn', 'hostnqn', 'hostaddr',
    'hostsvcid', 'multipath', 'psk', 'dhchap_key', 'dhchap_ctrlr_key')}
_OPTIONAL.update({k: p.Opt(p.boolean) for k in (
    'prchk_reftag', 'prchk_guard', 'hdgst', 'ddgst')})
_OPTIONAL['ctrlr_loss_timeout_sec'] = p.Opt(p.int32)
_OPTIONAL.update({k: p.Opt(p.uint32) for k in (
    'reconnect_delay_sec', 'fast_io_fail_timeout_sec', 'num_io_queues',
    'max_bdevs')})
_OPTIONAL['fabrics_connect_timeout_us'] = p.Opt(p.uint64)

METHODS = {
    'bdev_nvme_attach_controller': (p.Object(
        name=p.string, trtype=p.string, traddr=p.string, **_OPTIONAL),
        bdev_nvme_attach_controller),
    'bdev_nvme_detach_controller': (p.Object(
        name=p.string, trtype=p.Opt(p.string), traddr=p.Opt(p.string),
        adrfam=p.Opt(p.string), trsvcid=p.Opt(p.string),
        subnqn=p.Opt(p.string), hostaddr=p.Opt(p.string),
        hostsvcid=p.Opt(p.string)), bdev_nvme_detach_controller),
    'bdev_nvme_get_controllers': (p.Object(name=p.Opt(p.string)),
                                  bdev_nvme_get_controllers),
}
