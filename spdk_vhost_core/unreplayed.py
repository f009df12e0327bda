"""Saved-config entries a restarted target could not replay, kept.

A compute target that restarts while a storage node is down cannot
attach that node's volumes again: ``--json-ignore-init-errors`` lets it
start without their NVMe-oF controllers and the vhost-blk controllers
on them. Their guests' QEMU waits for the socket to come back (a stall,
not a lost disk), so those entries must outlive every save until the
node is back and the compute host replays them
(:mod:`os_brick_connector.restore`). A save that reads the ``bdev``
subsystem from the target would drop them: :func:`keep` puts them back.
A detach takes the controller's entry out of the file on purpose, and
with it the reason to keep the rest.

Such a *chain* is one vhost-blk controller over a namespace of an NVMe
controller attached by the saved config, with the QoS limits of that
namespace.
"""

import collections
import re

ATTACH = 'bdev_nvme_attach_controller'
CREATE = 'vhost_create_blk_controller'
QOS = 'bdev_set_qos_limit'
BDEV = 'bdev'
VHOST = 'vhost_blk'
_NAMESPACE = re.compile(r'^(?P<ctrlr>.+)n(?P<nsid>[0-9]+)$')


def namespace_owner(bdev):
    """The NVMe controller name namespace bdev ``bdev`` would belong to."""
    match = _NAMESPACE.match(bdev or '')
    return match.group('ctrlr') if match else None


Chain = collections.namedtuple('Chain', 'controller attach qos vhost')
Chain.__doc__ = """One saved controller over an NVMe-oF namespace.

``controller``: its name; ``attach``: the NVMe controller's entry;
``qos``: the namespace's QoS entries; ``vhost``: the controller's own
entries (creation, coalescing), in the file's order.
"""


def config(doc, subsystem):
    """The entries of ``subsystem`` in a saved config (a list, maybe [])."""
    for item in (doc or {}).get('subsystems') or ():
        if item.get('subsystem') == subsystem:
            return item.get('config') or []
    return []


def _param(entry, key):
    return entry.get('params', {}).get(key)


def chains(doc):
    """Every chain of a saved config, in its controllers' order."""
    bdevs = config(doc, BDEV)
    vhost = config(doc, VHOST)
    attaches = {_param(e, 'name'): e for e in bdevs
                if e.get('method') == ATTACH}
    found = []
    for entry in vhost:
        if entry.get('method') != CREATE:
            continue
        dev = _param(entry, 'dev_name')
        attach = attaches.get(namespace_owner(dev))
        if attach is None:
            continue
        name = _param(entry, 'ctrlr')
        found.append(Chain(
            name, attach,
            [e for e in bdevs if e.get('method') == QOS and
             _param(e, 'name') == dev],
            [e for e in vhost if _param(e, 'ctrlr') == name]))
    return found


def _add(doc, subsystem, entries):
    """Append ``entries`` the subsystem does not hold yet."""
    for item in doc['subsystems']:
        if item.get('subsystem') == subsystem:
            break
    else:
        item = {'subsystem': subsystem, 'config': []}
        doc['subsystems'].append(item)
    held = item.get('config') or []
    item['config'] = held + [e for e in entries if e not in held]


def keep(old, new, reread=None):
    """``new`` with ``old``'s chains the target has not replayed.

    ``reread``: the subsystems of ``new`` read from the target (None:
    all, a whole save); the others are ``old``'s, edited by the caller.
    A chain is kept when its NVMe controller is not attached (``bdev``
    was read, and lacks it) and its controller was not taken out of the
    file on purpose (``vhost_blk`` was read from the target, which lacks
    it as well, or it is still in ``new``).
    """
    reread = (BDEV, VHOST) if reread is None else reread
    if BDEV not in reread or old is None:
        return new
    attached = {_param(e, 'name') for e in config(new, BDEV)
                if e.get('method') == ATTACH}
    saved = {_param(e, 'ctrlr') for e in config(new, VHOST)}
    for chain in chains(old):
        if _param(chain.attach, 'name') in attached:
            continue
        if VHOST not in reread and chain.controller not in saved:
            continue
        _add(new, BDEV, [chain.attach] + chain.qos)
        _add(new, VHOST, chain.vhost)
    return new
