"""The connector's saves of the target config, each one also a check.

An attach or detach changes one vhost-blk controller and, mostly, one
bdev entry; the connector knows both, so it writes them into the saved
file itself rather than reading back the target's ``vhost_blk`` config,
whose reply grows with every controller on the host. Then it asks the
target for that one controller: a controller just created must still be
there and one just deleted must not. Either fails only when the target
restarted between the change and the save (it came back from an older
file), which must not go unnoticed. Asked after the file is written, a
later restart brings back what the file now says.
"""

from oslo_log import log

from os_brick_connector import connector_errors as errors
from spdk_vhost_core import exception as spdk_exc

LOG = log.getLogger(__name__)

VHOST_SUBSYSTEM = 'vhost_blk'
TRANSPORT = 'vhost_user_blk'


def controller_entries(name, bdev, core, readonly, coalescing=None):
    """The saved-config entries of a controller, as SPDK writes them.

    ``coalescing``: ``(delay_base_us, iops_threshold)`` when it is set.
    """
    entries = [{'method': 'vhost_create_blk_controller',
                'params': {'ctrlr': name, 'dev_name': bdev,
                           'cpumask': '%x' % (1 << core),
                           'readonly': bool(readonly),
                           'transport': TRANSPORT}}]
    if coalescing:
        delay, threshold = coalescing
        entries.append({'method': 'vhost_controller_set_coalescing',
                        'params': {'ctrlr': name, 'delay_base_us': delay,
                                   'iops_threshold': threshold}})
    return entries


def _replace_controller(config, name, entries):
    """``config`` with controller ``name``'s entries replaced."""
    return [c for c in config
            if c.get('params', {}).get('ctrlr') != name] + list(entries)


def _replace_bdev(config, entry, added):
    """``config`` with ``entry`` added (once) or removed.

    Entries are matched by method and ``params['name']``, so adding one
    twice keeps one, and removing one that is gone is no change.
    """
    def same(other):
        return (other.get('method') == entry['method'] and
                other.get('params', {}).get('name') ==
                entry['params']['name'])
    kept = [c for c in config if not same(c)]
    return kept + [entry] if added else kept


class ControllerSaver(object):
    """The connector's use of a :class:`saved_config.ConfigSaver`."""

    # A detach that finds its controller back deletes it again, this many
    # rounds in all: one per target restart racing with it.
    rounds = 3

    def __init__(self, saver):
        self.saver = saver
        self.client = saver.client

    def _save(self, name, entries, bdev_entry, added):
        """Write controller ``name`` (``entries``, none: gone) and its bdev.

        The ``bdev`` subsystem is read again unless the caller gives the
        one entry it ``added`` (or removed): ``bdev_entry``.
        """
        edits = {VHOST_SUBSYSTEM: lambda config: _replace_controller(
            config, name, entries)}
        subsystems = ()
        if bdev_entry is None:
            subsystems = ('bdev',)
        else:
            edits['bdev'] = lambda config: _replace_bdev(
                config, bdev_entry, added)
        try:
            self.saver.save(subsystems, edits)
        except spdk_exc.ConfigNotSaved as err:
            raise errors.TargetConfigNotSaved(path=err.path,
                                              reason=err.reason) from err

    def save_with(self, name, entries, bdev_entry=None):
        """Save the new controller; return it as the target has it.

        Raises if the target no longer has it. Saving off, it is only
        looked up (its socket is what the caller needs).
        """
        if self.saver.enabled:
            self._save(name, entries, bdev_entry, added=True)
        ctrl = self.client.vhost_controller(name)
        if ctrl is None:
            raise errors.TargetRestarted(ctrlr=name, state='without it')
        return ctrl

    def until_gone(self, name, delete):
        """Run ``delete()`` until the saved controller ``name`` stays gone.

        ``delete`` returns whether it deleted the controller (False: it
        was left in place on purpose, e.g. a forced detach), and the bdev
        entry it removed with it, if it knows which (see :meth:`_save`).
        """
        for _round in range(self.rounds):
            gone, removed = delete()
            if not gone or not self.saver.enabled:
                return
            self._save(name, (), removed, added=False)
            if self.client.vhost_controller(name) is None:
                return
            LOG.warning('vhost-blk controller %s came back with a target '
                        'restart; deleting it again', name)
        raise errors.TargetRestarted(ctrlr=name, state='with it again')

    def save_quietly(self):
        """Save after undoing a failed connect; a failure is only logged."""
        try:
            self.saver.save()
        except spdk_exc.ConfigNotSaved as err:
            LOG.warning('After undoing a failed connect: %s', err)
