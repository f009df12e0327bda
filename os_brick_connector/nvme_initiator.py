"""The NVMe-oF leg of an attachment: the compute target's bdev_nvme.

One SPDK NVMe controller per volume, named after the volume id, so a
retried connect finds it. Its namespace ``ns_id`` is the bdev
``<volume id>n<ns_id>`` that the vhost-blk controller exposes, and whose
name the guest reads as its disk serial (see :mod:`volume_bdev`): Nova's
``/dev/disk/by-id/virtio-<first 20 characters of the volume id>``. The
NVMe controller is detached only when no vhost-blk controller uses any of
its bdevs any more.

Releases before this one named the controller ``spdkvhost<hash of the
subsystem>``. An attachment made then keeps its controller until it is
detached, which finds the controller through the bdev its vhost
controller uses (:func:`owner`), never by recomputing a name; and SPDK
admits one controller per subsystem and host NQN, so an unused one left
over under any name is detached before the volume is attached again.

A ``dhchap_key`` in the properties (Cinder's ``spdk_nvmf_auth = dhchap``)
is written to ``nvme_key_dir`` and registered in SPDK's keyring under the
controller's name; the attach names that key, and the detach removes it.
A ``dhchap_ctrlr_key`` beside it is kept the same way, so the host also
checks that the subsystem is the one Cinder exported (bidirectional).
"""

from oslo_log import log

from os_brick_connector import connector_errors as errors
from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import nvme_auth
from spdk_vhost_core import unreplayed

LOG = log.getLogger(__name__)

# What SPDK v26.05 means by -95 on bdev_nvme_attach_controller over TCP.
INTERRUPT_MODE_REASON = (
    'SPDK\'s NVMe-oF initiator only runs on polling reactors and this '
    'target runs in interrupt mode; run the compute host\'s vhost (or '
    'spdk_tgt) without --interrupt-mode to attach remote volumes')


def controller_name(props):
    """The NVMe controller of a volume: its namespaces carry the volume id.

    A valid volume id (see ``connector.controller_name``) is a valid SPDK
    controller and keyring name.
    """
    return props['volume_id']


def namespace_bdev(name, ns_id):
    return '%sn%d' % (name, int(ns_id))


#: The NVMe controller name namespace bdev ``bdev`` would belong to.
owner = unreplayed.namespace_owner


def owns_bdev(name, bdev):
    """Whether ``bdev`` is one of NVMe controller ``name``'s namespaces."""
    return owner(bdev) == name


def _bdevs_in_use(controllers):
    return [ctrl.get('backend_specific', {}).get('block', {}).get('bdev')
            for ctrl in controllers]


def _find(client, name):
    try:
        return client.bdev_nvme_get_controllers(name=name)[0]
    except spdk_exc.NotFound:
        return None


def _same_subsystem(found, props):
    trid = found['ctrlrs'][0]['trid']
    return (trid.get('subnqn') == props['nqn']
            and trid.get('traddr') == props['traddr'])


def _check_same_subsystem(found, name, props):
    if not _same_subsystem(found, props):
        trid = found['ctrlrs'][0]['trid']
        raise errors.NvmeConflict(
            name=name, found='%s@%s' % (trid.get('subnqn'),
                                        trid.get('traddr')),
            wanted='%s@%s' % (props['nqn'], props['traddr']))


def serves(client, props, bdev):
    """Whether ``bdev`` is props' namespace, from an attachment of its own.

    True for the bdev an older release's controller name gave it, too.
    """
    name = owner(bdev)
    if not name or bdev != namespace_bdev(name, props.get('ns_id', 1)):
        return False
    found = _find(client, name)
    return found is not None and _same_subsystem(found, props)


# Connection property -> the keyring name's suffix for its secret.
_SECRETS = (('dhchap_key', ''), ('dhchap_ctrlr_key', '-ctrlr'))


def _keys(client, props, conf, name):
    """Register the properties' DH-HMAC-CHAP secrets; their key names.

    ``{'dhchap_key': <name or None>, 'dhchap_ctrlr_key': ...}``, the
    attach's parameters. Their form was checked with the other properties
    (validation), before any RPC.
    """
    keys = dict.fromkeys(key for key, _suffix in _SECRETS)
    if props.get('dhchap_key') is None:
        return keys
    if not conf.nvme_key_dir:
        raise errors.InvalidConnectorConfig(
            option='nvme_key_dir', value=None,
            reason='required for volumes with DH-HMAC-CHAP authentication')
    try:
        for key, suffix in _SECRETS:
            if props.get(key) is not None:
                keys[key] = nvme_auth.key_name(name + suffix)
                nvme_auth.register(client, conf.nvme_key_dir, keys[key],
                                   props[key])
    except Exception:
        _forget_keys(client, props, conf, name)
        raise
    return keys


def _forget_keys(client, props, conf, name, every=False):
    """Unregister the secrets props brought (``every``: whatever exists).

    A detach forgets every secret of the controller: the attachment
    detached last may not be the one that brought them (a second guest
    of a multiattach volume reuses the controller, and Cinder gives it no
    new secret).
    """
    if conf.nvme_key_dir:
        for key, suffix in _SECRETS:
            key_name = nvme_auth.key_name(name + suffix)
            if props.get(key) is not None or (
                    every and nvme_auth.has_key(conf.nvme_key_dir,
                                                key_name)):
                nvme_auth.unregister(client, conf.nvme_key_dir, key_name)


def _attach(client, props, conf, name):
    """Attach controller ``name``; False if SPDK already has one there.

    "Already" is either ``name`` itself or another controller on the same
    subsystem, address and host NQN (SPDK answers both with EEXIST).
    """
    keys = _keys(client, props, conf, name)
    try:
        client.bdev_nvme_attach_controller(
            name=name, trtype=props['transport'],
            traddr=props['traddr'], subnqn=props['nqn'],
            trsvcid=props.get('trsvcid'), adrfam=props.get('adrfam'),
            hostnqn=props.get('host_nqn'),
            ctrlr_loss_timeout_sec=conf.nvme_ctrlr_loss_timeout_sec,
            reconnect_delay_sec=conf.nvme_reconnect_delay_sec,
            fast_io_fail_timeout_sec=conf.nvme_fast_io_fail_timeout_sec,
            **keys)
    except spdk_exc.AlreadyExists:
        return False
    except spdk_exc.SpdkTransportError:
        raise   # may be attached: the caller's detach removes the key
    except spdk_exc.NotSupported as err:
        _forget_keys(client, props, conf, name)
        raise errors.RemoteAttachUnsupported(
            transport=props['transport'], reason=INTERRUPT_MODE_REASON
        ) from err
    except Exception:
        _forget_keys(client, props, conf, name)
        raise
    return True


def _same_path(found, props):
    """Whether NVMe controller ``found`` holds the path props would use."""
    ctrlr = found['ctrlrs'][0]
    return (_same_subsystem(found, props)
            and str(ctrlr['trid'].get('trsvcid')) == str(props.get('trsvcid'))
            and (not props.get('host_nqn')
                 or ctrlr.get('host', {}).get('nqn') == props['host_nqn']))


def _free_path(client, props, conf):
    """Detach unused controllers holding props' path under another name.

    An older release's controller (see the module's doc) whose detach did
    not finish. One a vhost-blk controller uses is a conflict.
    """
    for found in client.bdev_nvme_get_controllers():
        if not _same_path(found, props):
            continue
        in_use = [bdev for bdev in
                  _bdevs_in_use(client.vhost_get_controllers())
                  if owns_bdev(found['name'], bdev)]
        if in_use:
            raise errors.NvmePathInUse(nqn=props['nqn'], name=found['name'],
                                       users=', '.join(in_use))
        LOG.warning('Detaching NVMe controller %(name)s: an unused '
                    'attachment of subsystem %(nqn)s left behind',
                    {'name': found['name'], 'nqn': props['nqn']})
        _detach(client, props, conf, found['name'])


def attach(client, props, conf):
    """Attach the volume's subsystem; return (bdev name, newly attached).

    ``newly attached`` tells the caller whether undoing a failed connect
    must detach it again.
    """
    name = controller_name(props)
    found = _find(client, name)
    created = False
    if found is None:
        created = _attach(client, props, conf, name)
        found = None if created else _find(client, name)
        if not created and found is None:
            # The path is held under another name: free it, once.
            _forget_keys(client, props, conf, name)
            _free_path(client, props, conf)
            created = _attach(client, props, conf, name)
            found = None if created else _find(client, name)
            if not created and found is None:
                _forget_keys(client, props, conf, name)
                raise errors.NvmePathInUse(nqn=props['nqn'], name='unknown',
                                           users='unknown')
    if found is not None:
        _check_same_subsystem(found, name, props)
    return namespace_bdev(name, props.get('ns_id', 1)), created


def _detach(client, props, conf, name):
    try:
        client.bdev_nvme_detach_controller(name)
    except spdk_exc.NotFound:
        return False
    finally:
        if conf is not None:
            _forget_keys(client, props, conf, name, every=True)
    return True


def detach_if_unused(client, props, controllers, conf=None, bdev=None):
    """Detach the volume's NVMe controller if no vhost-blk uses it.

    ``controllers`` is vhost_get_controllers' answer after this volume's
    controller went away; ``bdev`` is the bdev that controller used, whose
    NVMe controller is the one to detach (it may carry an older release's
    name), else the one :func:`controller_name` gives. A controller
    attached to another subsystem is never detached. Returns whether it
    was detached; its DH-HMAC-CHAP key (``conf`` given) goes with it.
    """
    name = owner(bdev) or controller_name(props)
    if any(owns_bdev(name, used) for used in _bdevs_in_use(controllers)):
        return False
    if name != controller_name(props):
        found = _find(client, name)
        if found is None or not _same_subsystem(found, props):
            return False
    return _detach(client, props, conf, name)
