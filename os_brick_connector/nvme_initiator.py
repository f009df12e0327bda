"""The NVMe-oF leg of an attachment: the compute target's bdev_nvme.

One SPDK NVMe controller per remote subsystem and address, named from
them, so a retried connect finds it and two volumes in one subsystem
share it. Its namespace ``ns_id`` is the bdev ``<name>n<ns_id>`` that the
vhost-blk controller exposes. The NVMe controller is detached only when no
vhost-blk controller uses any of its bdevs any more.

A ``dhchap_key`` in the properties (Cinder's ``spdk_nvmf_auth = dhchap``)
is written to ``nvme_key_dir`` and registered in SPDK's keyring under the
controller's name; the attach names that key, and the detach removes it.
A ``dhchap_ctrlr_key`` beside it is kept the same way, so the host also
checks that the subsystem is the one Cinder exported (bidirectional).
"""

import hashlib

from os_brick_connector import connector_errors as errors
from os_brick_connector import exception as spdk_exc
from os_brick_connector import nvme_auth

NAME_PREFIX = 'spdkvhost'
# What SPDK v26.05 means by -95 on bdev_nvme_attach_controller over TCP.
INTERRUPT_MODE_REASON = (
    'SPDK\'s NVMe-oF initiator only runs on polling reactors and this '
    'target runs in interrupt mode; run the compute host\'s vhost (or '
    'spdk_tgt) without --interrupt-mode to attach remote volumes')


def controller_name(props):
    """A stable, SPDK-safe NVMe controller name for a remote subsystem."""
    key = '|'.join(str(props.get(k, '')) for k in (
        'transport', 'traddr', 'trsvcid', 'nqn', 'host_nqn'))
    return NAME_PREFIX + hashlib.sha256(key.encode()).hexdigest()[:16]


def namespace_bdev(name, ns_id):
    return '%sn%d' % (name, int(ns_id))


def owns_bdev(name, bdev):
    """Whether ``bdev`` is one of NVMe controller ``name``'s namespaces."""
    if not bdev or not bdev.startswith(name + 'n'):
        return False
    return bdev[len(name) + 1:].isdigit()


def _find(client, name):
    try:
        return client.bdev_nvme_get_controllers(name=name)[0]
    except spdk_exc.NotFound:
        return None


def _check_same_subsystem(found, name, props):
    trid = found['ctrlrs'][0]['trid']
    if (trid.get('subnqn') != props['nqn']
            or trid.get('traddr') != props['traddr']):
        raise errors.NvmeConflict(
            name=name, found='%s@%s' % (trid.get('subnqn'),
                                        trid.get('traddr')),
            wanted='%s@%s' % (props['nqn'], props['traddr']))


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


def _forget_keys(client, props, conf, name):
    if conf.nvme_key_dir:
        for key, suffix in _SECRETS:
            if props.get(key) is not None:
                nvme_auth.unregister(client, conf.nvme_key_dir,
                                     nvme_auth.key_name(name + suffix))


def attach(client, props, conf):
    """Attach the volume's subsystem; return (bdev name, newly attached).

    ``newly attached`` tells the caller whether undoing a failed connect
    must detach it again.
    """
    name = controller_name(props)
    found = _find(client, name)
    created = False
    if found is None:
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
            created = True
        except spdk_exc.AlreadyExists:
            found = _find(client, name)
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
    if found is not None:
        _check_same_subsystem(found, name, props)
    return namespace_bdev(name, props.get('ns_id', 1)), created


def detach_if_unused(client, props, controllers, conf=None):
    """Detach the subsystem's NVMe controller if no vhost-blk uses it.

    ``controllers`` is vhost_get_controllers' answer after this volume's
    controller went away. Returns whether it was detached; its
    DH-HMAC-CHAP key (``conf`` given) goes with it.
    """
    name = controller_name(props)
    for ctrl in controllers:
        bdev = ctrl.get('backend_specific', {}).get('block', {}).get('bdev')
        if owns_bdev(name, bdev):
            return False
    try:
        client.bdev_nvme_detach_controller(name)
    except spdk_exc.NotFound:
        return False
    finally:
        if conf is not None:
            _forget_keys(client, props, conf, name)
    return True
