"""The connector's saves of the target config, each one also a check.

A vhost-blk controller the connector just created must be in the saved
config, and one it just deleted must not: either fails only when the
target restarted between the change and the save (it then came back
from an older file), which must not go unnoticed.
"""

import functools

from oslo_log import log

from os_brick_connector import connector_errors as errors
from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import saved_config

LOG = log.getLogger(__name__)


def _edit_entry(doc, subsystem, entry, added):
    """Add ``entry`` to (or remove it from) ``subsystem`` of ``doc``.

    Entries are matched by method and ``params['name']``, so adding one
    twice keeps one, and removing one that is gone is no change.
    """
    def same(other):
        return (other.get('method') == entry['method'] and
                other.get('params', {}).get('name') ==
                entry['params']['name'])
    for item in doc['subsystems']:
        if item.get('subsystem') == subsystem:
            config = [c for c in item.get('config') or () if not same(c)]
            item['config'] = config + [entry] if added else config
            return


class ControllerSaver(object):
    """The connector's use of a :class:`saved_config.ConfigSaver`."""

    # A detach that finds its controller back deletes it again, this many
    # rounds in all: one per target restart racing with it.
    rounds = 3

    def __init__(self, saver):
        self.saver = saver

    def _controllers(self, bdev_entry=None, added=True):
        """Save; the saved controller names (None: saving is off).

        An attach or detach changes its controller and one bdev entry.
        The ``vhost_blk`` subsystem is always read again: it is also the
        proof the target still (or no longer) has the controller. The
        ``bdev`` one is read again too, unless the caller gives the one
        entry it ``added`` (or removed): ``bdev_entry``.
        """
        subsystems, edit = ('bdev', 'vhost_blk'), None
        if bdev_entry is not None:
            subsystems = ('vhost_blk',)
            edit = functools.partial(_edit_entry, subsystem='bdev',
                                     entry=bdev_entry, added=added)
        try:
            doc = self.saver.save(subsystems, edit)
        except spdk_exc.ConfigNotSaved as err:
            raise errors.TargetConfigNotSaved(path=err.path,
                                              reason=err) from err
        if doc is None:
            return None
        return saved_config.names(doc, 'vhost_create_blk_controller', 'ctrlr')

    def save_with(self, name, bdev_entry=None):
        """Save; raise if the target no longer has controller ``name``."""
        saved = self._controllers(bdev_entry)
        if saved is not None and name not in saved:
            raise errors.TargetRestarted(ctrlr=name, state='without it')

    def until_gone(self, name, delete):
        """Run ``delete()`` until a save shows controller ``name`` gone.

        ``delete`` returns whether it deleted the controller (False: it
        was left in place on purpose, e.g. a forced detach), and the bdev
        entry it removed with it, if it knows which (see
        :meth:`_controllers`).
        """
        for _round in range(self.rounds):
            gone, removed = delete()
            saved = self._controllers(removed, added=False)
            if not gone or saved is None or name not in saved:
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
