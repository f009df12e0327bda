"""NVMe-oF target side: transports, subsystems, namespaces, listeners.

Listening is real: each distinct (traddr, trsvcid) is one bound
``nvmf_link.Listener`` shared (refcounted) by every subsystem listening
there. Each namespace is exported through the data plane's NBD server, and
the link's admit callback answers from a snapshot of the ACLs published
after every change, so a connecting initiator never waits on the RPC lock.
"""

import errno
import re
import threading

from tests.emulator import errors
from tests.emulator import keyring
from tests.emulator import nvmf_link
from tests.emulator import params as p

DISCOVERY_NQN = 'nqn.2014-08.org.nvmexpress.discovery'
_NQN_RE = re.compile(r'^nqn\.\d{4}-\d{2}\.[A-Za-z0-9.-]+(:.+)?$')
TCP_DEFAULTS = {
    'max_queue_depth': 128, 'max_io_qpairs_per_ctrlr': 127,
    'in_capsule_data_size': 4096, 'max_io_size': 131072,
    'max_aq_depth': 128, 'iobuf_small_cache_size': 4294967295,
    'iobuf_large_cache_size': 4294967295, 'dif_insert_or_strip': False,
    'zcopy': False, 'c2h_success': True, 'sock_priority': 0,
    'abort_timeout_sec': 1, 'ack_timeout': 0, 'data_wr_pool_size': 0,
    'disable_command_passthru': False, 'kas': 100, 'min_kato': 10000}


def _invalid():
    return errors.RpcError(errors.INVALID_PARAMS, 'Invalid parameters')


class Namespace(object):
    def __init__(self, nsid, bdev, export_name, nbd_socket):
        self.nsid = nsid
        self.bdev = bdev
        self.export_name = export_name
        self.nbd_socket = nbd_socket

    def to_json(self):
        return {'nsid': self.nsid, 'bdev_name': self.bdev.name,
                'name': self.bdev.name,
                'nguid': self.bdev.uuid.replace('-', '').upper(),
                'uuid': self.bdev.uuid}


class Subsystem(object):
    def __init__(self, nqn, args):
        self.nqn = nqn
        self.serial = args.get('serial_number', '0' * 20)
        self.model = args.get('model_number', 'SPDK bdev Controller')
        self.allow_any_host = args.get('allow_any_host', False)
        self.max_namespaces = args.get('max_namespaces') or 32
        self.min_cntlid = args.get('min_cntlid', 1)
        self.max_cntlid = args.get('max_cntlid', 65519)
        self.hosts = []
        self.host_keys = {}  # host NQN -> DH-HMAC-CHAP keyring key name
        self.listen = []  # (trtype, adrfam, traddr, trsvcid)
        self.namespaces = []

    def to_json(self):
        return {'nqn': self.nqn, 'subtype': 'NVMe',
                'listen_addresses': [
                    {'trtype': t, 'adrfam': a, 'traddr': addr,
                     'trsvcid': svc} for t, a, addr, svc in self.listen],
                'allow_any_host': self.allow_any_host,
                'hosts': [self.host_json(h) for h in self.hosts],
                'serial_number': self.serial, 'model_number': self.model,
                'max_namespaces': self.max_namespaces,
                'passthrough': False, 'min_cntlid': self.min_cntlid,
                'max_cntlid': self.max_cntlid, 'dmrsl': 2097152,
                'wzsl': 12,
                'namespaces': [ns.to_json() for ns in self.namespaces]}

    def host_json(self, host):
        entry = {'nqn': host}
        if host in self.host_keys:
            entry['dhchap_key'] = self.host_keys[host]
        return entry


class NvmfState(object):
    def __init__(self, target):
        self.target = target
        self.transports = {}
        self.subsystems = {}
        self._listeners = {}   # (traddr, trsvcid) -> [Listener, refs]
        self._acl = {}
        self._acl_lock = threading.Lock()

    def get(self, nqn):
        try:
            return self.subsystems[nqn]
        except KeyError:
            raise errors.RpcError(
                errors.INVALID_PARAMS,
                'Unable to find subsystem with NQN %s' % nqn) from None

    def exports_bdev(self, bdev):
        return any(ns.bdev is bdev for sub in self.subsystems.values()
                   for ns in sub.namespaces)

    def publish(self):
        """Refresh the snapshot the link's admit callback reads."""
        acl = {}
        for sub in self.subsystems.values():
            acl[sub.nqn] = (
                {(addr, svc) for _t, _a, addr, svc in sub.listen},
                sub.allow_any_host, set(sub.hosts),
                {h: self.target.keyring.path(k)
                 for h, k in sub.host_keys.items()},
                [{'nsid': ns.nsid, 'uuid': ns.bdev.uuid,
                  'num_blocks': ns.bdev.num_blocks,
                  'block_size': ns.bdev.block_size,
                  'nbd_socket': ns.nbd_socket,
                  'nbd_export': ns.export_name}
                 for ns in sub.namespaces])
        with self._acl_lock:
            self._acl = acl

    def _admit(self, address, subnqn, hostnqn):
        with self._acl_lock:
            entry = self._acl.get(subnqn)
        if entry is None:
            return None
        addresses, any_host, hosts, _keys, namespaces = entry
        if address not in addresses or not (any_host or hostnqn in hosts):
            return None
        return namespaces

    def _secret_for(self, subnqn, hostnqn):
        """The DH-HMAC-CHAP secret the host must prove, or None.

        The key file is read now, as SPDK reads it at each connect; a key
        that became unreadable refuses the host (an empty secret never
        matches a proof made with a real one).
        """
        with self._acl_lock:
            entry = self._acl.get(subnqn)
        if entry is None or hostnqn not in entry[3]:
            return None
        return keyring.read_secret(entry[3][hostnqn]) or ''

    def listen(self, address):
        entry = self._listeners.get(address)
        if entry is None:
            listener = nvmf_link.Listener(
                address[0], address[1],
                lambda sub, host: self._admit(address, sub, host),
                self._secret_for)
            listener.start()
            entry = self._listeners[address] = [listener, 0]
        entry[1] += 1

    def unlisten(self, address):
        entry = self._listeners[address]
        entry[1] -= 1
        if not entry[1]:
            entry[0].close()
            del self._listeners[address]

    def remove_ns(self, sub, ns):
        sub.namespaces.remove(ns)
        self.target.dataplane.delete_nbd_export(ns.export_name)

    def bdev_removed(self, bdev):
        for sub in self.subsystems.values():
            for ns in [n for n in sub.namespaces if n.bdev is bdev]:
                self.remove_ns(sub, ns)
        self.publish()

    def delete(self, sub):
        for ns in list(sub.namespaces):
            self.remove_ns(sub, ns)
        for listen in sub.listen:
            self.unlisten(listen[2:])
        del self.subsystems[sub.nqn]
        self.publish()

    def close(self):
        for sub in list(self.subsystems.values()):
            self.delete(sub)

    def config(self):
        calls = [{'method': 'nvmf_create_transport',
                  'params': dict(trtype=t, **opts)}
                 for t, opts in self.transports.items()]
        for sub in self.subsystems.values():
            calls.append({'method': 'nvmf_create_subsystem', 'params': {
                'nqn': sub.nqn, 'allow_any_host': sub.allow_any_host,
                'serial_number': sub.serial, 'model_number': sub.model,
                'max_namespaces': sub.max_namespaces}})
            calls.extend({'method': 'nvmf_subsystem_add_listener',
                          'params': {'nqn': sub.nqn, 'listen_address': {
                              'trtype': t, 'adrfam': a, 'traddr': addr,
                              'trsvcid': svc}}}
                         for t, a, addr, svc in sub.listen)
            calls.extend({'method': 'nvmf_subsystem_add_host',
                          'params': dict(sub.host_json(h), nqn=sub.nqn,
                                         host=h)}
                         for h in sub.hosts)
            calls.extend({'method': 'nvmf_subsystem_add_ns',
                          'params': {'nqn': sub.nqn, 'namespace': {
                              'nsid': ns.nsid,
                              'bdev_name': ns.bdev.name}}}
                         for ns in sub.namespaces)
        return calls


def nvmf_create_transport(target, args):
    trtype = args['trtype'].upper()
    if trtype in target.nvmf.transports:
        raise errors.RpcError(errors.INTERNAL_ERROR,
                              "Transport type '%s' already exists" % trtype)
    if trtype != 'TCP':
        raise errors.RpcError(errors.INVALID_PARAMS,
                              "Transport type '%s' unavailable" % trtype)
    opts = dict(TCP_DEFAULTS)
    opts.update({k: v for k, v in args.items()
                 if k in TCP_DEFAULTS})
    target.nvmf.transports[trtype] = opts
    return True


def nvmf_get_transports(target, args):
    wanted = args.get('trtype', '').upper()
    return [dict(trtype=t, **opts)
            for t, opts in target.nvmf.transports.items()
            if not wanted or t == wanted]


def nvmf_create_subsystem(target, args):
    nqn = args['nqn']
    state = target.nvmf
    if nqn in state.subsystems or not _NQN_RE.match(nqn) or len(nqn) > 223:
        raise errors.RpcError(errors.INTERNAL_ERROR,
                              'Unable to create subsystem %s' % nqn)
    state.subsystems[nqn] = Subsystem(nqn, args)
    state.publish()
    return True


def nvmf_delete_subsystem(target, args):
    sub = target.nvmf.subsystems.get(args['nqn'])
    if sub is None:
        raise _invalid()
    target.nvmf.delete(sub)
    return True


def nvmf_get_subsystems(target, args):
    state = target.nvmf
    if 'nqn' in args:
        if args['nqn'] not in state.subsystems:
            raise errors.invalid_params(errno.ENODEV)
        return [state.subsystems[args['nqn']].to_json()]
    discovery = {'nqn': DISCOVERY_NQN, 'subtype': 'Discovery',
                 'listen_addresses': [], 'allow_any_host': True,
                 'hosts': []}
    return [discovery] + [s.to_json() for s in state.subsystems.values()]


def _address(target, args):
    addr = args['listen_address']
    trtype = addr['trtype'].upper()
    if trtype not in target.nvmf.transports:
        raise _invalid()
    adrfam = {'IPV4': 'IPv4', 'IPV6': 'IPv6'}.get(
        addr.get('adrfam', 'IPv4').upper(), addr.get('adrfam'))
    return (trtype, adrfam, addr['traddr'], addr.get('trsvcid', '4420'))


def nvmf_subsystem_add_listener(target, args):
    state = target.nvmf
    sub = state.get(args['nqn'])
    listen = _address(target, args)
    if listen in sub.listen:
        raise _invalid()
    try:
        state.listen(listen[2:])
    except OSError as err:
        raise _invalid() from err
    sub.listen.append(listen)
    state.publish()
    return True


def nvmf_subsystem_remove_listener(target, args):
    state = target.nvmf
    sub = state.get(args['nqn'])
    listen = _address(target, args)
    if listen not in sub.listen:
        raise _invalid()
    sub.listen.remove(listen)
    state.unlisten(listen[2:])
    state.publish()
    return True


def export_name(nqn, nsid):
    """The NBD export carrying a namespace (what the link hands out)."""
    return 'nvmf-%s-%d' % (re.sub(r'[^A-Za-z0-9.-]', '_', nqn), nsid)


def nvmf_subsystem_add_ns(target, args):
    state = target.nvmf
    sub = state.get(args['nqn'])
    spec = args['namespace']
    bdev = target.find_bdev(spec['bdev_name'])
    used = {ns.nsid for ns in sub.namespaces}
    nsid = spec.get('nsid') or next(
        (n for n in range(1, sub.max_namespaces + 1) if n not in used), 0)
    if bdev is None or not nsid or nsid in used or (
            nsid > sub.max_namespaces):
        raise _invalid()
    export = export_name(sub.nqn, nsid)
    nbd_socket = target.dataplane.export_nbd(export, bdev.source())
    sub.namespaces.append(Namespace(nsid, bdev, export, nbd_socket))
    state.publish()
    return nsid


def nvmf_subsystem_remove_ns(target, args):
    state = target.nvmf
    sub = state.get(args['nqn'])
    for ns in sub.namespaces:
        if ns.nsid == args['nsid']:
            state.remove_ns(sub, ns)
            state.publish()
            return True
    raise _invalid()


def _set_host(target, args, add):
    state = target.nvmf
    sub = state.get(args['nqn'])
    host = args['host']
    key = args.get('dhchap_key')
    if add and key is not None and not target.keyring.has(key):
        # nvmf_rpc.c: "Unable to find DH-HMAC-CHAP key" (no transcript).
        raise _invalid()
    if add and host not in sub.hosts:
        sub.hosts.append(host)
        if key is not None:
            sub.host_keys[host] = key
    elif not add and host in sub.hosts:
        sub.hosts.remove(host)
        sub.host_keys.pop(host, None)
    state.publish()
    return True


def nvmf_subsystem_add_host(target, args):
    return _set_host(target, args, True)


def nvmf_subsystem_remove_host(target, args):
    return _set_host(target, args, False)


def nvmf_subsystem_allow_any_host(target, args):
    sub = target.nvmf.get(args['nqn'])
    sub.allow_any_host = args['allow_any_host']
    target.nvmf.publish()
    return True


_TGT = {'tgt_name': p.Opt(p.string)}
_LISTEN = p.Object(trtype=p.string, adrfam=p.Opt(p.string),
                   traddr=p.string, trsvcid=p.Opt(p.string))
_TRANSPORT_OPTS = {k: p.Opt(p.boolean if isinstance(v, bool) else p.uint64)
                   for k, v in TCP_DEFAULTS.items()}
_TRANSPORT_OPTS.update(num_shared_buffers=p.Opt(p.uint32),
                       buf_cache_size=p.Opt(p.uint32),
                       control_msg_num=p.Opt(p.uint32),
                       **_TGT)
_HOST = p.Object(nqn=p.string, host=p.string, psk=p.Opt(p.string),
                 dhchap_key=p.Opt(p.string), dhchap_ctrlr_key=p.Opt(p.string),
                 **_TGT)

METHODS = {
    'nvmf_create_transport': (p.Object(trtype=p.string, **_TRANSPORT_OPTS),
                              nvmf_create_transport),
    'nvmf_get_transports': (p.Object(trtype=p.Opt(p.string), **_TGT),
                            nvmf_get_transports),
    'nvmf_create_subsystem': (p.Object(
        nqn=p.string, serial_number=p.Opt(p.string),
        model_number=p.Opt(p.string), allow_any_host=p.Opt(p.boolean),
        max_namespaces=p.Opt(p.uint32), ana_reporting=p.Opt(p.boolean),
        min_cntlid=p.Opt(p.uint16), max_cntlid=p.Opt(p.uint16),
        max_discard_size_kib=p.Opt(p.uint64),
        max_write_zeroes_size_kib=p.Opt(p.uint64),
        passthrough=p.Opt(p.boolean), enable_nssr=p.Opt(p.boolean),
        **_TGT), nvmf_create_subsystem),
    'nvmf_delete_subsystem': (p.Object(nqn=p.string, **_TGT),
                              nvmf_delete_subsystem),
    'nvmf_get_subsystems': (p.Object(nqn=p.Opt(p.string), **_TGT),
                            nvmf_get_subsystems),
    'nvmf_subsystem_add_listener': (p.Object(
        nqn=p.string, listen_address=_LISTEN, secure_channel=p.Opt(
            p.boolean), sock_impl=p.Opt(p.string), ana_state=p.Opt(
            p.string), **_TGT), nvmf_subsystem_add_listener),
    'nvmf_subsystem_remove_listener': (p.Object(
        nqn=p.string, listen_address=_LISTEN, **_TGT),
        nvmf_subsystem_remove_listener),
    'nvmf_subsystem_add_ns': (p.Object(
        nqn=p.string, namespace=p.Object(
            bdev_name=p.string, nsid=p.Opt(p.uint32),
            nguid=p.Opt(p.string), eui64=p.Opt(p.string),
            uuid=p.Opt(p.string), anagrpid=p.Opt(p.uint32),
            ptpl_file=p.Opt(p.string), no_auto_visible=p.Opt(p.boolean),
            hide_metadata=p.Opt(p.boolean)), **_TGT),
        nvmf_subsystem_add_ns),
    'nvmf_subsystem_remove_ns': (p.Object(nqn=p.string, nsid=p.uint32,
                                          **_TGT), nvmf_subsystem_remove_ns),
    'nvmf_subsystem_add_host': (_HOST, nvmf_subsystem_add_host),
    'nvmf_subsystem_remove_host': (_HOST, nvmf_subsystem_remove_host),
    'nvmf_subsystem_allow_any_host': (p.Object(
        nqn=p.string, allow_any_host=p.boolean, **_TGT),
        nvmf_subsystem_allow_any_host),
}
