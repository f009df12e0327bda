"""Provisioned bytes per lvol store, kept without listing every bdev.

SPDK has no per-store sum of lvol sizes, and ``bdev_lvol_get_lvols``
gives no sizes: only ``bdev_get_bdevs`` with no name does, and its reply
(and time: 0.8 s at 1,000 lvols) grows with the pool. So the tally
counts every lvol once (the first stats call after a start), then
watches the client: each lvol a call made, changed or deleted is asked
for by name at the next stats call, whatever part of the driver made
the call. Lvols another process changes are seen at the next full
count, at most every :data:`RESYNC_EVERY` stats calls.
"""


from oslo_log import log

from cinder_spdk_vhost import lvols
from spdk_vhost_core import exception as rpc_exc

LOG = log.getLogger(__name__)

#: Stats calls between two full counts: how stale another process's
#: lvols may be (Cinder asks every 60 s by default: 10 minutes).
RESYNC_EVERY = 10
#: Lvols to read by name before a full count is cheaper: at least this
#: many, or a tenth of the lvols. One read by name takes about 8 ms; the
#: full count 19 ms at 100 lvols, 0.8 s at 1,000 (PROBES.md).
FULL_AT = 16
FULL_FRACTION = 10
#: Calls that make an lvol (the reply is its UUID) or change the ones
#: their params name.
NAMED = {
    'bdev_lvol_create': (), 'bdev_lvol_snapshot': (),
    'bdev_lvol_clone': (), 'bdev_lvol_clone_bdev': (),
    'bdev_lvol_delete': ('name',), 'bdev_lvol_resize': ('name',),
    'bdev_lvol_inflate': ('name',), 'bdev_lvol_decouple_parent': ('name',),
    'bdev_lvol_rename': ('old_name',),
}
#: Lvol calls that change no lvol's size or clusters. Any other
#: ``bdev_lvol_*`` call makes the next stats call count everything.
UNCHANGING = frozenset([
    'bdev_lvol_get_lvstores', 'bdev_lvol_get_lvols',
    'bdev_lvol_set_read_only', 'bdev_lvol_start_shallow_copy',
    'bdev_lvol_check_shallow_copy'])


class Entry(object):
    """What one lvol adds to its store's provisioned bytes."""

    __slots__ = ('uuid', 'alias', 'store', 'snapshot', 'size', 'clusters',
                 'clones', 'parent')

    def __init__(self, bdev):
        lvol = lvols.from_bdev(bdev)
        info = bdev.get('driver_specific', {}).get('lvol', {})
        self.uuid = lvol.uuid
        self.alias = lvol.alias
        self.store = info.get('lvol_store_uuid')
        self.snapshot = lvol.is_snapshot
        self.size = lvol.size_bytes
        self.clusters = lvol.allocated_clusters or 0
        # Deleting a snapshot moves its clusters to its one clone.
        self.clones = [lvols.alias(lvol.lvs, c) for c in lvol.clones]
        self.parent = (lvols.alias(lvol.lvs, lvol.base_snapshot)
                       if lvol.base_snapshot else None)

    @staticmethod
    def counted(bdev):
        """Whether ``bdev`` is an lvol that holds provisioned bytes."""
        info = bdev.get('driver_specific', {}).get('lvol')
        return bool(info) and not lvols.is_marker(
            lvols.from_bdev(bdev).name)

    def bytes(self, cluster_size):
        """A volume its whole size; a snapshot only the clusters it holds.

        A snapshot never grows, and what it shares is counted once.
        """
        return self.clusters * cluster_size if self.snapshot else self.size


class Tally(object):
    """Every counted lvol of the target, by UUID (see the module doc)."""

    def __init__(self, client):
        self.client = client
        self.entries = None  # None: count everything at the next call
        self.by_alias = {}
        self.pending = set()
        self.rounds = 0
        # Stats calls between full counts. In a cluster the scheduler
        # takes each report as the backend's, and the other members'
        # changes are not seen here: each report counts everything.
        self.resync_every = RESYNC_EVERY

    def watch(self):
        """Note the lvols each call of the client makes or changes.

        Every part of the driver (and images, backups, migration) goes
        through this one client object: watching it is the one place
        no change can be forgotten. A failed call may have changed its
        lvol half-way: it is noted too.
        """
        self.client.observe(self.note)
        return self

    def note(self, method, params, result):
        """Remember what ``method`` may have changed, for the next count."""
        if not method.startswith('bdev_lvol_') or method in UNCHANGING:
            return
        if method not in NAMED:
            self.entries = None
            return
        names = [params[p] for p in NAMED[method] if params.get(p)]
        if isinstance(result, str):
            names.append(result)
        if method == 'bdev_lvol_rename' and '/' in params.get('old_name', ''):
            lvs = params['old_name'].partition('/')[0]
            names.append(lvols.alias(lvs, params.get('new_name', '')))
        self.pending.update(self.by_alias.get(n, n) for n in names)
        if len(self.pending) > self.full_at():
            self.entries = None
            self.pending = set()

    def full_at(self):
        return max(FULL_AT, len(self.entries or ()) // FULL_FRACTION)

    def update(self):
        """Bring the tally up to date: once per stats call, before reading.

        Returns the number of lvols read by name (None: a full count).
        """
        self.rounds += 1
        if self.entries is None or self.rounds % self.resync_every == 0:
            self.recount()
            return None
        todo, self.pending = self.pending, set()
        done = set()
        while todo:
            name = todo.pop()
            if name not in done:
                done.add(name)
                self._refresh(name, todo)
        return len(done)

    def recount(self):
        """Count every lvol (``bdev_get_bdevs``: grows with the pool)."""
        self.pending = set()
        entries = [Entry(b) for b in self.client.bdev_get_bdevs()
                   if Entry.counted(b)]
        self.entries = {e.uuid: e for e in entries}
        self.by_alias = {e.alias: e.uuid for e in entries}
        LOG.debug('Counted the provisioned bytes of %d lvols', len(entries))

    def _refresh(self, name, todo):
        try:
            bdev = self.client.bdev_get_bdevs(name=name)[0]
        except rpc_exc.NotFound:
            gone = self.entries.pop(self.by_alias.get(name, name), None)
            if gone is not None:
                self.by_alias.pop(gone.alias, None)
                todo.update(self._children(gone))
            return
        old = self.entries.pop(bdev['name'], None)
        if old is not None:
            self.by_alias.pop(old.alias, None)
        if Entry.counted(bdev):
            entry = self.entries[bdev['name']] = Entry(bdev)
            self.by_alias[entry.alias] = entry.uuid

    def _children(self, gone):
        """What may hold a deleted snapshot's clusters now: its clones.

        Its clone list may predate a snapshot of one of them (which
        then became the clone): the lvols naming it as parent too.
        Only counted ones: another process's are the full count's.
        """
        found = {self.by_alias[c] for c in gone.clones if c in self.by_alias}
        found.update(e.uuid for e in self.entries.values()
                     if e.parent == gone.alias)
        return found

    def provisioned(self, store):
        """Bytes the lvols of ``store`` (an lvstore's JSON) may hold."""
        return sum(e.bytes(store['cluster_size'])
                   for e in self.entries.values() if e.store == store['uuid'])
