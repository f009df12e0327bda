"""Checks of the driver's options and inputs, before any RPC is sent.

Cinder's records and the compute host's connector end up in SPDK object
names (lvols, NQNs); a malformed one must be refused with a Cinder
exception naming it, not turned into a half-made object or a generic
SPDK -32602. The exceptions: ``InvalidConfigurationValue`` (options, at
``do_setup``), ``InvalidInput`` (volume names and sizes) and
``InvalidConnectorException`` (connector properties).
"""

import ipaddress
import os
import re
import shutil
from urllib import parse as urlparse

from cinder import exception
from oslo_config import cfg
from oslo_log import log

from spdk_vhost_core import options as rpc_options
from spdk_vhost_core import saved_config
from spdk_vhost_core import validation as brick_validation

LOG = log.getLogger(__name__)

# SPDK lvol and lvol store names: at most 63 bytes (SPDK_LVOL_NAME_MAX
# minus the NUL); ours are also never paths.
_NAME = re.compile(r'^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$')
# 1 PiB: far above any real lvstore, far below what overflows SPDK's
# size_in_mib arithmetic; anything bigger is a typo or an attack.
MAX_SIZE_GB = 1024 * 1024
TARGET_ID_MAX = 255
#: tooz backends whose locks only one host's processes see.
_HOST_LOCAL_LOCKS = ('file', 'ipc')


def _bad_option(option, value, why):
    return exception.InvalidConfigurationValue(
        option=option, value='%r (%s)' % (value, why))


def is_name(value):
    return isinstance(value, str) and bool(_NAME.fullmatch(value))


def check_cluster(conf, cluster):
    """Refuse a cluster whose members could not share the target safely.

    They reach it through its node's agent, and take each volume's lock
    through a lock service they all see: ``file://`` locks are one
    host's, so two members on two controllers would change one lvol at
    once.
    """
    if not conf.spdk_agent_url:
        raise _bad_option('spdk_agent_url', None,
                          'required in cluster %s: every member reaches '
                          'the target through its node\'s agent' % cluster)
    cfg.CONF.import_opt('backend_url', 'cinder.coordination',
                        group='coordination')
    lock_url = cfg.CONF.coordination.backend_url
    if urlparse.urlsplit(lock_url).scheme in _HOST_LOCAL_LOCKS:
        raise _bad_option('[coordination] backend_url', lock_url,
                          'cluster %s needs a lock service every member '
                          'shares, such as etcd (etcd3+http://...)'
                          % cluster)


def check_config(conf, cluster=None):
    """Refuse unusable backend options, naming the option.

    ``cluster``: cinder-volume's ``[DEFAULT] cluster`` (backend-wide
    name), whose members run on several hosts: one on the target's
    host would write the target's files where the others cannot.
    """
    if cluster:
        check_cluster(conf, cluster)
    if not conf.spdk_lvstores:
        raise _bad_option('spdk_lvstores', conf.spdk_lvstores,
                          'at least one lvol store is needed')
    for lvs in conf.spdk_lvstores:
        if not is_name(lvs):
            raise _bad_option('spdk_lvstores', lvs,
                              'not an SPDK lvol store name')
    prefix = conf.spdk_nvmf_nqn_prefix
    sample = '%s:volume-%s' % (prefix, '0' * 36)
    if not brick_validation.is_nqn(sample):
        raise _bad_option('spdk_nvmf_nqn_prefix', prefix,
                          'NQNs made from it are not valid NVMe Qualified '
                          'Names of at most %d bytes'
                          % brick_validation.NQN_MAX)
    try:
        ipaddress.ip_address(conf.spdk_nvmf_address)
    except ValueError as err:
        raise _bad_option('spdk_nvmf_address', conf.spdk_nvmf_address,
                          'SPDK listens on IP addresses only') from err
    target_id = conf.spdk_target_id
    if target_id is not None and (
            not target_id or len(target_id) > TARGET_ID_MAX or
            not target_id.isprintable() or ' ' in target_id):
        raise _bad_option('spdk_target_id', target_id,
                          'must be 1-%d printable characters without '
                          'spaces' % TARGET_ID_MAX)
    if conf.spdk_rpc_address is not None and conf.spdk_rpc_port is None:
        raise _bad_option('spdk_rpc_port', None,
                          'required with spdk_rpc_address')
    if conf.spdk_agent_url:
        _check_agent(conf)
        return
    if conf.spdk_nvmf_auth == 'dhchap' and not conf.spdk_nvmf_key_dir:
        raise _bad_option('spdk_nvmf_key_dir', None,
                          'required with spdk_nvmf_auth=dhchap')
    for option in ('spdk_rpc_socket', 'spdk_image_staging_dir',
                   'spdk_nvmf_key_dir'):
        path = getattr(conf, option)
        if path is not None and (not os.path.isabs(path) or
                                 '..' in path.split(os.sep)):
            raise _bad_option(option, path, 'must be an absolute path '
                              'without ".." parts')
    problem = saved_config.path_problem(conf.spdk_saved_config)
    if problem:
        raise _bad_option('spdk_saved_config', conf.spdk_saved_config,
                          problem)


def warn_rebuild_room(conf):
    """Warn where own copies of replicated volumes may not rebuild.

    A rebuild writes every block of a copy. The copies on replica
    targets keep room for that (:meth:`peers.Peer.rooms`); the own
    copies are in the backend's pools, which Cinder's scheduler fills up
    to ``max_over_subscription_ratio`` times their size.
    """
    ratio = str(conf.max_over_subscription_ratio)
    try:
        over = float(ratio) > 1.0
    except ValueError:
        over = True  # 'auto': whatever the pool's use makes it
    if conf.spdk_replica_targets and conf.spdk_thin_provision and over:
        LOG.warning('max_over_subscription_ratio is %s: the pools of this '
                    'backend, which hold the own copies of replicated '
                    'volumes, may be over-subscribed, and a rebuild of '
                    'such a copy (which writes every block) may then not '
                    'fit; set it to 1.0 on a backend whose volume types '
                    'ask for copies', ratio)


def check_tools(conf):
    """Refuse a backend whose copies could not run here, naming why.

    The backend's own section only: every copy, to or from a peer too,
    runs its ``spdk_dd_path``; a replica target's section has none.
    """
    if conf.spdk_nvmf_transport != 'none' and not shutil.which(
            conf.spdk_dd_path):
        # Else images, backups and replica copies would fail one by one.
        raise _bad_option('spdk_dd_path', conf.spdk_dd_path,
                          'not an executable on this host: image, backup and '
                          'replica copies run it (tools/build-spdk.sh builds '
                          'it as build/bin/spdk_dd)')


def _check_agent(conf):
    """A target behind its node's agent: nothing of it is written here."""
    if not conf.spdk_agent_password:
        raise _bad_option('spdk_agent_password', None,
                          'required with spdk_agent_url')
    if conf.spdk_rpc_address is not None:
        raise _bad_option('spdk_rpc_address', conf.spdk_rpc_address,
                          'the target is reached through spdk_agent_url')
    for option, unset in (('spdk_saved_config', rpc_options.SAVED_CONFIG),
                          ('spdk_nvmf_key_dir', None)):
        value = getattr(conf, option)
        if value not in (unset, '', None):
            raise _bad_option(option, value, 'the agent of spdk_agent_url '
                              'writes it on the target\'s host: set it in '
                              'the agent\'s configuration, not here')
    path = conf.spdk_agent_ca_file
    if path is not None and not os.access(path, os.R_OK):
        raise _bad_option('spdk_agent_ca_file', path, 'not readable')


def check_size(size_gb, what='size'):
    if isinstance(size_gb, bool) or not isinstance(size_gb, int) or \
            not 1 <= size_gb <= MAX_SIZE_GB:
        raise exception.InvalidInput(
            reason='%s %r is not a whole number of GiB between 1 and %d'
                   % (what, size_gb, MAX_SIZE_GB))


def check_volume(volume):
    """The volume's lvol name and size, as SPDK will be asked for them."""
    if not is_name(volume.name):
        raise exception.InvalidInput(
            reason='volume name %r cannot name an SPDK lvol (at most 63 '
                   'of A-Z a-z 0-9 _ . -)' % (volume.name,))
    check_size(volume.size)


def _bad_connector(what):
    return exception.InvalidConnectorException(missing=what)


# Nova's SPDK driver always reports spdk_target_id, unless it could not
# read the host's identity (then it reports no SPDK key and logs why).
NO_SPDK_IDENTITY = (
    'spdk_target_id: the compute host reported no SPDK identity, so it '
    'cannot attach SPDK volumes. It must run nova-compute-spdk-vhost (in '
    'place of nova-compute) with compute_driver = '
    'spdk_vhost.LibvirtVhostUserDriver; if it does, its log says why the '
    'identity could not be read')


def check_connector(connector, need_nqn, need_target_id=False):
    """Refuse connector properties the driver cannot act on safely.

    ``connector`` is os-brick's dict; ``nqn`` must be a real NQN when the
    volume is exported over NVMe-oF (it is the only host admitted), and
    an attachment needs ``spdk_target_id`` (``need_target_id``): its
    absence is a host that cannot attach SPDK volumes at all, even if
    os-brick reported an ``nqn`` of its own.
    """
    if not isinstance(connector, dict):
        raise _bad_connector('a dict of connector properties (got %s)'
                             % type(connector).__name__)
    target_id = connector.get('spdk_target_id')
    if target_id is None and need_target_id:
        raise _bad_connector(NO_SPDK_IDENTITY)
    if target_id is not None and not isinstance(target_id, str):
        raise _bad_connector('a string spdk_target_id (got %r)'
                             % (target_id,))
    nqn = connector.get('nqn')
    if not nqn and not need_nqn:
        return
    if not nqn:
        raise _bad_connector('nqn')
    if not brick_validation.is_nqn(nqn):
        raise _bad_connector('a valid NVMe host nqn (got %.80r)' % (nqn,))
