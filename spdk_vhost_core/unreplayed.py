"""Saved-config entries a restarted target could not replay, kept.

A compute target that restarts while a storage node is down cannot
attach that node's copies again: ``--json-ignore-init-errors`` lets it
start without their NVMe-oF controllers, and without the vhost-blk
controller of a volume that has no copy left to run on. Their guests'
QEMU waits for the socket to come back (a stall, not a lost disk), so
those entries must outlive every save until the node is back and the
compute host replays them (:mod:`os_brick_connector.restore`). A save
that reads the ``bdev`` subsystem from the target would drop them:
:func:`keep` puts them back. A detach takes the controller's entry out
of the file on purpose, and with it the reason to keep the rest.

Such a *chain* is one saved vhost-blk controller and the saved NVMe-oF
attaches under it: a single-copy volume's (the controller exposes its
namespace ``<name>n<id>``), or a replicated volume's members (the
controller exposes the mirror ``<volume>``, its members are the
namespaces of ``<volume>.<tag>``), with the QoS limits of what the
controller exposes. SPDK saves no mirror: examine assembles it from the
members' superblocks.
"""

import collections
import re

from spdk_vhost_core import spdk_rpc_bdev

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


Chain = collections.namedtuple('Chain',
                               'controller bdev attaches qos vhost mirror')
Chain.__doc__ = """One saved controller and the NVMe-oF attaches under it.

``controller``: its name; ``bdev``: the bdev it exposes; ``attaches``:
the NVMe controllers' entries;
``qos``: the exposed bdev's QoS entries; ``vhost``: the controller's
own entries (creation, coalescing), in the file's order; ``mirror``:
the mirror's name for a replicated volume, else None.
"""


def config(doc, subsystem):
    """The entries of ``subsystem`` in a saved config (a list, maybe [])."""
    for item in (doc or {}).get('subsystems') or ():
        if item.get('subsystem') == subsystem:
            return item.get('config') or []
    return []


def name_of(entry):
    """An entry's ``params['name']`` (an attach's NVMe controller)."""
    return entry.get('params', {}).get('name')


def _param(entry, key):
    return entry.get('params', {}).get(key)


def chains(doc):
    """Every chain of a saved config, in its controllers' order."""
    bdevs = config(doc, BDEV)
    vhost = config(doc, VHOST)
    attaches = [e for e in bdevs if e.get('method') == ATTACH]
    found = []
    for entry in vhost:
        if entry.get('method') != CREATE:
            continue
        dev = _param(entry, 'dev_name')
        mirror = None
        under = [a for a in attaches if name_of(a) == namespace_owner(dev)]
        if not under:
            mirror = dev
            under = [a for a in attaches
                     if (name_of(a) or '').startswith('%s.' % dev)]
        if not under:
            continue
        name = _param(entry, 'ctrlr')
        found.append(Chain(
            name, dev, under,
            [e for e in bdevs if e.get('method') == QOS and
             name_of(e) == dev],
            [e for e in vhost if _param(e, 'ctrlr') == name], mirror))
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


def mirror_incomplete(client, name):
    """Whether mirror ``name`` lacks a member (or is not assembled).

    A member whose attach is missing then is one the target could not
    attach; one replaced on purpose has its slot filled by the new one.
    """
    for raid in client.bdev_raid_get_bdevs():
        if raid.get('name') == name:
            return (len(spdk_rpc_bdev.raid_members(raid)) <
                    len(raid.get('base_bdevs_list') or ()))
    return True


def keep(old, new, reread=None, client=None):
    """``new`` with ``old``'s chains the target has not replayed.

    ``reread``: the subsystems of ``new`` read from the target (None:
    all, a whole save); the others are ``old``'s, edited by the caller.
    A chain is kept when one of its NVMe controllers is not attached
    (``bdev`` was read, and lacks it), its controller was not taken out
    of the file on purpose (``vhost_blk`` was read from the target, or
    it is still in ``new``), and, for a mirror, the mirror lacks a
    member on the target (asked through ``client``).
    """
    reread = (BDEV, VHOST) if reread is None else reread
    if BDEV not in reread or old is None:
        return new
    attached = {name_of(e) for e in config(new, BDEV)
                if e.get('method') == ATTACH}
    limited = {name_of(e) for e in config(new, BDEV)
               if e.get('method') == QOS}
    saved = {_param(e, 'ctrlr') for e in config(new, VHOST)}
    for chain in chains(old):
        missing = [a for a in chain.attaches if name_of(a) not in attached]
        if not missing:
            continue
        if VHOST not in reread and chain.controller not in saved:
            continue
        if chain.mirror and not mirror_incomplete(client, chain.mirror):
            continue
        _add(new, BDEV, missing + [e for e in chain.qos
                                   if name_of(e) not in limited])
        if chain.controller not in saved:
            _add(new, VHOST, chain.vhost)
    return new
