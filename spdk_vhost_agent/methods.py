"""What a request to the agent may do, and doing it.

Two kinds of method. The SPDK methods the Cinder driver uses are
forwarded to the node's target as they are, and SPDK's answer goes back
as it came (error codes included): :data:`FORWARDED`, a fixed list that
holds nothing naming a file on this node (``bdev_aio_create``,
``keyring_file_add_key``), nothing that stops the target and nothing
that reads key material back (``framework_get_config`` prints crypto
keys). The agent's own methods (:data:`node_state.METHODS`) write what
must be on this node: the saved config, key files, the record of
connected hosts. Anything else is refused as SPDK refuses an unknown
method (-32601), naming the agent.
"""

import re

from oslo_log import log

from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import host_settings
from spdk_vhost_core import node_state
from spdk_vhost_core import nvme_auth
from spdk_vhost_core import reconnect

LOG = log.getLogger(__name__)

FORWARDED = frozenset((
    'rpc_get_methods', 'spdk_get_version',
    # lvols, snapshots, clones and their QoS
    'bdev_get_bdevs', 'bdev_get_iostat', 'bdev_set_qos_limit',
    'bdev_wait_for_examine', 'bdev_examine',
    'bdev_lvol_get_lvstores', 'bdev_lvol_get_lvols', 'bdev_lvol_create',
    'bdev_lvol_delete', 'bdev_lvol_resize', 'bdev_lvol_snapshot',
    'bdev_lvol_clone', 'bdev_lvol_rename', 'bdev_lvol_decouple_parent',
    'bdev_lvol_inflate', 'bdev_lvol_set_read_only',
    # a move between the node's lvol stores (retype, migrate)
    'bdev_lvol_start_shallow_copy', 'bdev_lvol_check_shallow_copy',
    # NVMe-oF exports, one subsystem per volume
    'nvmf_create_transport', 'nvmf_get_transports', 'nvmf_create_subsystem',
    'nvmf_delete_subsystem', 'nvmf_get_subsystems', 'nvmf_subsystem_add_ns',
    'nvmf_subsystem_add_listener', 'nvmf_subsystem_add_host',
    'nvmf_subsystem_remove_host', 'nvmf_subsystem_get_qpairs',
    # a hyperconverged target's controllers, looked up before a delete
    'vhost_get_controllers',
))
# The agent answers these itself when SPDK did not answer.
_TRANSPORT_CODES = (
    (spdk_exc.Timeout, spdk_exc.AGENT_TARGET_TIMEOUT,
     'the node\'s SPDK target did not answer in time'),
    (spdk_exc.TargetUnreachable, spdk_exc.AGENT_TARGET_UNREACHABLE,
     'the node\'s SPDK target is unreachable'),
    (spdk_exc.SpdkTransportError, spdk_exc.AGENT_TARGET_PROTOCOL,
     'the node\'s SPDK target broke off its answer'),
)
_KEY_NAME = re.compile(r'^%s[0-9a-f]{24}$' % re.escape(nvme_auth.NAME_PREFIX))
_NAME = re.compile(r'^[a-z_]{1,64}$')
_NQN_MAX = 223  # NVMe base specification


class Invalid(Exception):
    """A request the agent will not run; the message says why."""


def _nqn(value, what):
    if not isinstance(value, str) or not value.startswith('nqn.') or \
            len(value) > _NQN_MAX:
        raise Invalid('%s is not an NQN' % what)
    return value


def _key_name(value):
    if not isinstance(value, str) or not _KEY_NAME.match(value):
        raise Invalid('a key name is %s followed by 24 hex digits'
                      % nvme_auth.NAME_PREFIX)
    return value


def _settings(value):
    """A host's recorded settings: unknown, mirrored, or valid ones."""
    if value is None or value == host_settings.MIRRORED:
        return value
    try:
        return reconnect.check(value)
    except reconnect.Invalid as err:
        raise Invalid('settings: %s' % err) from err


def _subsystems(value):
    if value is None:
        return None
    if not isinstance(value, list) or not all(
            isinstance(v, str) and _NAME.match(v) for v in value):
        raise Invalid('subsystems is a list of SPDK subsystem names')
    return value


class Dispatcher(object):
    """Runs one JSON-RPC request against the node's target."""

    def __init__(self, client, node):
        self.client = client
        self.node = node
        self._own = {
            node_state.SAVE_CONFIG: self._save_config,
            node_state.KEY_ADD: self._key_add,
            node_state.KEY_REMOVE: self._key_remove,
            node_state.HOST_RECORD: self._host_record,
            node_state.HOST_FORGET: self._host_forget,
        }

    def __call__(self, request):
        """The reply to ``request`` (a decoded JSON value)."""
        if not isinstance(request, dict) or \
                not isinstance(request.get('method'), str):
            return _error(None, spdk_exc.JSONRPC_INVALID_PARAMS,
                          'Invalid request')
        req_id = request.get('id')
        method = request['method']
        params = request.get('params')
        if params is not None and not isinstance(params, dict):
            return _error(req_id, spdk_exc.JSONRPC_INVALID_PARAMS,
                          'Invalid parameters: params must be an object')
        try:
            if method in self._own:
                result = self._own[method](**self._arguments(method, params))
            elif method in FORWARDED:
                result = self._forward(method, params)
            else:
                return _error(req_id, spdk_exc.JSONRPC_METHOD_NOT_FOUND,
                              'Method not found: spdk-vhost-agent does not '
                              'forward %s' % method)
        except Invalid as err:
            return _error(req_id, spdk_exc.JSONRPC_INVALID_PARAMS,
                          'Invalid parameters: %s' % err)
        except spdk_exc.SpdkRpcError as err:
            return _error(req_id, *_code_and_message(err))
        except (OSError, spdk_exc.ConfigNotSaved) as err:
            LOG.error('%(method)s failed on this node: %(err)s',
                      {'method': method, 'err': err})
            return _error(req_id, spdk_exc.JSONRPC_INTERNAL_ERROR,
                          '%s failed on the node: %s' % (method, err))
        return {'jsonrpc': '2.0', 'id': req_id, 'result': result}

    @staticmethod
    def _arguments(method, params):
        params = params or {}
        wanted = node_state.METHODS[method]
        unknown = sorted(set(params) - set(wanted))
        if unknown:
            raise Invalid('%s takes no %s' % (method, ', '.join(unknown)))
        return {name: params.get(name) for name in wanted}

    def _forward(self, method, params):
        result = self.client.call(method, params)
        if method == 'rpc_get_methods':
            # What a caller can use through this agent: no more.
            result = sorted((set(result) & FORWARDED) |
                            set(node_state.METHODS))
        return result

    def _save_config(self, subsystems):
        self.node.save(_subsystems(subsystems))
        LOG.info('Saved the SPDK config to %s', self.node.saved)
        return True

    def _key_add(self, name, secret):
        name = _key_name(name)
        try:
            nvme_auth.check_secret(secret)
        except ValueError as err:
            raise Invalid('secret: %s' % err) from err
        self.node.add_key(name, secret)
        LOG.info('Added DH-HMAC-CHAP key %s', name)
        return True

    def _key_remove(self, name):
        self.node.remove_key(_key_name(name))
        LOG.info('Removed DH-HMAC-CHAP key %s', name)
        return True

    def _host_record(self, host_nqn, subsystem, settings):
        return self.node.record_host(_nqn(host_nqn, 'host_nqn'),
                                     _nqn(subsystem, 'subsystem'),
                                     _settings(settings))

    def _host_forget(self, subsystem, host_nqns):
        if not isinstance(host_nqns, list):
            raise Invalid('host_nqns is a list of NQNs')
        self.node.forget_hosts(_nqn(subsystem, 'subsystem'),
                               [_nqn(h, 'host_nqns') for h in host_nqns])
        return True


def _code_and_message(err):
    """SPDK's own error, or the agent's for an answer SPDK never gave."""
    for cls, code, what in _TRANSPORT_CODES:
        if isinstance(err, cls):
            return code, '%s: %s' % (what, err.message)
    return err.code, err.message


def _error(req_id, code, message):
    return {'jsonrpc': '2.0', 'id': req_id,
            'error': {'code': code, 'message': message}}
