"""The one exception tree of the shared core; each side translates it.

Everything :mod:`spdk_vhost_core` raises is a :class:`SpdkVhostError`. The
Cinder driver turns it into Cinder's exceptions and the connector into
os-brick's, each at its own boundary, so neither service sees the other's
types. Besides failed RPCs, the core refuses malformed connection
properties, an unsupported SPDK release and a saved config it could not
write.

SPDK reports a failure as a JSON-RPC error ``{"code", "message"}``, but its
codes are not uniform (v26.05, see the recorded transcripts' README):
"File exists" is -17 from ``bdev_lvol_create`` and -32602 from
``bdev_lvol_snapshot``; "No such device" is -19, -32602 or -32603 depending
on the RPC; a refused snapshot delete is -32603 "Operation not permitted".
Callers must not parse those themselves, so :func:`from_response` turns
every error into one class of the tree below by looking at the code and the
message together, in one table (``_RULES``)::

    SpdkVhostError              base of everything here
     +-- InvalidProperties      malformed connection properties
     +-- qos.InvalidQoS         a QoS spec SPDK cannot enforce
     +-- reconnect.Invalid      NVMe reconnect settings SPDK would refuse
     +-- UnsupportedSpdkVersion the target runs an unsupported release
     +-- ConfigNotSaved         the target's config could not be saved
     +-- UpgradeError           spdk-vhost-upgrade stopped, saying why
     |    +-- RolledBack        the new target failed; the old one runs
     |    +-- RollbackFailed    and the old one did not come back
     |    +-- systemd_unit.UnitError  systemctl failed
     +-- SpdkRpcError           any failed call
          +-- NotFound          ENODEV, ENOKEY, "No such device", "... does
                                not exist"
          +-- AlreadyExists     EEXIST, "File exists", "... already exists"
          +-- Busy              EBUSY, "Device or resource busy"
          +-- NoSpace           ENOSPC, "No space left on device"
          +-- NotPermitted      EPERM, "Operation not permitted"
          +-- TryAgain          EAGAIN, "Resource temporarily unavailable"
          +-- NotSupported      EOPNOTSUPP, e.g. NVMe/TCP in interrupt mode
          +-- InvalidParams     EINVAL, -32602, JSON decode failures
          +-- MethodNotFound    -32601
          +-- SpdkTransportError  no JSON-RPC answer was had
               +-- Timeout            the target did not answer in time
               +-- TargetUnreachable  cannot connect, after the retries
               +-- ProtocolError      closed mid-reply, malformed reply

A node's agent (:mod:`spdk_vhost_agent`) answers SPDK's errors as they
came, and its own when the target did not answer (``AGENT_TARGET_*``):
they map to the same transport errors as a socket's, so a caller cannot
tell, and need not, whether the target is on this host.

An error that matches no rule stays a plain :class:`SpdkRpcError` (e.g.
-32603 "Unable to create subsystem ..." which SPDK gives both for a
duplicate and for a malformed NQN, or -5 EIO from a refused NVMe-oF
connect): guessing a subclass there would send callers down a wrong branch.
"""

import errno

from oslo_utils import strutils

# JSON-RPC 2.0 reserved codes, as SPDK uses them.
JSONRPC_INVALID_PARAMS = -32602
JSONRPC_INTERNAL_ERROR = -32603
JSONRPC_METHOD_NOT_FOUND = -32601
# Server-defined codes of spdk-vhost-agent: the node's agent answered,
# but had no answer from the node's target (down, or restarting).
AGENT_TARGET_UNREACHABLE = -32000
AGENT_TARGET_TIMEOUT = -32001
AGENT_TARGET_PROTOCOL = -32002

# SPDK params holding key material or key names; oslo's list does not know
# them, and they must not reach a log line either.
_SPDK_SECRET_KEYS = frozenset(('psk', 'dhchap_key', 'dhchap_ctrlr_key',
                               'key', 'secret', 'password'))
_MASK = '***'


def mask_params(params):
    """Return a copy of RPC params that is safe to log."""
    if isinstance(params, dict):
        masked = strutils.mask_dict_password(params, secret=_MASK)
        return {k: (_MASK if k in _SPDK_SECRET_KEYS else mask_params(v))
                for k, v in masked.items()}
    if isinstance(params, (list, tuple)):
        return [mask_params(item) for item in params]
    if isinstance(params, str):
        return strutils.mask_password(params, secret=_MASK)
    return params


class SpdkVhostError(Exception):
    """Base of every error of the shared core."""


class InvalidProperties(SpdkVhostError):
    """Connection properties that do not follow the wire format."""

    def __init__(self, reason):
        super().__init__('invalid spdk_vhost connection properties: %s'
                         % reason)
        self.reason = reason


class UnsupportedSpdkVersion(SpdkVhostError):
    """The target runs an SPDK release this project does not support."""

    def __init__(self, target, found, supported):
        super().__init__('SPDK target %s runs %s; this release of '
                         'spdk-vhost supports SPDK %s only'
                         % (target, found, supported))


class ConfigNotSaved(SpdkVhostError):
    """The saved config could not be written; the change is not durable."""

    def __init__(self, path, reason):
        super().__init__('cannot save the SPDK config to %s: %s'
                         % (path, reason))
        self.path = path
        self.reason = reason


class UpgradeError(SpdkVhostError):
    """The upgrade stopped; the message says where and why."""


class RolledBack(UpgradeError):
    """The new target failed; the previous one runs again."""


class RollbackFailed(UpgradeError):
    """The new target failed and the previous one did not come back."""


class SpdkRpcError(SpdkVhostError):
    """An SPDK RPC failed; ``code`` is SPDK's JSON-RPC error code or None.

    ``params`` is kept (masked) so that a log of the exception says what was
    asked without leaking secrets.
    """

    def __init__(self, method, params=None, code=None, message=''):
        params = mask_params(params)
        super().__init__(method, params, code, message)
        self.method = method
        self.params = params
        self.code = code
        self.message = message

    def __str__(self):
        return ('SPDK RPC %s failed (code %s): %s'
                % (self.method, self.code, self.message))


class NotFound(SpdkRpcError):
    """The bdev, lvstore, controller or operation named does not exist."""


class AlreadyExists(SpdkRpcError):
    """An object of that name already exists."""


class Busy(SpdkRpcError):
    """The object is in use (EBUSY)."""


class NoSpace(SpdkRpcError):
    """The lvstore has no room for the requested size."""


class NotPermitted(SpdkRpcError):
    """SPDK refused the operation, e.g. deleting a snapshot with clones."""


class TryAgain(SpdkRpcError):
    """Transient refusal (EAGAIN), e.g. a QoS change with no I/O channel."""


class NotSupported(SpdkRpcError):
    """The target cannot do this in its present mode (EOPNOTSUPP)."""


class InvalidParams(SpdkRpcError):
    """SPDK could not decode or rejected the params of the call."""


class MethodNotFound(SpdkRpcError):
    """The target does not know the method (older SPDK, module missing)."""


class SpdkTransportError(SpdkRpcError):
    """No valid JSON-RPC answer; the target may have run the call."""


class Timeout(SpdkTransportError):
    """The target did not answer within the client's timeout."""


class TargetUnreachable(SpdkTransportError):
    """The target's socket could not be connected, even after retries."""


class ProtocolError(SpdkTransportError):
    """The reply was cut short, malformed or for another request."""


# (codes or None for any, lower-case message fragment or None, class).
# First match wins, so message rules for the generic JSON-RPC codes come
# before the plain errno rules and the catch-all for -32602.
_GENERIC = (JSONRPC_INVALID_PARAMS, JSONRPC_INTERNAL_ERROR)
_RULES = (
    (_GENERIC, 'no such device', NotFound),
    # bdev_nvme_get_controllers for an unknown name (v26.05; v26.01
    # answers a positive 22).
    ((-errno.EINVAL, errno.EINVAL) + _GENERIC, 'does not exist', NotFound),
    (_GENERIC, 'file exists', AlreadyExists),
    (_GENERIC, 'already exists', AlreadyExists),
    (_GENERIC, 'no space left on device', NoSpace),
    (_GENERIC, 'operation not permitted', NotPermitted),
    (_GENERIC, 'resource temporarily unavailable', TryAgain),
    (_GENERIC, 'device or resource busy', Busy),
    (_GENERIC, 'spdk_json_decode_object failed', InvalidParams),
    (_GENERIC, 'invalid argument', InvalidParams),
    (_GENERIC, 'invalid parameters', InvalidParams),
    ((JSONRPC_METHOD_NOT_FOUND,), None, MethodNotFound),
    ((AGENT_TARGET_UNREACHABLE,), None, TargetUnreachable),
    ((AGENT_TARGET_TIMEOUT,), None, Timeout),
    ((AGENT_TARGET_PROTOCOL,), None, ProtocolError),
    # ENOKEY: keyring_file_remove_key of a name the keyring lacks.
    ((-errno.ENODEV, -errno.ENOENT, -errno.ENOKEY), None, NotFound),
    ((-errno.EEXIST,), None, AlreadyExists),
    ((-errno.EBUSY,), None, Busy),
    ((-errno.ENOSPC,), None, NoSpace),
    ((-errno.EPERM,), None, NotPermitted),
    ((-errno.EAGAIN,), None, TryAgain),
    ((-errno.EOPNOTSUPP,), None, NotSupported),
    ((-errno.EINVAL,), None, InvalidParams),
    ((JSONRPC_INVALID_PARAMS,), None, InvalidParams),
)


def classify(code, message):
    """Return the exception class for an SPDK JSON-RPC error."""
    text = (message or '').lower()
    for codes, fragment, cls in _RULES:
        if code in codes and (fragment is None or fragment in text):
            return cls
    return SpdkRpcError


def from_response(method, params, error):
    """Build the exception for a JSON-RPC ``error`` object."""
    if not isinstance(error, dict):
        return ProtocolError(method, params,
                             message='malformed error object: %r' % (error,))
    code = error.get('code')
    message = error.get('message', '')
    return classify(code, message)(method, params, code, message)
