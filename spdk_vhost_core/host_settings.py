"""Each NVMe-oF host's reconnect settings, kept beside the saved config.

How long a connected host retries lives in that host's own SPDK target,
out of the storage target's sight, yet ``spdk-vhost-upgrade`` must know
it before it stops a storage target (:mod:`reconnect`). So Cinder
records what each host reported in its connector properties when it
admits the host to a volume's subsystem (the settings that host's new
connection is made with), per host NQN and subsystem, in
``<saved config>.hosts.json``::

    {"hosts": {"<host NQN>": {"<subsystem NQN>": {
        "ctrlr_loss_timeout_sec": 120, "reconnect_delay_sec": 2,
        "fast_io_fail_timeout_sec": 70}}}}

A host attaching a copy of a replicated volume is recorded as
:data:`MIRRORED` instead: it mirrors that copy with others and fails it
out of the mirror, the guest going on, rather than ride out an upgrade.

It is written atomically under the lock the saved config is written
under (:func:`saved_config.file_lock`), which the upgrade command holds
while it reads it. Without a saved config (``spdk_saved_config`` empty)
nothing is recorded, and every host counts as unknown.
"""

import json

from oslo_log import log

from spdk_vhost_core import reconnect
from spdk_vhost_core import saved_config

LOG = log.getLogger(__name__)

SUFFIX = '.hosts.json'
#: The record of a host mirroring the subsystem's lvol with other copies.
MIRRORED = {'mirrored': True}


def path(saved):
    """The record beside saved config ``saved``."""
    return saved + SUFFIX


def _load(saved):
    """``{host: {subsystem: settings}}``; {} when missing or unreadable."""
    try:
        with open(path(saved)) as src:
            hosts = json.load(src).get('hosts')
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, AttributeError) as err:
        LOG.warning('NVMe-oF host settings %s are unreadable (%s): every '
                    'host counts as unknown', path(saved), err)
        return {}
    if not isinstance(hosts, dict):
        return {}
    return {host: subs for host, subs in hosts.items()
            if isinstance(subs, dict)}


def read(saved):
    """What was recorded; the caller holds the saved config's lock."""
    return _load(saved) if saved else {}


def _change(saved, change):
    """Apply ``change(hosts)`` under the lock; what it returned."""
    if not saved:
        return None
    with saved_config.file_lock(saved):
        hosts = _load(saved)
        before = json.dumps(hosts, sort_keys=True)
        out = change(hosts)
        hosts = {host: subs for host, subs in hosts.items() if subs}
        if json.dumps(hosts, sort_keys=True) != before:
            saved_config.write_atomic(path(saved), {'hosts': hosts})
    return out


def record(saved, host_nqn, subsystem, settings):
    """Record ``settings`` (None: forget) for one host and subsystem.

    Returns what was recorded before (None: nothing), for a rollback.
    """
    def change(hosts):
        subsystems = hosts.setdefault(host_nqn, {})
        before = subsystems.pop(subsystem, None)
        if settings is not None:
            subsystems[subsystem] = settings
        return before
    return _change(saved, change)


def forget(saved, subsystem, host_nqns):
    """Drop the records of ``host_nqns`` on ``subsystem``."""
    def change(hosts):
        for host in host_nqns:
            hosts.get(host, {}).pop(subsystem, None)
    _change(saved, change)


def settings_of(hosts, host_nqn, subsystem):
    """The valid settings recorded for the pair, or None (unknown)."""
    found = (hosts.get(host_nqn) or {}).get(subsystem)
    if found is None:
        return None
    try:
        return reconnect.check(found)
    except reconnect.Invalid:
        return None


def mirrored(hosts, host_nqn, subsystem):
    """Whether the host mirrors the subsystem's lvol (:data:`MIRRORED`)."""
    return (hosts.get(host_nqn) or {}).get(subsystem) == MIRRORED
