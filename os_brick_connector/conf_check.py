"""Checks of the connector's ``[spdk_vhost]`` options, at start.

The options come from an operator's file and end up in paths a
privileged helper chowns and in every NVMe-oF attachment: an unusable
one is refused when the connector (or nova-compute) starts, naming the
option, rather than at the first attach. Only
:class:`connector_errors.InvalidConnectorConfig` comes out of here.
"""

import grp
import os
import pwd
import stat

from oslo_log import log

from os_brick_connector import connector_errors as errors
from spdk_vhost_core import reconnect
from spdk_vhost_core import saved_config
from spdk_vhost_core import validation

LOG = log.getLogger(__name__)


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
    if conf.host_nqn and not validation.is_nqn(conf.host_nqn):
        raise _conf_error('host_nqn', conf.host_nqn,
                          'is not an NVMe Qualified Name')
    if conf.spdk_rpc_address is not None and conf.spdk_rpc_port is None:
        raise _conf_error('spdk_rpc_port', None,
                          'is required with spdk_rpc_address')
    if conf.spdk_rpc_address is None:
        _check_abs_path('spdk_rpc_socket', conf.spdk_rpc_socket)
    problem = saved_config.path_problem(conf.spdk_saved_config)
    if problem:
        raise _conf_error('spdk_saved_config', conf.spdk_saved_config,
                          problem)
    _check_nvme_timeouts(conf)


#: The option that sets each reconnect setting.
NVME_OPTIONS = {reconnect.LOSS: 'nvme_ctrlr_loss_timeout_sec',
                reconnect.DELAY: 'nvme_reconnect_delay_sec',
                reconnect.FAST_FAIL: 'nvme_fast_io_fail_timeout_sec'}


#: The option that sets each reconnect setting of a replica's attach.
REPLICA_OPTIONS = {
    reconnect.LOSS: 'nvme_replica_ctrlr_loss_timeout_sec',
    reconnect.DELAY: 'nvme_replica_reconnect_delay_sec',
    reconnect.FAST_FAIL: 'nvme_replica_fast_io_fail_timeout_sec'}


def replica_settings(conf):
    """The reconnect settings a replica of a replicated volume gets."""
    return {field: getattr(conf, option)
            for field, option in REPLICA_OPTIONS.items()}


def _check_settings(settings, names):
    """SPDK's rules; the option to change named in the error."""
    try:
        reconnect.check(settings, names)
    except reconnect.Invalid as err:
        field = err.field
        raise _conf_error(names[field], settings[field], str(err)) from None


# Settings already warned about: once per process, not per attachment.
_WARNED = set()


def _check_nvme_timeouts(conf):
    """SPDK's own rules for the three, else every remote attach fails.

    A combination that SPDK accepts but that would not ride out a
    storage target upgrade of the default window only gets a warning:
    the upgrade command refuses such a host, naming it.
    """
    settings = reconnect.from_conf(conf)
    _check_settings(settings, NVME_OPTIONS)
    # The replicas' own: no upgrade to ride out, they fail over instead.
    _check_settings(replica_settings(conf), REPLICA_OPTIONS)
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
