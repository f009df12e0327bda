"""A stateful in-process stand-in for an SPDK target, for driver unit tests.

It subclasses the real client's typed helpers and replaces only
``call()``, so the driver's calls go through the same param building as
on a real target, and errors come out of the real classifier
(:func:`spdk_vhost_core.exception.from_response`) from SPDK v26.05's
own codes and messages (tests/functional/transcripts/README.md).

It keeps a few dicts (lvol stores, lvols, aio bdevs, NVMe-oF subsystems,
vhost controllers) and the few behaviours the driver relies on: creating
really creates, deleting really deletes, a snapshot takes its origin's
place in the chain, deleting a snapshot with one clone folds it into
that clone, a snapshot cannot be renamed, and a QoS change on an idle
bdev is EAGAIN. No data moves: the functional tests against a real
SPDK target cover that.

:meth:`FakeSpdk.fail` injects an error of a chosen class into one call
of a chosen method, before that call changes anything.
"""

import copy
import errno
import itertools
import os

from spdk_vhost_core import exception as rpc_exc
from spdk_vhost_core import spdk_rpc_bdev
from spdk_vhost_core import spdk_rpc_export

MIB = 1024 * 1024
BLOCK = 512
QOS_KEYS = ('rw_ios_per_sec', 'rw_mbytes_per_sec', 'r_mbytes_per_sec',
            'w_mbytes_per_sec')
INVALID_PARAMS = rpc_exc.JSONRPC_INVALID_PARAMS
INTERNAL = rpc_exc.JSONRPC_INTERNAL_ERROR

# A (code, message) pair SPDK really answers for each class; None: the
# class is raised by the client itself, with no JSON-RPC error.
ERRORS = {
    rpc_exc.NotFound: (-errno.ENODEV, 'No such device'),
    rpc_exc.AlreadyExists: (-errno.EEXIST, 'File exists'),
    rpc_exc.Busy: (-errno.EBUSY, 'Device or resource busy'),
    rpc_exc.NoSpace: (-errno.ENOSPC, 'No space left on device'),
    rpc_exc.NotPermitted: (INTERNAL, 'Operation not permitted'),
    rpc_exc.TryAgain: (INVALID_PARAMS, 'Failed to configure rate limit: '
                       'Resource temporarily unavailable'),
    rpc_exc.InvalidParams: (INVALID_PARAMS, 'Invalid parameters'),
    rpc_exc.MethodNotFound: (rpc_exc.JSONRPC_METHOD_NOT_FOUND,
                             'Method not found'),
    rpc_exc.Timeout: None,
    rpc_exc.TargetUnreachable: None,
    rpc_exc.ProtocolError: None,
}
ALL_ERRORS = tuple(ERRORS)


class _Refused(Exception):
    """Raised by a handler; call() turns it into the client's error."""

    def __init__(self, code, message=None):
        super().__init__(code, message)
        self.code = code
        self.message = message or os.strerror(abs(code))


def _errno(err, code=None):
    return _Refused(-err if code is None else code, os.strerror(err))


def make_error(cls, method, params=None):
    """An instance of ``cls`` as the real client would raise it."""
    pair = ERRORS[cls]
    if pair is None:
        return cls(method, params, None, 'injected %s' % cls.__name__)
    err = rpc_exc.from_response(method, params,
                                {'code': pair[0], 'message': pair[1]})
    assert type(err) is cls, (cls, err)
    return err


class FakeSpdk(spdk_rpc_bdev.FrameworkMethods,
               spdk_rpc_bdev.BdevMethods,
               spdk_rpc_bdev.LvolMethods,
               spdk_rpc_export.VhostMethods,
               spdk_rpc_export.NvmfMethods):
    """In-memory SPDK target; see the module docstring."""

    target = 'fake:spdk'
    through_agent = False  # a target on this host

    def __init__(self, lvstores=('lvs0',), clusters=1024):
        self._ids = itertools.count(1)
        self.lvstores = {}
        for name in lvstores:
            self.lvstores[name] = {
                'uuid': self._uuid(), 'name': name, 'base_bdev': 'Malloc0',
                'cluster_size': MIB, 'block_size': BLOCK,
                'total_data_clusters': clusters}
        self._observers = []
        self.lvols = {}
        self.aio = {}
        self.subsystems = {}
        self.controllers = {}
        self.transports = set()
        self.copies = {}
        self.methods = {name[len('_rpc_'):] for name in dir(self)
                        if name.startswith('_rpc_')}
        self.calls = []
        self._faults = []

    def _uuid(self):
        return '00000000-0000-4000-8000-%012d' % next(self._ids)

    # -- test controls -----------------------------------------------------

    def fail(self, method, cls, skip=0):
        """Raise ``cls`` from the ``skip``-th next call of ``method``."""
        self._faults.append([method, skip, cls])

    def pending_faults(self):
        return [(m, c.__name__) for m, _s, c in self._faults]

    def close(self):
        """The real client's close(); nothing to release here."""

    def state(self):
        """Everything a driver may change, by name (UUIDs left out)."""
        lvols = {}
        for lvol in self.lvols.values():
            lvols[self._alias(lvol)] = {
                'size': lvol['size'], 'thin': lvol['thin'],
                'parent': self._parent_alias(lvol), 'esnap': lvol['esnap'],
                'read_only': lvol['read_only'], 'qos': dict(lvol['qos'])}
        subsystems = {nqn: {'hosts': sorted(sub['hosts']),
                            'namespaces': [self._alias(self.lvols[n])
                                           for n in sub['namespaces']],
                            'listen': list(sub['listen'])}
                      for nqn, sub in self.subsystems.items()}
        return copy.deepcopy({'lvols': lvols, 'aio': sorted(self.aio),
                              'subsystems': subsystems,
                              'controllers': dict(self.controllers),
                              'transports': sorted(self.transports)})

    def add_controller(self, name, bdev):
        """A vhost controller serving ``bdev``, as a connector makes one."""
        self.controllers[name] = self._lvol(bdev)['uuid']

    def lvol(self, name):
        """The record of lvol ``name`` (alias or UUID), for assertions."""
        return self._lvol(name)

    # -- dispatch ----------------------------------------------------------

    def observe(self, observer):
        """As the real client's: ``observer`` sees every call."""
        self._observers.append(observer)

    def call(self, method, params=None):
        result = None
        try:
            result = self._dispatch(method, dict(params or {}))
            return result
        finally:
            for observer in self._observers:
                observer(method, dict(params or {}), result)

    def _dispatch(self, method, params):
        self.calls.append((method, params))
        for fault in self._faults:
            if fault[0] == method:
                if fault[1]:
                    fault[1] -= 1
                    continue
                self._faults.remove(fault)
                raise make_error(fault[2], method, params)
        if method not in self.methods:
            raise make_error(rpc_exc.MethodNotFound, method, params)
        try:
            return copy.deepcopy(getattr(self, '_rpc_' + method)(params))
        except _Refused as err:
            raise rpc_exc.from_response(
                method, params, {'code': err.code,
                                 'message': err.message}) from err

    # -- lookups -----------------------------------------------------------

    @staticmethod
    def _alias(lvol):
        return '%s/%s' % (lvol['lvs'], lvol['name'])

    def _parent_alias(self, lvol):
        parent = self.lvols.get(lvol['parent'])
        return self._alias(parent) if parent else None

    def _find_lvol(self, name):
        for lvol in self.lvols.values():
            if name in (lvol['uuid'], self._alias(lvol)):
                return lvol
        return None

    def _lvol(self, name, code=None):
        lvol = self._find_lvol(name)
        if lvol is None:
            raise _errno(errno.ENODEV, code)
        return lvol

    def _store(self, name):
        if name not in self.lvstores:
            raise _errno(errno.ENODEV)
        return self.lvstores[name]

    def _clones(self, lvol):
        return [c for c in self.lvols.values() if c['parent'] == lvol['uuid']]

    def _taken(self, lvs, name, code=None):
        if self._find_lvol('%s/%s' % (lvs, name)) is not None:
            raise _errno(errno.EEXIST, code)

    def _free_clusters(self, store):
        """A thick lvol's clusters, and those a thin one has written."""
        used = sum(lvol.get('allocated', 0) if lvol['thin']
                   else lvol['size'] // store['cluster_size']
                   for lvol in self.lvols.values()
                   if lvol['lvs'] == store['name'])
        return store['total_data_clusters'] - used

    def _add(self, lvs, name, size, thin, **extra):
        store = self._store(lvs)
        size = -(-size // store['cluster_size']) * store['cluster_size']
        if not thin and size // store['cluster_size'] > (
                self._free_clusters(store)):
            raise _errno(errno.ENOSPC)
        lvol = {'uuid': self._uuid(), 'lvs': lvs, 'name': name,
                'size': size, 'thin': thin, 'parent': None, 'esnap': None,
                'frozen': False, 'read_only': False,
                'qos': dict.fromkeys(QOS_KEYS, 0)}
        lvol.update(extra)
        self.lvols[lvol['uuid']] = lvol
        return lvol

    def _open_channel(self, uuid):
        return uuid in self.controllers.values() or any(
            uuid in sub['namespaces'] for sub in self.subsystems.values())

    def _bdev_json(self, lvol):
        store = self.lvstores[lvol['lvs']]
        info = {'lvol_store_uuid': store['uuid'],
                'base_bdev': store['base_bdev'],
                'thin_provision': lvol['thin'],
                # A thick lvol has every cluster from its creation.
                'num_allocated_clusters': lvol.get('allocated', 0 if (
                    lvol['thin']) else lvol['size'] // store['cluster_size']),
                'snapshot': bool(self._clones(lvol)),
                'clone': lvol['parent'] is not None,
                'esnap_clone': lvol['esnap'] is not None}
        if lvol['parent']:
            info['base_snapshot'] = self.lvols[lvol['parent']]['name']
        if info['snapshot']:
            info['clones'] = [c['name'] for c in self._clones(lvol)]
        return {'name': lvol['uuid'], 'aliases': [self._alias(lvol)],
                'product_name': 'Logical Volume', 'block_size': BLOCK,
                'num_blocks': lvol['size'] // BLOCK, 'uuid': lvol['uuid'],
                'assigned_rate_limits': dict(lvol['qos']),
                # A connector's layer and an NVMe-oF namespace claim it.
                'claimed': self._open_channel(lvol['uuid']),
                'driver_specific': {'lvol': info}}

    @staticmethod
    def _aio_json(name, aio):
        return {'name': name, 'aliases': [], 'product_name': 'AIO disk',
                'block_size': aio['block_size'],
                'num_blocks': aio['size'] // aio['block_size'],
                'assigned_rate_limits': dict.fromkeys(QOS_KEYS, 0),
                'driver_specific': {'aio': {'filename': aio['filename']}}}

    # -- framework and bdev RPCs ------------------------------------------

    def _rpc_rpc_get_methods(self, params):
        return sorted(self.methods)

    #: What ``spdk_get_version`` answers; tests may change it.
    version = {'version': 'SPDK v26.05',
               'fields': {'major': 26, 'minor': 5, 'patch': 0,
                          'suffix': ''}}

    def _rpc_spdk_get_version(self, params):
        return copy.deepcopy(self.version)

    def _rpc_bdev_get_bdevs(self, params):
        if 'name' in params:
            name = params['name']
            if name in self.aio:
                return [self._aio_json(name, self.aio[name])]
            return [self._bdev_json(self._lvol(name))]
        return ([self._bdev_json(lvol) for lvol in self.lvols.values()] +
                [self._aio_json(n, a) for n, a in self.aio.items()])

    def _rpc_bdev_set_qos_limit(self, params):
        lvol = self._lvol(params['name'])
        limits = {k: params[k] for k in QOS_KEYS if k in params}
        if any(lvol['qos'].values()) and not self._open_channel(
                lvol['uuid']):
            raise _errno(errno.EAGAIN, INVALID_PARAMS)
        lvol['qos'].update(limits)
        return True

    def _rpc_bdev_aio_create(self, params):
        name = params['name']
        if name in self.aio or self._find_lvol(name):
            raise _errno(errno.EEXIST)
        self.aio[name] = {'filename': params['filename'],
                          'size': os.path.getsize(params['filename']),
                          'block_size': params.get('block_size', BLOCK),
                          'readonly': bool(params.get('readonly'))}
        return name

    def _rpc_bdev_aio_delete(self, params):
        if self.aio.pop(params['name'], None) is None:
            raise _errno(errno.ENODEV)
        return True

    # -- lvol RPCs ---------------------------------------------------------

    def _rpc_bdev_lvol_get_lvstores(self, params):
        stores = ([self._store(params['lvs_name'])] if 'lvs_name' in params
                  else list(self.lvstores.values()))
        return [dict(store, free_clusters=self._free_clusters(store))
                for store in stores]

    def _rpc_bdev_lvol_get_lvols(self, params):
        lvs = params.get('lvs_name')
        return [{'alias': self._alias(lvol), 'uuid': lvol['uuid'],
                 'name': lvol['name'],
                 'is_thin_provisioned': lvol['thin'],
                 'is_snapshot': bool(self._clones(lvol)),
                 'is_clone': lvol['parent'] is not None,
                 'is_esnap_clone': lvol['esnap'] is not None,
                 'lvs': {'name': lvol['lvs'],
                         'uuid': self.lvstores[lvol['lvs']]['uuid']}}
                for lvol in self.lvols.values()
                if lvs in (None, lvol['lvs'])]

    def _rpc_bdev_lvol_create(self, params):
        lvs = params['lvs_name']
        self._store(lvs)
        self._taken(lvs, params['lvol_name'])
        return self._add(lvs, params['lvol_name'],
                         params['size_in_mib'] * MIB,
                         bool(params.get('thin_provision')))['uuid']

    def _rpc_bdev_lvol_delete(self, params):
        lvol = self._lvol(params['name'])
        clones = self._clones(lvol)
        if len(clones) > 1:
            raise _errno(errno.EPERM, INTERNAL)
        for child in clones:
            child['parent'], child['esnap'] = lvol['parent'], lvol['esnap']
        del self.lvols[lvol['uuid']]
        return True

    def _rpc_bdev_lvol_resize(self, params):
        lvol = self._lvol(params['name'])
        lvol['size'] = params['size_in_mib'] * MIB
        return True

    def _rpc_bdev_lvol_snapshot(self, params):
        origin = self._lvol(params['lvol_name'])
        self._taken(origin['lvs'], params['snapshot_name'], INVALID_PARAMS)
        # The snapshot takes over the origin's clusters: no new space.
        thin, origin['thin'] = origin['thin'], True
        snap = self._add(origin['lvs'], params['snapshot_name'],
                         origin['size'], thin, frozen=True,
                         parent=origin['parent'], esnap=origin['esnap'],
                         allocated=origin.get('allocated', 0))
        origin.update(parent=snap['uuid'], esnap=None, allocated=0)
        return snap['uuid']

    def _rpc_bdev_lvol_clone(self, params):
        snap = self._lvol(params['snapshot_name'])
        if not (snap['frozen'] or snap['read_only']):
            raise _errno(errno.EINVAL, INVALID_PARAMS)
        self._taken(snap['lvs'], params['clone_name'], INVALID_PARAMS)
        return self._add(snap['lvs'], params['clone_name'], snap['size'],
                         True, parent=snap['uuid'])['uuid']

    def _rpc_bdev_lvol_clone_bdev(self, params):
        base = self.aio.get(params['bdev'])
        if base is None:
            raise _errno(errno.ENODEV)
        self._taken(params['lvs_name'], params['clone_name'])
        return self._add(params['lvs_name'], params['clone_name'],
                         base['size'], True, esnap=params['bdev'])['uuid']

    def _rpc_bdev_lvol_inflate(self, params):
        lvol = self._lvol(params['name'])
        lvol.update(parent=None, esnap=None, thin=False)
        return True

    def _rpc_bdev_lvol_decouple_parent(self, params):
        lvol = self._lvol(params['name'])
        parent = self.lvols.get(lvol['parent'])
        if parent is not None:
            lvol.update(parent=parent['parent'], esnap=parent['esnap'])
        else:
            lvol['esnap'] = None
        return True

    def _rpc_bdev_lvol_set_read_only(self, params):
        self._lvol(params['name'])['read_only'] = True
        return True

    def _rpc_bdev_lvol_rename(self, params):
        lvol = self._lvol(params['old_name'])
        if lvol['frozen']:
            # A snapshot's metadata is read-only (spdk_blob_set_xattr).
            raise _errno(errno.EPERM, INVALID_PARAMS)
        self._taken(lvol['lvs'], params['new_name'], INVALID_PARAMS)
        lvol['name'] = params['new_name']
        return True

    def _rpc_bdev_lvol_start_shallow_copy(self, params):
        """Done at once; a refused copy is only seen in its report.

        As SPDK v26.05: a missing destination is refused at the start, a
        writable source (EPERM) or a destination smaller than the source
        (EINVAL) in the check. Into an lvol, the source's allocated
        clusters become allocated there (at most its size).
        """
        src = self._lvol(params['src_lvol_name'])
        name = params['dst_bdev_name']
        dst = self._find_lvol(name)
        if name not in self.aio and dst is None:
            raise _errno(errno.ENODEV, INVALID_PARAMS)
        size = self.aio[name]['size'] if dst is None else dst['size']
        op_id = len(self.copies)
        clusters = src['size'] // MIB
        if not (src['frozen'] or src['read_only']):
            report = {'state': 'error', 'error': os.strerror(errno.EPERM)}
        elif size < src['size']:
            report = {'state': 'error', 'error': os.strerror(errno.EINVAL)}
        else:
            report = {'state': 'complete', 'copied_clusters': clusters,
                      'total_clusters': clusters}
            if dst is not None:
                dst['allocated'] = min(
                    dst['size'] // MIB,
                    dst.get('allocated', 0) + src.get('allocated', 0))
        report.setdefault('copied_clusters', 0)
        report.setdefault('total_clusters', 0)
        self.copies[op_id] = report
        return {'operation_id': op_id}

    def _rpc_bdev_lvol_check_shallow_copy(self, params):
        report = self.copies.pop(params['operation_id'], None)
        if report is None:
            raise _errno(errno.ENODEV, INVALID_PARAMS)
        return report

    # -- vhost and NVMe-oF RPCs -------------------------------------------

    def _rpc_vhost_get_controllers(self, params):
        if params.get('name', self.controllers) not in self.controllers:
            raise _errno(errno.ENODEV, INVALID_PARAMS)
        return [{'ctrlr': name,
                 'backend_specific': {'block': {'bdev': bdev,
                                                'readonly': False}}}
                for name, bdev in self.controllers.items()
                if params.get('name', name) == name]

    def _rpc_nvmf_create_transport(self, params):
        trtype = params['trtype'].upper()
        if trtype in self.transports:
            raise _Refused(INTERNAL, "Transport type '%s' already exists"
                           % trtype)
        self.transports.add(trtype)
        return True

    def _subsystem(self, nqn):
        if nqn not in self.subsystems:
            raise _Refused(INVALID_PARAMS, 'Invalid parameters')
        return self.subsystems[nqn]

    def _rpc_nvmf_create_subsystem(self, params):
        nqn = params['nqn']
        if nqn in self.subsystems:
            raise _Refused(INTERNAL, 'Unable to create subsystem %s' % nqn)
        self.subsystems[nqn] = {
            'nqn': nqn, 'subtype': 'NVMe', 'hosts': [], 'namespaces': [],
            'listen': [], 'allow_any_host': params.get('allow_any_host'),
            'serial_number': params.get('serial_number')}
        return True

    def _rpc_nvmf_delete_subsystem(self, params):
        self._subsystem(params['nqn'])
        del self.subsystems[params['nqn']]
        return True

    def _sub_json(self, sub):
        return {'nqn': sub['nqn'], 'subtype': 'NVMe',
                'allow_any_host': sub['allow_any_host'],
                'hosts': [{'nqn': host} for host in sub['hosts']],
                'listen_addresses': [dict(zip(
                    ('trtype', 'traddr', 'trsvcid', 'adrfam'), listen))
                    for listen in sub['listen']],
                'namespaces': [{'nsid': nsid, 'bdev_name': uuid}
                               for nsid, uuid in enumerate(
                                   sub['namespaces'], 1)]}

    def _rpc_nvmf_get_subsystems(self, params):
        if 'nqn' in params:
            if params['nqn'] not in self.subsystems:
                raise _errno(errno.ENODEV, INVALID_PARAMS)
            return [self._sub_json(self.subsystems[params['nqn']])]
        return [self._sub_json(sub) for sub in self.subsystems.values()]

    def _rpc_nvmf_subsystem_add_ns(self, params):
        sub = self._subsystem(params['nqn'])
        lvol = self._find_lvol(params['namespace']['bdev_name'])
        if lvol is None or sub['namespaces']:
            raise _Refused(INVALID_PARAMS, 'Invalid parameters')
        sub['namespaces'].append(lvol['uuid'])
        return len(sub['namespaces'])

    def _rpc_nvmf_subsystem_add_listener(self, params):
        sub = self._subsystem(params['nqn'])
        addr = params['listen_address']
        sub['listen'].append((addr['trtype'], addr['traddr'],
                              addr['trsvcid'], addr.get('adrfam')))
        return True

    def _rpc_nvmf_subsystem_add_host(self, params):
        sub = self._subsystem(params['nqn'])
        if params['host'] not in sub['hosts']:
            sub['hosts'].append(params['host'])
        return True

    def _rpc_nvmf_subsystem_remove_host(self, params):
        sub = self._subsystem(params['nqn'])
        if params['host'] in sub['hosts']:
            sub['hosts'].remove(params['host'])
        return True
