"""Bring back the remote attachments a restarted target could not replay.

A compute target restarted while a storage node is down starts without
that node's volumes (:mod:`spdk_vhost_core.unreplayed`): their guests'
QEMU keeps trying the missing vhost socket, and the saved config keeps
their entries. Once the node answers again, :func:`restore` replays
them as the target's start would have: the NVMe-oF controller, its
namespace's QoS limits, then the vhost-blk controller, whose socket
QEMU then reconnects to. The guest saw a stall, not a lost disk.

``spdk-vhost-replicas watch`` calls it every round. Each controller is
restored under the connector's lock (:mod:`host_lock`) and the saved
config's lock, from the file read again under them, so a detach of the
same volume either came first (the entry is gone: nothing is done) or
comes after.
"""

from oslo_log import log

from os_brick_connector import host_lock
from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import saved_config
from spdk_vhost_core import unreplayed

LOG = log.getLogger(__name__)


def _missing(client, saver):
    """The saved chains whose controller the target lacks."""
    chains = unreplayed.chains(saver.read())
    if not chains:
        return []
    live = {c['ctrlr'] for c in client.vhost_get_controllers()}
    return [chain for chain in chains if chain.controller not in live]


def waiting(client, path):
    """Names of the saved controllers the target lacks."""
    if not path:
        return []
    saver = saved_config.ConfigSaver(client, path)
    return [chain.controller for chain in _missing(client, saver)]


def restore(client, path, lock_path=None):
    """Replay each saved controller the target lacks.

    Returns ``{controller: None}`` for each one restored and
    ``{controller: why}`` for each one that still waits (its storage
    node does not answer yet: tried again next call). ``path``: the
    saved config (``spdk_saved_config``); nothing is done without one.
    """
    outcome = {}
    for name in waiting(client, path):
        with host_lock.held(lock_path):
            with saved_config.file_lock(path):
                outcome[name] = _restore_one(
                    client, saved_config.ConfigSaver(client, path), name)
    return outcome


def _attached(client, attach):
    try:
        client.bdev_nvme_get_controllers(name=attach['params']['name'])
    except spdk_exc.NotFound:
        return False
    return True


def _restore_one(client, saver, name):
    """Restore controller ``name`` if it is still saved and missing."""
    chain = next((c for c in _missing(client, saver)
                  if c.controller == name), None)
    if chain is None:
        return None  # detached, or restored, meanwhile
    attach = chain.attach['params']
    if not _attached(client, chain.attach):
        try:
            client.call(unreplayed.ATTACH, attach)
        except spdk_exc.SpdkRpcError as err:
            why = ('its NVMe-oF subsystem %s at %s:%s does not answer: %s'
                   % (attach.get('subnqn'), attach.get('traddr'),
                      attach.get('trsvcid'), err))
            LOG.debug('vhost-blk controller %s waits: %s', name, why)
            return why
    for entry in chain.qos + chain.vhost:
        client.call(entry['method'], entry.get('params'))
    LOG.info('vhost-blk controller %s restored from the saved config: '
             'its storage node %s answers again', name, attach.get('traddr'))
    return None
