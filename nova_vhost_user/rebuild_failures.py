"""Rebuilds that failed, held off before the watcher tries them again.

A member's rebuild writes every block of its copy. When the copy's
storage target goes away or refuses those writes (a thin copy's lvol
store without room for the whole volume does), SPDK's raid ends the
rebuild, drops the member and resets its NVMe controller, which is
connected again at once: a watcher that added back every connected
member would copy the whole volume over and over. The compute host
cannot tell the causes apart (the storage target answers any failed
write with the same generic NVMe error, and raid reports none), so the
watcher holds such a member off, twice as long after each failure in a
row, from :data:`FIRST_WAIT` up to :data:`LONGEST_WAIT`. A rebuild that
ends in sync ends the hold; ``spdk-vhost-replicas repair`` ignores it.
The watcher keeps its holds in a file of the compute host beside the
saved config (:func:`holds_path`), so that a restarted watcher, or one
started again with its host, holds the same members off; without a
saved config they live in its memory only.
"""

import collections
import json
import time

from oslo_log import log

from spdk_vhost_core import saved_config

LOG = log.getLogger(__name__)

FIRST_WAIT = 60
LONGEST_WAIT = 3600

#: A rebuild that ended with its member out of the mirror: ``percent``
#: is how far it was last seen, ``count`` the failures in a row, ``wait``
#: the seconds before the watcher adds the member again.
Failure = collections.namedtuple('Failure', 'member percent count wait')


def holds_path(saved):
    """The holds' file for saved config ``saved`` (None without one)."""
    return '%s.rebuild-holds.json' % saved if saved else None


class RebuildFailures(object):
    """The rebuilds the watcher saw, and the members it holds off.

    ``path``: the file the holds are kept in (read at start, rewritten
    on each change); the times in it are the wall clock's, which a
    restart keeps.
    """

    def __init__(self, clock=time.time, path=None):
        self._clock = clock
        self._path = path
        # volume -> (member bdev, percent, seen in sync once since)
        self._running = {}
        # (volume, member bdev) -> (count, not before)
        self._failed = self._load()

    def _load(self):
        if not self._path:
            return {}
        try:
            with open(self._path) as src:
                return {(h['volume'], h['member']): (h['count'],
                                                     h['not_before'])
                        for h in json.load(src)['holds']}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError) as err:
            LOG.warning('Ignoring the rebuild holds in %(path)s: %(err)s; '
                        'a member whose rebuild failed is tried again',
                        {'path': self._path, 'err': err})
            return {}

    def _save(self):
        if self._path:
            saved_config.write_atomic(self._path, {'holds': [
                {'volume': volume, 'member': member, 'count': count,
                 'not_before': not_before}
                for (volume, member), (count, not_before)
                in sorted(self._failed.items())]}, mode=0o600)

    def started(self, volume_id, member):
        """The watcher added ``member`` back: a rebuild starts.

        Noted before the watcher looks again, so that a rebuild that
        fails at once (a store with no room left) counts too.
        """
        self._running[volume_id] = (member, 0, False)

    def observe(self, volume_id, state):
        """Note the volume's rebuild (``state``: :func:`mirror.status`).

        Returns the :class:`Failure` of a rebuild seen last time that
        has ended with its member out of the mirror, else None. One that
        ended with its member in sync ends the member's hold once it is
        seen so twice in a row.
        """
        rebuild = state['rebuilding']
        ended = self._running.pop(volume_id, None)
        if rebuild:
            self._running[volume_id] = (rebuild['member'],
                                        rebuild['percent'], False)
        if ended is None or (rebuild and rebuild['member'] == ended[0]):
            return None
        member, percent, seen_in_sync = ended
        if member in state['members']:
            if not seen_in_sync:
                # SPDK ends a failed rebuild before it drops the member:
                # for a moment it looks in sync. Believed next round.
                self._running[volume_id] = (member, percent, True)
            elif self._failed.pop((volume_id, member), None):
                self._save()
            return None
        count = self._failed.get((volume_id, member), (0, 0))[0] + 1
        wait = min(FIRST_WAIT * 2 ** (count - 1), LONGEST_WAIT)
        self._failed[(volume_id, member)] = (count, self._clock() + wait)
        self._save()
        return Failure(member, percent, count, wait)

    def held(self, volume_id):
        """The volume's member bdevs whose next rebuild must wait."""
        now = self._clock()
        return {member for (volume, member), (_count, not_before)
                in self._failed.items()
                if volume == volume_id and not_before > now}

    def forget(self, volume_id):
        """A volume detached from this host."""
        self._running.pop(volume_id, None)
        gone = [key for key in self._failed if key[0] == volume_id]
        for key in gone:
            del self._failed[key]
        if gone:
            self._save()
