"""What this backend needs of its SPDK target, by configuration.

Which SPDK application serves a storage host is the operator's choice
(see the admin guide's page on SPDK applications): ``nvmf_tgt`` on a
storage-only host (it can sleep in interrupt mode), ``spdk_tgt`` or
``vhost`` on a hyperconverged one. So an RPC is required only where the
configuration uses it, and a target that lacks one is refused at start
with the application that has it.
"""

from cinder import exception

from cinder_spdk_vhost import errors
from spdk_vhost_core import exception as rpc_exc
from spdk_vhost_core import node_state
from spdk_vhost_core import spdk_version

# Lvols, snapshots, clones, QoS and moves between pools (a shallow copy
# from lvol to lvol): every SPDK application has them.
LVOL = frozenset((
    'rpc_get_methods', 'bdev_get_bdevs', 'bdev_set_qos_limit',
    'bdev_lvol_get_lvstores', 'bdev_lvol_get_lvols', 'bdev_lvol_create',
    'bdev_lvol_delete',
    'bdev_lvol_resize', 'bdev_lvol_snapshot', 'bdev_lvol_clone',
    'bdev_lvol_rename', 'bdev_lvol_decouple_parent', 'bdev_lvol_inflate',
    'bdev_lvol_set_read_only', 'bdev_lvol_start_shallow_copy',
    'bdev_lvol_check_shallow_copy'))
# Image export: a shallow copy into a file staged on the target's host,
# so only for a target on this host (not one behind its node's agent).
STAGING = frozenset(('bdev_aio_create', 'bdev_aio_delete'))
# Exports to other hosts, image import and QoS changes on idle volumes.
NVMF = frozenset((
    'nvmf_create_transport', 'nvmf_create_subsystem',
    'nvmf_delete_subsystem', 'nvmf_get_subsystems', 'nvmf_subsystem_add_ns',
    'nvmf_subsystem_add_listener', 'nvmf_subsystem_add_host',
    'nvmf_subsystem_remove_host'))
# spdk_nvmf_auth = dhchap: the keyring holds each attachment's secret,
# from a key file written on the target's host: by this service, or by
# the node's agent (node_state).
AUTH = frozenset(('keyring_file_add_key', 'keyring_file_remove_key'))
AGENT_AUTH = frozenset((node_state.KEY_ADD, node_state.KEY_REMOVE))
# Not required: a target without it (nvmf_tgt) has no vhost controller
# that could hold a volume.
VHOST_LIST = 'vhost_get_controllers'

_NEEDS = (
    (LVOL, 'SPDK v26.01 or newer with the lvol module'),
    (STAGING, 'the aio bdev module and lvol shallow copies'),
    (NVMF, 'an NVMe-oF target (nvmf_* RPCs), which spdk_nvmf_transport = '
           '%(transport)s uses: run nvmf_tgt (storage-only host) or '
           'spdk_tgt (hyperconverged host), not vhost; or set '
           'spdk_nvmf_transport = none to serve local attachments only'),
    (AUTH, 'the keyring module, which spdk_nvmf_auth = dhchap uses'),
    (AGENT_AUTH, 'an spdk-vhost-agent that writes DH-HMAC-CHAP keys, '
                 'which spdk_nvmf_auth = dhchap uses'),
)


def exports(conf):
    """Whether the backend exports volumes over NVMe-oF at all."""
    return conf.spdk_nvmf_transport != 'none'


def required(conf):
    """The RPC groups this configuration uses, with why each is needed."""
    lvol, staging, nvmf, auth, agent_auth = _NEEDS
    agent = bool(conf.spdk_agent_url)
    groups = [lvol] if agent else [lvol, staging]
    if exports(conf):
        groups.append(nvmf)
        if conf.spdk_nvmf_auth != 'none':
            groups.append(agent_auth if agent else auth)
    return groups


def missing(conf, methods):
    """None, or why a target offering ``methods`` cannot serve ``conf``."""
    reasons = []
    for group, need in required(conf):
        lacking = sorted(group - set(methods))
        if lacking:
            reasons.append('%s (lacks %s)' % (
                need % {'transport': conf.spdk_nvmf_transport},
                ', '.join(lacking)))
    return '; '.join(reasons) or None


def _refuse(message, cause):
    raise exception.VolumeDriverException(message=message) from cause


def check_target(client, conf):
    """The target's RPC methods; raise if it cannot serve ``conf``.

    It must answer, offer every RPC the configuration uses, run a
    supported SPDK release and hold every configured lvol store.
    """
    try:
        methods = set(client.rpc_get_methods())
    except rpc_exc.SpdkTransportError as err:
        _refuse('SPDK target %s is unreachable: %s' % (client.target, err),
                err)
    except rpc_exc.SpdkRpcError as err:
        _refuse('SPDK target %s refused rpc_get_methods: %s'
                % (client.target, err), err)
    lacking = missing(conf, methods)
    if lacking:
        _refuse('SPDK target %s cannot serve this backend: it needs %s'
                % (client.target, lacking), None)
    try:
        spdk_version.check(client)
    except (rpc_exc.UnsupportedSpdkVersion, rpc_exc.SpdkRpcError) as err:
        _refuse(str(err), err)
    with errors.translated('checking the lvol stores'):
        for lvs in conf.spdk_lvstores:
            try:
                client.bdev_lvol_get_lvstores(lvs_name=lvs)
            except rpc_exc.NotFound as err:
                _refuse('lvol store %s (spdk_lvstores) not found on SPDK '
                        'target %s' % (lvs, client.target), err)
    return methods
