"""Checks of the connection properties and names, before any RPC is sent.

``connection_info`` comes from Cinder over the message bus; it ends up
in SPDK object names, in paths of Unix sockets a privileged helper
chowns, and in NVMe-oF handshakes. A malformed value must be refused
here, naming the key, rather than reach SPDK (which answers with a
generic -32602, or worse, accepts it).

Only :class:`~spdk_vhost_core.exception.InvalidProperties` comes out of
this module.
"""

import ipaddress
import os
import re
import stat

from oslo_log import log

from spdk_vhost_core import exception
from spdk_vhost_core import nvme_auth
from spdk_vhost_core import replicas

LOG = log.getLogger(__name__)

LOCAL = 'local'
REMOTE_TRANSPORTS = ('tcp', 'rdma')
TRANSPORTS = (LOCAL,) + REMOTE_TRANSPORTS + (replicas.REPLICATED,)

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
    return exception.InvalidProperties(
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
        raise exception.InvalidProperties(
            reason='%s: %s' % (key, err)) from err


def _check_export(props):
    """The keys of one NVMe-oF export: a remote volume's, or a replica's."""
    _check_remote(props)
    _check_secret(props, 'dhchap_key')
    _check_secret(props, 'dhchap_ctrlr_key')
    if props.get('dhchap_ctrlr_key') and not props.get('dhchap_key'):
        raise _bad('dhchap_ctrlr_key', '***', 'needs a dhchap_key: '
                   'the controller authenticates only to a host that '
                   'authenticates itself')


def check_properties(props, volume_id_pattern):
    """Refuse malformed ``connection_properties``, naming the key.

    ``volume_id_pattern`` is the connector's own (the controller and its
    socket are named from the volume id).
    """
    if not isinstance(props, dict):
        raise exception.InvalidProperties(
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
    elif transport == replicas.REPLICATED:
        replicas.check(props, _check_export, REMOTE_TRANSPORTS)
    else:
        _check_export(props)
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
