"""Bring back the remote attachments a restarted target could not replay.

A compute target restarted while a storage node is down starts without
that node's copies (:mod:`spdk_vhost_core.unreplayed`), and the saved
config keeps their entries. A single-copy volume on it lacks its
vhost-blk controller: its guest's QEMU keeps trying the socket. A
replicated volume runs degraded on its other copies, or, when their
superblocks still count the lost one in sync, waits for it unassembled.
Once the node answers again, :func:`restore` replays what is missing as
the target's start would have: the NVMe-oF controllers, then (examine
assembles a mirror) the QoS limits and the vhost-blk controller, whose
socket QEMU then reconnects to. The guest saw a stall, not a lost disk;
a member back in a degraded mirror is rebuilt by the watcher's repair.

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


def _pending(client, saver):
    """``[(chain, its NVMe attaches missing)]`` the target lacks part of.

    A mirror whose vhost controller runs misses a member only while the
    mirror lacks one: a member replaced on purpose is not brought back.
    """
    chains = unreplayed.chains(saver.read())
    if not chains:
        return []
    live = {c['ctrlr'] for c in client.vhost_get_controllers()}
    attached = {c['name'] for c in client.bdev_nvme_get_controllers()}
    found = []
    for chain in chains:
        missing = [a for a in chain.attaches
                   if unreplayed.name_of(a) not in attached]
        if chain.controller not in live:
            found.append((chain, missing))
        elif missing and chain.mirror and unreplayed.mirror_incomplete(
                client, chain.mirror):
            found.append((chain, missing))
    return found


def waiting(client, path):
    """Names of the saved controllers the target lacks part of."""
    if not path:
        return []
    saver = saved_config.ConfigSaver(client, path)
    return [chain.controller for chain, _missing in _pending(client, saver)]


def restore(client, path, lock_path=None):
    """Replay what the target lacks of each saved controller.

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


def _attach(client, attach):
    """Attach one saved NVMe controller; why it failed, or None."""
    params = attach['params']
    try:
        client.call(unreplayed.ATTACH, params)
    except spdk_exc.SpdkRpcError as err:
        return ('its NVMe-oF subsystem %s at %s:%s does not answer: %s'
                % (params.get('subnqn'), params.get('traddr'),
                   params.get('trsvcid'), err))
    return None


def _exposed(client, chain):
    """Whether the bdev the controller exposes is there to expose."""
    try:
        client.bdev_get_bdevs(name=chain.bdev)
    except spdk_exc.NotFound:
        return False
    return True


def _restore_one(client, saver, name):
    """Restore what controller ``name`` lacks, if it still does."""
    found = [(chain, missing) for chain, missing in _pending(client, saver)
             if chain.controller == name]
    if not found:
        return None  # detached, or restored, meanwhile
    [(chain, missing)] = found
    why = [reason for reason in (_attach(client, a) for a in missing)
           if reason]
    if chain.mirror:
        # Examine assembles the mirror from its members' superblocks.
        client.bdev_wait_for_examine()
    if client.vhost_controller(name) is None:
        if not _exposed(client, chain):
            why.append('its bdev %s is not there yet' % chain.bdev)
        else:
            for entry in chain.qos + chain.vhost:
                client.call(entry['method'], entry.get('params'))
    if why:
        LOG.debug('vhost-blk controller %s waits: %s', name, '; '.join(why))
        return '; '.join(why)
    LOG.info('vhost-blk controller %s restored from the saved config: '
             'its storage nodes answer again', name)
    return None
