"""The backend's lvol stores: the lvol work every driver operation shares.

Finding a volume's lvol, making, cloning, renaming and deleting lvols,
putting QoS limits in force, saving the target's config after a change,
and dropping the snapshots nothing needs any more. Callers hold the
locks (see :mod:`operation`); methods that make several changes record
their undo in the caller's Rollback.
"""

from cinder import exception
from cinder.volume import volume_types
from cinder.volume import volume_utils
from oslo_log import log

from cinder_spdk_vhost import image_cache
from cinder_spdk_vhost import locks
from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import qos
from cinder_spdk_vhost import qos_apply
from cinder_spdk_vhost import stats
from cinder_spdk_vhost import tally
from spdk_vhost_core import exception as rpc_exc

LOG = log.getLogger(__name__)
#: Where QoS limits live in the target's config: all a QoS change saves.
QOS_SUBSYSTEMS = ('bdev',)


class Part(object):
    """A part of the driver: it works on the backend's shared Pools."""

    def __init__(self, pools):
        self.pools = pools
        self.client = pools.client
        self.conf = pools.conf
        self.exporter = pools.exporter


class Pools(object):
    """The lvol stores of one backend (``spdk_lvstores``), one pool each."""

    def __init__(self, client, conf, exporter):
        self.client = client
        self.conf = conf
        self.exporter = exporter
        # Where the saved config is written: the target's host.
        self.node = exporter.node
        self.image_cache = image_cache.ImageCache(client, conf)
        self.tally = tally.Tally(client).watch()

    @property
    def lvstores(self):
        return list(self.conf.spdk_lvstores)

    # -- stats -----------------------------------------------------------

    def stats(self, target_id):
        """Each pool's stats: one lvstore call each, whatever its size.

        Plus one ``bdev_get_bdevs`` by name per lvol changed since the
        last call, and a full count now and then (see :mod:`tally`).
        """
        self.tally.update()
        return [stats.pool_stats(self.client, self.conf, target_id, lvs,
                                 counts=self.tally)
                for lvs in self.lvstores]

    # -- finding ---------------------------------------------------------

    def pool(self, volume):
        """The lvol store the volume's host names (the first by default)."""
        pool = volume_utils.extract_host(volume.host, 'pool')
        if pool and pool not in self.lvstores:
            raise exception.VolumeBackendAPIException(
                data='pool %s is not one of spdk_lvstores %s'
                     % (pool, self.lvstores))
        return pool or self.lvstores[0]

    def find(self, volume, name=None):
        """The lvol of ``volume`` (or ``name`` in its pools), or None."""
        pool = self.pool(volume)
        order = [pool] + [lvs for lvs in self.lvstores if lvs != pool]
        return lvols.find(self.client, name or volume.name, order)

    def get(self, volume, name=None):
        lvol = self.find(volume, name)
        if lvol is None:
            raise exception.VolumeBackendAPIException(
                data='lvol %s not found in %s'
                     % (name or volume.name, self.lvstores))
        return lvol

    def lvol(self, alias):
        """Lvol ``alias`` this call just made or found; it must exist."""
        lvol = lvols.get(self.client, alias)
        if lvol is None:
            raise exception.VolumeBackendAPIException(
                data='lvol %s vanished' % alias)
        return lvol

    def find_snapshot(self, snapshot):
        """The lvol of ``snapshot``: by UUID when managed, else by name."""
        if snapshot.obj_attr_is_set('provider_id') and snapshot.provider_id:
            return lvols.get(self.client, snapshot.provider_id)
        return self.find(snapshot.volume, snapshot.name)

    def get_snapshot(self, snapshot):
        snap = self.find_snapshot(snapshot)
        if snap is None:
            raise exception.VolumeBackendAPIException(
                data='lvol of snapshot %s not found' % snapshot.id)
        return snap

    def marker(self, lvol):
        """The marker of deleted snapshot ``lvol``, or None."""
        return lvols.get(self.client, lvols.alias(
            lvol.lvs, lvols.retired_marker_name(lvol.uuid)))

    def refuse_if_exported(self, lvol, volume):
        in_use = self.exporter.users(lvol, volume.id)
        if in_use:
            LOG.info('Volume %(vol)s is still exported through %(users)s',
                     {'vol': volume.id, 'users': ', '.join(in_use)})
            raise exception.VolumeIsBusy(volume_name=volume.name)

    # -- QoS and the saved config ----------------------------------------

    @staticmethod
    def limits(volume_type_id, size_gb):
        """SPDK limits for a type and size; validates before any change."""
        specs = {}
        if volume_type_id:
            specs = qos.backend_specs(volume_types.get_volume_type_qos_specs(
                volume_type_id).get('qos_specs'))
        return qos.to_limits(specs, size_gb)

    def apply_qos(self, alias, limits, rb=None):
        """Put ``limits`` in force; with ``rb``, a failure restores the old.

        The undo is registered first: a failure after SPDK took the new
        limit (the read-back, the config save) must not leave it in force
        on a volume whose retype or extend is reported failed.
        """
        lvol = self.lvol(alias)
        if rb is not None:
            old = qos_apply.in_force(self.client, lvol.uuid)
            rb.add('restore QoS of %s' % alias, qos_apply.apply,
                   self.client, self.exporter, lvol, old)
        qos_apply.apply(self.client, self.exporter, lvol, limits)
        self.persist(QOS_SUBSYSTEMS)

    def new_qos(self, alias, limits):
        """QoS of an lvol this call created: SPDK starts it with none.

        Only non-zero limits need setting, reading back and saving: an
        lvol itself lives in its lvstore's metadata, not in the config.
        """
        if any(limits.values()):
            self.apply_qos(alias, limits)

    def persist(self, subsystems=None):
        """Save the target's config (spdk_saved_config) after a change.

        Called under the volume's lock, before the change is reported
        done, so a target restart brings back exports and QoS limits.
        ``subsystems``: only these changed (see ConfigSaver.save).
        """
        try:
            self.node.save(subsystems)
        except rpc_exc.ConfigNotSaved as err:
            raise exception.VolumeBackendAPIException(data=str(err)) from err

    # -- making and changing lvols ---------------------------------------

    def delete_lvol(self, alias):
        try:
            self.client.bdev_lvol_delete(alias)
        except rpc_exc.NotFound:
            LOG.debug('lvol %s was already gone', alias)

    def create_lvol(self, volume, rb, name=None, lvs=None, size_mib=None):
        """Create the empty lvol of ``volume``; return its alias.

        ``name``, ``lvs`` and ``size_mib``: another name (a copy's),
        lvol store and size than the volume's own.
        """
        lvs = lvs or self.pool(volume)
        name = name or volume.name
        alias = lvols.alias(lvs, name)
        with rb.change('delete lvol %s' % alias, self.delete_lvol, alias):
            self.client.bdev_lvol_create(
                name, size_mib or lvols.size_in_mib(volume.size),
                lvs_name=lvs,
                thin_provision=self.conf.spdk_thin_provision,
                clear_method=self.conf.spdk_lvol_clear_method)
        return alias

    def clone(self, snapshot_alias, volume, rb):
        """Thin clone of a snapshot lvol, named after ``volume``.

        Metadata only: the clone shares every cluster with the snapshot.
        """
        lvs = snapshot_alias.partition('/')[0]
        alias = lvols.alias(lvs, volume.name)
        with rb.change('delete clone %s' % alias, self.delete_lvol, alias):
            self.client.bdev_lvol_clone(snapshot_alias, volume.name)
        return alias

    def finish(self, alias, volume, limits, size_mib=None, wanted=None):
        """Grow a new lvol to the volume's size, then apply its QoS.

        ``size_mib``: the size of the snapshot a clone was just made of
        (its size too); the clone is then neither read back nor has any
        QoS yet (a new bdev), which saves two round trips. ``wanted``:
        the lvol's size in MiB, if not the volume's.
        """
        if size_mib is None:
            size_mib = self.lvol(alias).size_mib
            apply_qos = self.apply_qos
        else:
            apply_qos = self.new_qos
        wanted = wanted or lvols.size_in_mib(volume.size)
        if size_mib < wanted:
            self.client.bdev_lvol_resize(alias, wanted)
        apply_qos(alias, limits)

    def grow(self, lvol, size_mib, limits, rb):
        """Resize ``lvol`` and put the limits for its new size in force."""
        self.client.bdev_lvol_resize(lvol.alias, size_mib)
        rb.add('shrink %s on %s back' % (lvol.alias, self.client.target),
               self.client.bdev_lvol_resize, lvol.alias, lvol.size_mib)
        self.apply_qos(lvol.alias, limits, rb)

    def rename(self, alias, new_name, rb):
        lvs, _sep, old_name = alias.partition('/')
        self.client.bdev_lvol_rename(alias, new_name)
        new_alias = lvols.alias(lvs, new_name)
        rb.add('rename %s back' % new_alias, self.client.bdev_lvol_rename,
               new_alias, old_name)
        return new_alias

    def replace(self, old, new_alias, volume, limits, rb, tag,
                wanted=None):
        """Give lvol ``new_alias`` the volume's name; delete ``old``.

        The old lvol steps aside under ``<volume name>-<tag>`` first, so
        each step can be undone until the final delete. ``wanted``: as
        for :meth:`finish`.
        """
        self.rename(old.alias, '%s-%s' % (volume.name, tag), rb)
        alias = self.rename(new_alias, volume.name, rb)
        self.finish(alias, volume, limits, wanted=wanted)
        self.client.bdev_lvol_delete(
            lvols.alias(old.lvs, '%s-%s' % (volume.name, tag)))
        return alias

    def delete_snapshot(self, snapshot):
        """Delete Cinder snapshot ``snapshot``'s lvol, or retire it.

        Callers hold its locks; see the driver's ``delete_snapshot``.
        """
        snap = self.find_snapshot(snapshot)
        if snap is None:
            LOG.info('Snapshot %s has no lvol; nothing to delete',
                     snapshot.id)
            return
        if len(snap.clones) > 1:
            self.retire(snap, snapshot)
            return
        try:
            self.client.bdev_lvol_delete(snap.alias)
        except rpc_exc.NotFound:
            return
        except rpc_exc.NotPermitted:
            # SPDK counted more dependents than the lookup did.
            self.retire(snap, snapshot)
            return
        except rpc_exc.Busy as err:
            raise exception.SnapshotIsBusy(
                snapshot_name=snapshot.name) from err
        if not snap.clones:
            self.release_parent(snap.lvs, snap.base_snapshot)

    def retire(self, snap, snapshot):
        """Mark snapshot lvol ``snap`` deleted; its clones keep reading it.

        The marker is an empty thin lvol: metadata only, whatever the
        volume size.
        """
        marker = lvols.retired_marker_name(snap.uuid)
        try:
            self.client.bdev_lvol_create(marker, 1, lvs_name=snap.lvs,
                                         thin_provision=True)
        except rpc_exc.AlreadyExists:
            LOG.debug('Snapshot %s was already marked deleted', snap.alias)
        LOG.info('Snapshot %(id)s still has dependent lvols %(clones)s: '
                 'lvol %(alias)s is kept, marked deleted by %(marker)s, '
                 'until only one is left',
                 {'id': snapshot.id, 'clones': ', '.join(snap.clones),
                  'alias': snap.alias,
                  'marker': lvols.alias(snap.lvs, marker)})

    # -- what nothing needs any more -------------------------------------

    def drop_hidden(self, alias, wait=True):
        """Delete snapshot ``alias`` Cinder has no record of, if unneeded.

        Hidden clone snapshots and deleted snapshots (with a marker) go;
        with one clone left SPDK folds the snapshot into it (metadata
        only). A parent that has no record either is checked next.
        Returns the first ancestor that Cinder knows, if the walk got
        there. ``wait``: for a busy snapshot's lock; a sweep does not
        (a dead member's lock may hold it until its lease expires).
        """
        while alias:
            lvs, _sep, name = alias.partition('/')
            with locks.held(locks.slock(name), wait) as free:
                if not free:
                    LOG.debug('Snapshot %s is busy: left for a later '
                              'sweep', alias)
                    return None
                snap = lvols.get(self.client, alias)
                if snap is None:
                    return None
                marker = None if lvols.is_hidden(name) else self.marker(snap)
                if marker is None and not lvols.is_hidden(name):
                    return alias
                if len(snap.clones) > 1:
                    return None
                try:
                    self.client.bdev_lvol_delete(alias)
                except (rpc_exc.NotPermitted, rpc_exc.NotFound) as err:
                    LOG.debug('Keeping snapshot %s: %s', alias, err)
                    return None
                if marker is not None:
                    self.delete_lvol(marker.alias)
            LOG.info('Deleted %s %s: at most one lvol still needed it',
                     'deleted snapshot' if marker else 'hidden clone snapshot',
                     alias)
            parent = snap.base_snapshot
            alias = lvols.alias(lvs, parent) if parent else None
        return None

    def release_parent(self, lvs, parent):
        """After an lvol stopped using ``parent``: drop what nothing needs.

        Hidden clone snapshots, then an image cache base with no clone.
        """
        if not parent:
            return
        alias = self.drop_hidden(lvols.alias(lvs, parent))
        if alias and image_cache.is_base(alias.partition('/')[2]):
            self.image_cache.release(alias)

    def sweep(self):
        """Remove hidden and deleted snapshots no longer needed by two lvols.

        Their last dependents may have gone while cinder-volume was down,
        or an interrupted run left them. SPDK stops listing a snapshot
        with no clone as ``is_snapshot``: the names alone decide.
        """
        for lvs in self.lvstores:
            for item in self.client.bdev_lvol_get_lvols(lvs_name=lvs):
                name = item['name']
                if lvols.is_hidden(name):
                    self.drop_hidden(lvols.alias(lvs, name), wait=False)
                elif lvols.is_marker(name):
                    self._sweep_marker(lvols.alias(lvs, name))

    def _sweep_marker(self, alias):
        uuid = alias.partition('/')[2][len(lvols.RETIRED_PREFIX):]
        snap = lvols.get(self.client, uuid)
        if snap is not None:
            self.drop_hidden(snap.alias, wait=False)
        elif lvols.get(self.client, alias) is not None:
            LOG.info('Deleting %s: the snapshot it marked is gone', alias)
            self.delete_lvol(alias)
