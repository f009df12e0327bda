"""Checks of everything the connector is handed, before any RPC is sent.

``connection_info`` comes from Cinder over the message bus and the
options from an operator's file; both end up in SPDK object names, in
paths of Unix sockets a privileged helper chowns, and in NVMe-oF
handshakes. A malformed value must be refused here, naming the key or
option, rather than reach SPDK (which answers with a generic -32602, or
worse, accepts it).

Only :class:`connector_errors.InvalidConnectionProperties` (bad
properties) and :class:`connector_errors.InvalidConnectorConfig` (bad
options) come out of this module.
"""

import grp
import ipaddress
import os
import pwd
import re
import stat

from oslo_log import log

from os_brick_connector import connector_errors as errors
from os_brick_connector import nvme_auth
from os_brick_connector import reconnect
from os_brick_connector import saved_config

LOG = log.getLogger(__name__)

LOCAL = 'local'
REMOTE_TRANSPORTS = ('tcp', 'rdma')
TRANSPORTS = (LOCAL,) + REMOTE_TRANSPORTS

# NVMe base spec 4.5: "nqn.yyyy-mm.<reverse domain>[:<anything>]", at most
# 223 bytes, printable; the uuid form is the same shape.
NQN_MAX = 223
_NQN = re.compile(r'^nqn\.[0-9]{4}-(0[1-9]|1[0-2])\.'
                  r'[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?'
                  r'(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*'
                  r'(:[\x21-\x7e]+)?$')
# An SPDK bdev name or lvol alias (lvs/lvol): no path parts, no spaces.
_BDEV_PART = r'[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}'
_BDEV = re.compile(r'^%s(/%s)?$' % (_BDEV_PART, _BDEV_PART))
# Who a multiattach volume's attachment is for (Nova: an instance uuid).
_ATTACHED_TO = re.compile(r'^[A-Za-z0-9_.:-]{1,255}$')
NS_ID_MAX = 0xfffffffe
BLOCK_SIZES = (512, 4096)
ACCESS_MODES = ('rw', 'ro')
ADRFAMS = ('ipv4', 'ipv6')


def _bad(key, value, why):
    return errors.InvalidConnectionProperties(
        reason='%s=%.80r %s' % (key, value, why))


def is_nqn(value):
    """Whether ``value`` is a well-formed NVMe Qualified Name."""
    return (isinstance(value, str) and len(value.encode('utf-8')) <= NQN_MAX
            and bool(_NQN.fullmatch(value)))


def check_nqn(key, value):
    if not is_nqn(value):
        raise _bad(key, value, 'is not an NVMe Qualified Name '
                   '(nqn.yyyy-mm.reverse.domain[:name], at most %d bytes)'
                   % NQN_MAX)


def _check_int(key, value, low, high):
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(key, value, 'must be an integer')
    if not low <= value <= high:
        raise _bad(key, value, 'must be between %d and %d' % (low, high))


def _check_str(key, value, pattern, what):
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise _bad(key, value, 'is not %s' % what)


def _check_remote(props):
    check_nqn('nqn', props.get('nqn'))
    if props.get('host_nqn') is not None:
        check_nqn('host_nqn', props['host_nqn'])
    traddr = props.get('traddr')
    try:
        address = ipaddress.ip_address(traddr)
    except ValueError as err:
        raise _bad('traddr', traddr, 'is not an IP address') from err
    port = props.get('trsvcid', '4420')
    if isinstance(port, int) and not isinstance(port, bool):
        port = str(port)
    if not isinstance(port, str) or not port.isdigit():
        raise _bad('trsvcid', port, 'is not a port number')
    _check_int('trsvcid', int(port), 1, 65535)
    adrfam = props.get('adrfam')
    if adrfam is not None:
        if not isinstance(adrfam, str) or adrfam.lower() not in ADRFAMS:
            raise _bad('adrfam', adrfam, 'must be one of %s'
                       % ', '.join(ADRFAMS))
        if adrfam.lower() != 'ipv%d' % address.version:
            raise _bad('adrfam', adrfam, 'does not match traddr %s'
                       % traddr)
    if props.get('ns_id') is not None:
        _check_int('ns_id', props['ns_id'], 1, NS_ID_MAX)


def _check_secret(props, key):
    """A DH-HMAC-CHAP secret, if any, must be well formed (never echoed)."""
    secret = props.get(key)
    if secret is None:
        return
    try:
        nvme_auth.check_secret(secret)
    except ValueError as err:
        raise errors.InvalidConnectionProperties(
            reason='%s: %s' % (key, err)) from err


def check_properties(props, volume_id_pattern):
    """Refuse malformed ``connection_properties``, naming the key.

    ``volume_id_pattern`` is the connector's own (the controller and its
    socket are named from the volume id).
    """
    if not isinstance(props, dict):
        raise errors.InvalidConnectionProperties(
            reason='expected a dict, got %s' % type(props).__name__)
    transport = props.get('transport')
    if transport not in TRANSPORTS:
        raise _bad('transport', transport, 'must be one of %s'
                   % ', '.join(TRANSPORTS))
    _check_str('volume_id', props.get('volume_id'), volume_id_pattern,
               'a volume id usable in a socket name')
    if transport == LOCAL:
        _check_str('bdev', props.get('bdev'), _BDEV,
                   'an SPDK bdev name or lvstore/lvol alias')
    else:
        _check_remote(props)
        _check_secret(props, 'dhchap_key')
        _check_secret(props, 'dhchap_ctrlr_key')
        if props.get('dhchap_ctrlr_key') and not props.get('dhchap_key'):
            raise _bad('dhchap_ctrlr_key', '***', 'needs a dhchap_key: '
                       'the controller authenticates only to a host that '
                       'authenticates itself')
    if props.get('access_mode') not in (None,) + ACCESS_MODES:
        raise _bad('access_mode', props['access_mode'], 'must be rw or ro')
    if props.get('block_size') not in (None,) + BLOCK_SIZES:
        raise _bad('block_size', props['block_size'], 'must be 512 or 4096')
    if props.get('attached_to') is not None:
        _check_str('attached_to', props['attached_to'], _ATTACHED_TO,
                   'an instance uuid or other simple name')
    if props.get('numa_node') is not None:
        _check_int('numa_node', props['numa_node'], 0, 1023)
    qos_specs = props.get('qos_specs')
    if qos_specs is not None and not isinstance(qos_specs, dict):
        raise _bad('qos_specs', qos_specs, 'must be a dict')


# -- options ----------------------------------------------------------------

def _conf_error(option, value, why):
    return errors.InvalidConnectorConfig(option=option, value=value,
                                         reason=why)


def socket_mode(value, option='vhost_socket_mode'):
    """The octal mode string as an int; never world-writable."""
    try:
        mode = int(value, 8)
    except (TypeError, ValueError) as err:
        raise _conf_error(option, value, 'is not an octal mode') from err
    if mode & ~0o777:
        raise _conf_error(option, value, 'has bits outside 0777')
    if mode & stat.S_IWOTH:
        raise _conf_error(option, value, 'lets every local user write to '
                          'the vhost socket (and so read and write the '
                          'volume); use 0660 and vhost_socket_group')
    return mode


def _check_account(option, name, lookup):
    if not name:
        return
    try:
        lookup(name)
    except KeyError as err:
        raise _conf_error(option, name, 'does not exist on this '
                          'host') from err


def check_conf(conf):
    """Refuse unusable ``[spdk_vhost]`` options at construction time."""
    socket_mode(conf.vhost_socket_mode)
    _check_account('vhost_socket_owner', conf.vhost_socket_owner,
                   pwd.getpwnam)
    _check_account('vhost_socket_group', conf.vhost_socket_group,
                   grp.getgrnam)
    if conf.host_nqn and not is_nqn(conf.host_nqn):
        raise _conf_error('host_nqn', conf.host_nqn,
                          'is not an NVMe Qualified Name')
    if conf.spdk_rpc_address is not None and conf.spdk_rpc_port is None:
        raise _conf_error('spdk_rpc_port', None,
                          'is required with spdk_rpc_address')
    if conf.spdk_rpc_address is None:
        _check_abs_path('spdk_rpc_socket', conf.spdk_rpc_socket)
    _check_abs_path('sysfs_root', conf.sysfs_root)
    problem = saved_config.path_problem(conf.spdk_saved_config)
    if problem:
        raise _conf_error('spdk_saved_config', conf.spdk_saved_config,
                          problem)
    _check_nvme_timeouts(conf)


#: The option that sets each reconnect setting.
NVME_OPTIONS = {reconnect.LOSS: 'nvme_ctrlr_loss_timeout_sec',
                reconnect.DELAY: 'nvme_reconnect_delay_sec',
                reconnect.FAST_FAIL: 'nvme_fast_io_fail_timeout_sec'}


# Settings already warned about: once per process, not per attachment.
_WARNED = set()


def _check_nvme_timeouts(conf):
    """SPDK's own rules for the three, else every remote attach fails.

    A combination that SPDK accepts but that would not ride out a
    storage target upgrade of the default window only gets a warning:
    the upgrade command refuses such a host, naming it.
    """
    settings = reconnect.from_conf(conf)
    try:
        reconnect.check(settings, NVME_OPTIONS)
    except reconnect.Invalid as err:
        field = err.field
        raise _conf_error(NVME_OPTIONS[field], settings[field],
                          str(err)) from None
    window = reconnect.window()
    short = reconnect.shortfall(settings, window)
    key = tuple(sorted(settings.items()))
    if short and key not in _WARNED:
        _WARNED.add(key)
        LOG.warning('[spdk_vhost] nvme_* reconnect settings do not ride '
                    'out a storage target upgrade (%(window)d s with '
                    'spdk-vhost-upgrade\'s default --timeout): %(short)s. '
                    'Guests of remote volumes would see I/O errors, and '
                    'the command refuses to upgrade a target this host '
                    'is connected to.', {'window': window, 'short': short})


def _check_abs_path(option, path):
    if (not isinstance(path, str) or not os.path.isabs(path)
            or '..' in path.split(os.sep) or '\0' in path):
        raise _conf_error(option, path, 'must be an absolute path without '
                          '".." parts')


def warn_if_world_writable(path, option='spdk_rpc_socket'):
    """Log a warning when any local user could drive the SPDK target.

    The SPDK JSON-RPC server has no authentication: whoever can connect
    to its socket can read and destroy every volume. Returns whether a
    warning was logged (the socket may not exist yet: no warning).
    """
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    if mode & stat.S_IWOTH:
        LOG.warning('The SPDK RPC socket %(path)s (%(option)s) is '
                    'world-writable (mode %(mode)04o): any local user can '
                    'control the SPDK target and every volume on it. '
                    'Restrict it (spdk_tgt runs as root; chmod 0660 and '
                    'a group for the OpenStack services).',
                    {'path': path, 'option': option,
                     'mode': stat.S_IMODE(mode)})
        return True
    return False
