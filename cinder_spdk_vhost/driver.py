"""Cinder volume driver: thin SPDK lvols exported for vhost-user-blk.

Volumes are lvols in the configured lvol stores (one pool each);
snapshots and clones are SPDK metadata operations and are never inflated,
so their cost does not grow with the volume size. Attaching returns
DESIGN.md's ``spdk_vhost`` connection_info: the lvol itself when the
compute host shares this SPDK target, else a per-volume NVMe-oF
subsystem. See doc/source/admin/cinder-driver.rst.
"""

import socket

from cinder import exception
from cinder import interface
from cinder.volume import driver
from cinder.volume import volume_types
from cinder.volume import volume_utils
from oslo_log import log

from cinder_spdk_vhost import backup
from cinder_spdk_vhost import errors
from cinder_spdk_vhost import export
from cinder_spdk_vhost import image_cache
from cinder_spdk_vhost import image_ops
from cinder_spdk_vhost import locks
from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import manageable
from cinder_spdk_vhost import migration
from cinder_spdk_vhost import options
from cinder_spdk_vhost import qos
from cinder_spdk_vhost import qos_apply
from cinder_spdk_vhost import rollback
from cinder_spdk_vhost import target_rpcs
from cinder_spdk_vhost import validation
from os_brick_connector import config as rpc_config
from os_brick_connector import exception as rpc_exc
from os_brick_connector import saved_config
from os_brick_connector import spdk_rpc
from os_brick_connector import spdk_version
from os_brick_connector import validation as brick_validation

LOG = log.getLogger(__name__)
#: Where QoS limits live in the target's config: all a QoS change saves.
QOS_SUBSYSTEMS = ('bdev',)

VERSION = '1.0.0'
HOST_COPY_REFUSED = (
    'Cinder\'s generic (host-assisted) migration cannot move spdk_vhost '
    'volumes: it attaches them on the cinder-volume host through os-brick, '
    'which has no spdk_vhost connector, or, for an attached volume, asks '
    'Nova to swap the disk, which vhost-user disks do not support. A '
    'detached volume moves between the lvol stores (pools) of its own SPDK '
    'target only')


@interface.volumedriver
class SpdkVhostDriver(backup.BackupMixin, image_ops.ImageMixin,
                      driver.VolumeDriver):
    """Thin SPDK lvols, attached to guests as vhost-user-blk.

    Exceptions: bad options raise ``InvalidConfigurationValue`` from
    ``do_setup``; bad names and sizes ``InvalidInput``, bad connector
    properties ``InvalidConnectorException``, bad QoS ``InvalidQoSSpecs``,
    all before any RPC (see :mod:`validation`); a volume in use
    ``VolumeIsBusy`` / ``SnapshotIsBusy``; any SPDK failure
    ``VolumeBackendAPIException``, after undoing what the call made.
    """

    VERSION = VERSION
    # Third-party CI wiki name for the driver list.
    CI_WIKI_NAME = 'SPDK_vhost_CI'

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.configuration.append_config_values(rpc_config.rpc_opts)
        self.configuration.append_config_values(options.driver_opts)
        self.client = None
        self.saver = saved_config.ConfigSaver(None, None)
        self.exporter = None
        self.target_id = None

    @staticmethod
    def get_driver_options():
        return rpc_config.rpc_opts + options.driver_opts

    # -- setup -----------------------------------------------------------

    @property
    def lvstores(self):
        return list(self.configuration.spdk_lvstores)

    def _default_target_id(self):
        conf = self.configuration
        if conf.spdk_rpc_address:
            return 'tcp:%s:%s' % (conf.spdk_rpc_address, conf.spdk_rpc_port)
        return socket.gethostname()

    def do_setup(self, context):
        """Build the RPC client; nothing is asked of the target yet."""
        validation.check_config(self.configuration)
        if self.configuration.spdk_rpc_address is None:
            brick_validation.warn_if_world_writable(
                self.configuration.spdk_rpc_socket)
        self.client = spdk_rpc.SpdkClient.from_conf(self.configuration)
        self.exporter = export.NvmfExport(self.client, self.configuration)
        self.saver = saved_config.ConfigSaver.from_conf(self.client,
                                                        self.configuration)
        self.target_id = (self.configuration.spdk_target_id or
                          self._default_target_id())

    def _check_spdk_version(self):
        """Refuse an SPDK release outside spdk_version.SUPPORTED."""
        try:
            spdk_version.check(self.client)
        except (spdk_version.UnsupportedSpdkVersion,
                rpc_exc.SpdkRpcError) as err:
            raise exception.VolumeDriverException(
                message=str(err)) from err

    def check_for_setup_error(self):
        """Refuse to start on an unusable target, with one clear reason."""
        try:
            methods = set(self.client.rpc_get_methods())
        except rpc_exc.SpdkTransportError as err:
            raise exception.VolumeDriverException(
                message='SPDK target %s is unreachable: %s'
                        % (self.client.target, err)) from err
        except rpc_exc.SpdkRpcError as err:
            raise exception.VolumeDriverException(
                message='SPDK target %s refused rpc_get_methods: %s'
                        % (self.client.target, err)) from err
        missing = target_rpcs.missing(self.configuration, methods)
        if missing:
            raise exception.VolumeDriverException(
                message='SPDK target %s cannot serve this backend: it needs '
                        '%s' % (self.client.target, missing))
        self._check_spdk_version()
        self.exporter.has_vhost = target_rpcs.VHOST_LIST in methods
        with errors.translated('checking the lvol stores'):
            for lvs in self.lvstores:
                try:
                    self.client.bdev_lvol_get_lvstores(lvs_name=lvs)
                except rpc_exc.NotFound as err:
                    raise exception.VolumeDriverException(
                        message='lvol store %s (spdk_lvstores) not found on '
                                'SPDK target %s' % (lvs, self.client.target)
                    ) from err
            self.exporter.ensure_transport()
            self._sweep_scratch()
            self._sweep_hidden_snapshots()

    def _sweep_hidden_snapshots(self):
        """Remove hidden and deleted snapshots no longer needed by two lvols.

        Their last dependents may have gone while cinder-volume was down,
        or an interrupted run left them. SPDK stops listing a snapshot
        with no clone as ``is_snapshot``: the names alone decide.
        """
        for lvs in self.lvstores:
            for item in self.client.bdev_lvol_get_lvols(lvs_name=lvs):
                name = item['name']
                if lvols.is_hidden(name):
                    self._drop_hidden(lvols.alias(lvs, name))
                elif lvols.is_marker(name):
                    self._sweep_marker(lvols.alias(lvs, name))

    def _sweep_marker(self, alias):
        uuid = alias.partition('/')[2][len(lvols.RETIRED_PREFIX):]
        snap = lvols.get(self.client, uuid)
        if snap is not None:
            self._drop_hidden(snap.alias)
        elif lvols.get(self.client, alias) is not None:
            LOG.info('Deleting %s: the snapshot it marked is gone', alias)
            self._delete_lvol(alias)

    # -- helpers ---------------------------------------------------------

    def _pool(self, volume):
        pool = volume_utils.extract_host(volume.host, 'pool')
        if pool and pool not in self.lvstores:
            raise exception.VolumeBackendAPIException(
                data='pool %s is not one of spdk_lvstores %s'
                     % (pool, self.lvstores))
        return pool or self.lvstores[0]

    def _search_order(self, volume):
        pool = self._pool(volume)
        return [pool] + [lvs for lvs in self.lvstores if lvs != pool]

    def _find(self, volume, name=None):
        """The lvol of ``volume`` (or ``name`` in its pools), or None."""
        return lvols.find(self.client, name or volume.name,
                          self._search_order(volume))

    def _get(self, volume, name=None):
        lvol = self._find(volume, name)
        if lvol is None:
            raise exception.VolumeBackendAPIException(
                data='lvol %s not found in %s'
                     % (name or volume.name, self.lvstores))
        return lvol

    def _backend_specs(self, volume_type_id):
        if not volume_type_id:
            return {}
        specs = volume_types.get_volume_type_qos_specs(volume_type_id)
        return qos.backend_specs(specs.get('qos_specs'))

    def _limits(self, volume_type_id, size_gb):
        """SPDK limits for a type and size; validates before any change."""
        return qos.to_limits(self._backend_specs(volume_type_id), size_gb)

    def _lvol(self, alias):
        """Lvol ``alias`` this call just made or found; it must exist."""
        lvol = lvols.get(self.client, alias)
        if lvol is None:
            raise exception.VolumeBackendAPIException(
                data='lvol %s vanished' % alias)
        return lvol

    def _apply_qos(self, alias, limits, rb=None):
        """Put ``limits`` in force; with ``rb``, a failure restores the old.

        The undo is registered first: a failure after SPDK took the new
        limit (the read-back, the config save) must not leave it in force
        on a volume whose retype or extend is reported failed.
        """
        lvol = self._lvol(alias)
        if rb is not None:
            old = qos_apply.in_force(self.client, lvol.uuid)
            rb.add('restore QoS of %s' % alias, qos_apply.apply,
                   self.client, self.exporter, lvol, old)
        qos_apply.apply(self.client, self.exporter, lvol, limits)
        self._persist(QOS_SUBSYSTEMS)

    def _persist(self, subsystems=None):
        """Save the target's config (spdk_saved_config) after a change.

        Called under the volume's lock, before the change is reported
        done, so a target restart brings back exports and QoS limits.
        ``subsystems``: only these changed (see ConfigSaver.save).
        """
        try:
            self.saver.save(subsystems)
        except saved_config.ConfigNotSaved as err:
            raise exception.VolumeBackendAPIException(data=str(err)) from err

    def _refuse_if_exported(self, lvol, volume):
        in_use = self.exporter.users(lvol)
        if in_use:
            LOG.info('Volume %(vol)s is still exported through %(users)s',
                     {'vol': volume.id, 'users': ', '.join(in_use)})
            raise exception.VolumeIsBusy(volume_name=volume.name)

    def _delete_lvol(self, alias):
        try:
            self.client.bdev_lvol_delete(alias)
        except rpc_exc.NotFound:
            LOG.debug('lvol %s was already gone', alias)

    def _create_lvol(self, volume, rb):
        """Create the empty lvol of ``volume``; return its alias.

        A seam for image paths: they create the target lvol this way.
        """
        lvs = self._pool(volume)
        alias = lvols.alias(lvs, volume.name)
        with rb.change('delete lvol %s' % alias, self._delete_lvol, alias):
            self.client.bdev_lvol_create(
                volume.name, lvols.size_in_mib(volume.size), lvs_name=lvs,
                thin_provision=self.configuration.spdk_thin_provision,
                clear_method=self.configuration.spdk_lvol_clear_method)
        return alias

    def _clone(self, snapshot_alias, volume, rb):
        """Thin clone of a snapshot lvol, named after ``volume``.

        Metadata only: the clone shares every cluster with the snapshot.
        """
        lvs = snapshot_alias.partition('/')[0]
        alias = lvols.alias(lvs, volume.name)
        with rb.change('delete clone %s' % alias, self._delete_lvol, alias):
            self.client.bdev_lvol_clone(snapshot_alias, volume.name)
        return alias

    def _finish(self, alias, volume, limits, size_mib=None):
        """Grow a new lvol to the volume's size, then apply its QoS.

        ``size_mib``: the size of the snapshot a clone was just made of
        (its size too); the clone is then neither read back nor has any
        QoS yet (a new bdev), which saves two round trips.
        """
        if size_mib is None:
            size_mib = self._lvol(alias).size_mib
            apply_qos = self._apply_qos
        else:
            apply_qos = self._new_qos
        wanted = lvols.size_in_mib(volume.size)
        if size_mib < wanted:
            self.client.bdev_lvol_resize(alias, wanted)
        apply_qos(alias, limits)

    def _new_qos(self, alias, limits):
        """QoS of an lvol this call created: SPDK starts it with none.

        Only non-zero limits need setting, reading back and saving: an
        lvol itself lives in its lvstore's metadata, not in the config.
        """
        if any(limits.values()):
            self._apply_qos(alias, limits)

    def _marker(self, lvol):
        """The marker of deleted snapshot ``lvol``, or None."""
        return lvols.get(self.client, lvols.alias(
            lvol.lvs, lvols.retired_marker_name(lvol.uuid)))

    def _drop_hidden(self, alias):
        """Delete snapshot ``alias`` Cinder has no record of, if unneeded.

        Hidden clone snapshots and deleted snapshots (with a marker) go;
        with one clone left SPDK folds the snapshot into it (metadata
        only). A parent that has no record either is checked next.
        Returns the first ancestor that Cinder knows, if the walk got
        there.
        """
        while alias:
            lvs, _sep, name = alias.partition('/')
            with locks.locked(locks.slock(name)):
                snap = lvols.get(self.client, alias)
                if snap is None:
                    return None
                marker = None if lvols.is_hidden(name) else self._marker(snap)
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
                    self._delete_lvol(marker.alias)
            LOG.info('Deleted %s %s: at most one lvol still needed it',
                     'deleted snapshot' if marker else 'hidden clone snapshot',
                     alias)
            parent = snap.base_snapshot
            alias = lvols.alias(lvs, parent) if parent else None
        return None

    def _release_parent(self, lvs, parent):
        """After an lvol stopped using ``parent``: drop what nothing needs.

        Hidden clone snapshots, then an image cache base with no clone.
        """
        if not parent:
            return
        alias = self._drop_hidden(lvols.alias(lvs, parent))
        if alias and image_cache.is_base(alias.partition('/')[2]):
            self.image_cache.release(alias)

    # -- volumes ---------------------------------------------------------

    def create_volume(self, volume):
        validation.check_volume(volume)
        self._refuse_host_copy(volume)
        limits = self._limits(volume.volume_type_id, volume.size)
        with locks.locked(locks.vlock(volume.id)), \
                errors.translated('create volume %s' % volume.id), \
                rollback.Rollback('create volume %s' % volume.id) as rb:
            alias = self._create_lvol(volume, rb)
            self._new_qos(alias, limits)
        return None

    def delete_volume(self, volume):
        """Delete the lvol; a missing one is success, an exported one busy."""
        with locks.locked(locks.vlock(volume.id)), \
                errors.translated('delete volume %s' % volume.id):
            lvol = self._find(volume)
            if lvol is None:
                LOG.info('Volume %s has no lvol; nothing to delete',
                         volume.id)
                return
            self._refuse_if_exported(lvol, volume)
            try:
                self.client.bdev_lvol_delete(lvol.alias)
            except rpc_exc.NotFound:
                return
            except rpc_exc.Busy as err:
                raise exception.VolumeIsBusy(volume_name=volume.name) from err
            self._release_parent(lvol.lvs, lvol.base_snapshot)
            if any(lvol.rate_limits.values()):
                # Its QoS limits must leave the saved config with it.
                self._persist(QOS_SUBSYSTEMS)

    def extend_volume(self, volume, new_size):
        """Grow the lvol; an attached guest sees it through its controller."""
        validation.check_size(new_size, 'new size')
        limits = self._limits(volume.volume_type_id, new_size)
        with locks.locked(locks.vlock(volume.id)), \
                errors.translated('extend volume %s' % volume.id), \
                rollback.Rollback('extend volume %s' % volume.id) as rb:
            lvol = self._get(volume)
            self.client.bdev_lvol_resize(lvol.alias,
                                         lvols.size_in_mib(new_size))
            rb.add('shrink %s back' % lvol.alias,
                   self.client.bdev_lvol_resize, lvol.alias, lvol.size_mib)
            self._apply_qos(lvol.alias, limits, rb)

    def create_volume_from_snapshot(self, volume, snapshot):
        validation.check_volume(volume)
        limits = self._limits(volume.volume_type_id, volume.size)
        with locks.locked(
                locks.vlock(volume.id),
                locks.slock(snapshot.name)), \
                errors.translated('create volume %s from snapshot %s'
                                  % (volume.id, snapshot.id)), \
                rollback.Rollback('create volume %s' % volume.id) as rb:
            snap = self._get_snapshot(snapshot)
            alias = self._clone(snap.alias, volume, rb)
            self._finish(alias, volume, limits, snap.size_mib)
        return None

    def create_cloned_volume(self, volume, src_vref):
        """Hidden snapshot of the source, and a thin clone of it."""
        validation.check_volume(volume)
        limits = self._limits(volume.volume_type_id, volume.size)
        hidden = lvols.hidden_snapshot_name(volume.id)
        with locks.locked(
                locks.vlock(src_vref.id),
                locks.vlock(volume.id),
                locks.slock(hidden)), \
                errors.translated('clone volume %s to %s'
                                  % (src_vref.id, volume.id)), \
                rollback.Rollback('create volume %s' % volume.id) as rb:
            src = self._get(src_vref)
            snap_alias = lvols.alias(src.lvs, hidden)
            with rb.change('delete hidden snapshot %s' % snap_alias,
                           self._delete_lvol, snap_alias):
                self.client.bdev_lvol_snapshot(src.alias, hidden)
            alias = self._clone(snap_alias, volume, rb)
            self._finish(alias, volume, limits, src.size_mib)
        return None

    def revert_to_snapshot(self, context, volume, snapshot):
        """Swap the volume's lvol for a fresh clone of the snapshot.

        SPDK has no in-place revert: a clone of the snapshot takes the
        volume's name, then the old lvol is deleted. Its UUID changes,
        which is fine as Cinder only reverts detached volumes.
        """
        limits = self._limits(volume.volume_type_id, volume.size)
        with locks.locked(
                locks.vlock(volume.id),
                locks.slock(snapshot.name)), \
                errors.translated('revert volume %s to snapshot %s'
                                  % (volume.id, snapshot.id)), \
                rollback.Rollback('revert volume %s' % volume.id) as rb:
            old = self._get(volume)
            self._refuse_if_exported(old, volume)
            snap = self._get_snapshot(snapshot)
            tmp_name = volume.name + '-revert'
            self.client.bdev_lvol_clone(snap.alias, tmp_name)
            tmp = lvols.alias(snap.lvs, tmp_name)
            rb.add('delete %s' % tmp, self._delete_lvol, tmp)
            self._replace(old, tmp, volume, limits, rb, 'reverted')
        with errors.translated('clean up after revert'):
            self._release_parent(old.lvs, old.base_snapshot)

    def _replace(self, old, new_alias, volume, limits, rb, tag):
        """Give lvol ``new_alias`` the volume's name; delete ``old``.

        The old lvol steps aside under ``<volume name>-<tag>`` first, so
        each step can be undone until the final delete.
        """
        self._rename(old.alias, '%s-%s' % (volume.name, tag), rb)
        alias = self._rename(new_alias, volume.name, rb)
        self._finish(alias, volume, limits)
        self.client.bdev_lvol_delete(
            lvols.alias(old.lvs, '%s-%s' % (volume.name, tag)))
        return alias

    def _rename(self, alias, new_name, rb):
        lvs, _sep, old_name = alias.partition('/')
        self.client.bdev_lvol_rename(alias, new_name)
        new_alias = lvols.alias(lvs, new_name)
        rb.add('rename %s back' % new_alias, self.client.bdev_lvol_rename,
               new_alias, old_name)
        return new_alias

    # -- snapshots -------------------------------------------------------

    def create_snapshot(self, snapshot):
        with locks.locked(
                locks.vlock(snapshot.volume_id),
                locks.slock(snapshot.name)), \
                errors.translated('create snapshot %s' % snapshot.id):
            lvol = self._get(snapshot.volume)
            self.client.bdev_lvol_snapshot(lvol.alias, snapshot.name)
        return None

    def _find_snapshot(self, snapshot):
        """The lvol of ``snapshot``: by UUID when managed, else by name."""
        if snapshot.obj_attr_is_set('provider_id') and snapshot.provider_id:
            return lvols.get(self.client, snapshot.provider_id)
        return self._find(snapshot.volume, snapshot.name)

    def _get_snapshot(self, snapshot):
        snap = self._find_snapshot(snapshot)
        if snap is None:
            raise exception.VolumeBackendAPIException(
                data='lvol of snapshot %s not found' % snapshot.id)
        return snap

    def delete_snapshot(self, snapshot):
        """Delete a snapshot; with volumes still using it, mark it.

        With at most one dependent lvol SPDK deletes it (folded into that
        lvol: metadata only). With more, it stays for them, marked as
        deleted (see :func:`lvols.retired_marker_name`: SPDK cannot
        rename a snapshot), and goes with its second-last dependent
        (:meth:`_drop_hidden`). Never decoupled: that would copy its data
        into every clone, time and space growing with the volume size.
        A snapshot already marked or gone is success, so a retry after a
        lost answer does no harm.
        """
        with locks.locked(
                locks.vlock(snapshot.volume_id),
                locks.slock(snapshot.name)), \
                errors.translated('delete snapshot %s' % snapshot.id):
            snap = self._find_snapshot(snapshot)
            if snap is None:
                LOG.info('Snapshot %s has no lvol; nothing to delete',
                         snapshot.id)
                return
            if len(snap.clones) > 1:
                self._retire(snap, snapshot)
                return
            try:
                self.client.bdev_lvol_delete(snap.alias)
            except rpc_exc.NotFound:
                return
            except rpc_exc.NotPermitted:
                # SPDK counted more dependents than the lookup did.
                self._retire(snap, snapshot)
                return
            except rpc_exc.Busy as err:
                raise exception.SnapshotIsBusy(
                    snapshot_name=snapshot.name) from err
            if not snap.clones:
                self._release_parent(snap.lvs, snap.base_snapshot)

    def _retire(self, snap, snapshot):
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

    # -- manage / unmanage ------------------------------------------------

    def _lvol_from_ref(self, existing_ref):
        """The lvol ``existing_ref`` names, if Cinder may adopt it."""
        if 'source-id' in existing_ref:
            lvol = lvols.get(self.client, existing_ref['source-id'])
        elif 'source-name' in existing_ref:
            lvs, _sep, name = existing_ref['source-name'].rpartition('/')
            lvol = lvols.find(self.client, name,
                              [lvs] if lvs else self.lvstores)
        else:
            raise exception.ManageExistingInvalidReference(
                existing_ref=existing_ref,
                reason='give source-name (lvstore/lvol) or source-id')
        reason = None
        if lvol is None:
            reason = 'no such lvol'
        elif lvol.lvs not in self.lvstores:
            reason = 'lvol store %s is not managed here' % lvol.lvs
        else:
            reason = manageable.own_lvol_reason(lvol.name)
        if reason:
            raise exception.ManageExistingInvalidReference(
                existing_ref=existing_ref, reason=reason)
        return lvol

    def _volume_from_ref(self, existing_ref):
        lvol = self._lvol_from_ref(existing_ref)
        if lvol.is_snapshot:
            raise exception.ManageExistingInvalidReference(
                existing_ref=existing_ref,
                reason='lvol %s is a snapshot' % lvol.alias)
        return lvol

    def _snapshot_from_ref(self, snapshot, existing_ref):
        """The snapshot lvol named, which the snapshot's volume reads."""
        snap = self._lvol_from_ref(existing_ref)
        lvol = self._get(snapshot.volume)
        if snap.lvs != lvol.lvs or snap.name not in self._chain(lvol):
            raise exception.ManageExistingInvalidReference(
                existing_ref=existing_ref,
                reason='lvol %s is not a snapshot of volume %s (%s)'
                       % (snap.alias, snapshot.volume_id, lvol.alias))
        return snap

    def _chain(self, lvol):
        """Names of the snapshots ``lvol`` reads from, nearest first."""
        names = []
        while lvol is not None and lvol.base_snapshot:
            names.append(lvol.base_snapshot)
            lvol = lvols.get(self.client,
                             lvols.alias(lvol.lvs, lvol.base_snapshot))
        return names

    def manage_existing_get_size(self, volume, existing_ref):
        """Size in whole GiB, rounded up; manage grows the lvol to it."""
        with errors.translated('size of %s' % existing_ref):
            return manageable.size_gb(self._volume_from_ref(existing_ref))

    def manage_existing(self, volume, existing_ref):
        """Rename the lvol after the volume, grow it to whole GiB, QoS."""
        limits = self._limits(volume.volume_type_id, volume.size)
        with locks.locked(locks.vlock(volume.id)), \
                errors.translated('manage %s' % existing_ref), \
                rollback.Rollback('manage %s' % existing_ref) as rb:
            lvol = self._volume_from_ref(existing_ref)
            if self.exporter.users(lvol):
                raise exception.ManageExistingInvalidReference(
                    existing_ref=existing_ref,
                    reason='lvol %s is exported' % lvol.alias)
            alias = lvol.alias
            if lvol.name != volume.name:
                alias = self._rename(lvol.alias, volume.name, rb)
            self._finish(alias, volume, limits)
        return None

    def unmanage(self, volume):
        """Keep the lvol, renamed so it is not mistaken for a volume."""
        with locks.locked(locks.vlock(volume.id)), \
                errors.translated('unmanage volume %s' % volume.id):
            lvol = self._find(volume)
            if lvol is not None:
                self.client.bdev_lvol_rename(
                    lvol.alias, manageable.UNMANAGED_PREFIX + volume.name)

    def manage_existing_snapshot_get_size(self, snapshot, existing_ref):
        """Size in whole GiB of a snapshot lvol of the snapshot's volume."""
        with errors.translated('size of %s' % existing_ref):
            return manageable.size_gb(
                self._snapshot_from_ref(snapshot, existing_ref))

    def manage_existing_snapshot(self, snapshot, existing_ref):
        """Adopt a snapshot lvol the volume reads, by its UUID.

        SPDK cannot rename a snapshot, so the lvol keeps its name and
        the snapshot records its UUID as ``provider_id``.
        """
        with locks.locked(
                locks.vlock(snapshot.volume_id),
                locks.slock(snapshot.name)), \
                errors.translated('manage snapshot %s' % existing_ref):
            snap = self._snapshot_from_ref(snapshot, existing_ref)
            if self._marker(snap) is not None:
                raise exception.ManageExistingInvalidReference(
                    existing_ref=existing_ref,
                    reason='lvol %s is a deleted snapshot' % snap.alias)
        LOG.info('Snapshot %(id)s manages lvol %(alias)s',
                 {'id': snapshot.id, 'alias': snap.alias})
        return {'provider_id': snap.uuid}

    def unmanage_snapshot(self, snapshot):
        """Leave the snapshot lvol as it is (SPDK cannot rename it)."""
        with errors.translated('unmanage snapshot %s' % snapshot.id):
            snap = self._find_snapshot(snapshot)
        LOG.info('Snapshot %(id)s unmanaged; lvol %(alias)s is kept',
                 {'id': snapshot.id, 'alias': snap and snap.alias})

    def get_manageable_volumes(self, cinder_volumes, marker, limit, offset,
                               sort_keys, sort_dirs):
        """Every lvol that is not a snapshot, safe to manage or not."""
        managed = {vol.name: vol.id for vol in cinder_volumes}
        with errors.translated('list manageable volumes'):
            entries = [
                manageable.entry(lvol, managed, self.exporter.users(lvol))
                for lvol in manageable.backend_lvols(self.client,
                                                     self.lvstores)
                if not lvol.is_snapshot]
        return volume_utils.paginate_entries_list(
            entries, marker, limit, offset, sort_keys, sort_dirs)

    def get_manageable_snapshots(self, cinder_snapshots, marker, limit,
                                 offset, sort_keys, sort_dirs):
        """Every snapshot lvol, with a volume that reads it."""
        managed = {}
        for snap in cinder_snapshots:
            managed[snap.name] = snap.id
            if snap.provider_id:
                managed[snap.provider_id] = snap.id
        with errors.translated('list manageable snapshots'):
            found = manageable.backend_lvols(self.client, self.lvstores)
        entries = manageable.snapshot_entries(found, managed)
        return volume_utils.paginate_entries_list(
            entries, marker, limit, offset, sort_keys, sort_dirs)

    # -- retype and migration -----------------------------------------------

    def retype(self, ctxt, volume, new_type, diff, host):
        """Change QoS in place, or move a detached volume to another pool.

        A move to another backend, or of an attached volume, is left to
        Cinder's migration (``False``).
        """
        dest = self._destination(volume, host)
        if dest is None:
            return False, None
        limits = self._limits(new_type['id'] if new_type else None,
                              volume.size)
        if dest != self._pool(volume):
            if self._attached(volume):
                LOG.info('Volume %(vol)s is attached: the driver does not '
                         'move it to pool %(pool)s',
                         {'vol': volume.id, 'pool': dest})
                return False, None
            return self._move(volume, dest, limits), None
        with locks.locked(locks.vlock(volume.id)), \
                errors.translated('retype volume %s' % volume.id), \
                rollback.Rollback('retype volume %s' % volume.id) as rb:
            self._apply_qos(self._get(volume).alias, limits, rb)
        return True, None

    def migrate_volume(self, context, volume, host):
        """Move a volume to another lvol store of this target.

        SPDK copies the allocated clusters (see :mod:`migration`).
        ``(False, None)`` for any other destination or an lvol SPDK
        cannot copy: Cinder then tries its generic migration, which
        :meth:`before_volume_copy` refuses.
        """
        dest = self._destination(volume, host)
        if dest is None:
            LOG.info('Volume %(vol)s: %(host)s is not a pool of this '
                     'backend; left to Cinder\'s generic migration',
                     {'vol': volume.id, 'host': host.get('host')})
            return False, None
        limits = self._limits(volume.volume_type_id, volume.size)
        return self._move(volume, dest, limits), None

    def _destination(self, volume, host):
        """The lvol store of this backend ``host`` names, or None."""
        target = host.get('host') or ''
        backend = volume_utils.extract_host(volume.host, 'backend')
        pool = volume_utils.extract_host(target, 'pool')
        if (volume_utils.extract_host(target, 'backend') != backend or
                (pool and pool not in self.lvstores)):
            return None
        location = (host.get('capabilities') or {}).get('location_info')
        if location and location != 'spdk_vhost:%s:%s' % (
                self.target_id, pool or self.lvstores[0]):
            return None
        return pool or self.lvstores[0]

    @staticmethod
    def _attached(volume):
        return bool(volume.volume_attachment) or (
            volume.previous_status == 'in-use')

    def _move(self, volume, dest, limits):
        """Copy the volume's lvol into store ``dest``, then drop the old.

        True when the volume is in ``dest`` (already, on a retry), False
        when SPDK cannot copy it. The old lvol is deleted last; until
        then any failure deletes the copy and leaves the volume as it
        was.
        """
        what = 'migrate volume %s to %s' % (volume.id, dest)
        with locks.locked(locks.vlock(volume.id)), errors.translated(what):
            lvol = self._get(volume)
            if lvol.lvs == dest:
                LOG.info('Volume %(vol)s is already in %(dest)s',
                         {'vol': volume.id, 'dest': dest})
                return True
            reason = migration.unmovable_reason(self.client, lvol)
            if reason:
                LOG.warning('Volume %(vol)s cannot be moved by the driver: '
                            '%(reason)s', {'vol': volume.id,
                                           'reason': reason})
                return False
            self._refuse_if_exported(lvol, volume)
            # A copy an interrupted attempt completed, never adopted.
            self._delete_lvol(lvols.alias(dest, volume.name))
            parents = [locks.slock(item.name)
                       for item in migration.chain(self.client, lvol)]
            with locks.locked(*parents), \
                    rollback.Rollback(what) as rb, \
                    rollback.Cleanup(what) as tmp:
                copied = migration.copy(
                    self.client, lvol, volume.id, dest,
                    self.configuration.spdk_image_copy_timeout, rb, tmp)
                alias = self._rename(copied, volume.name, rb)
                if not self.configuration.spdk_thin_provision:
                    self.client.bdev_lvol_inflate(alias)
                self._apply_qos(alias, limits)
                self._delete_source(lvol)
            self._release_parent(lvol.lvs, lvol.base_snapshot)
            self._persist()
        LOG.info('Volume %(vol)s moved from %(old)s to %(new)s',
                 {'vol': volume.id, 'old': lvol.alias, 'new': alias})
        return True

    def _delete_source(self, lvol):
        """Delete the moved volume's old lvol: the point of no return.

        Raises only if it is still there, so a lost answer does not roll
        back (delete) the only copy left.
        """
        try:
            self.client.bdev_lvol_delete(lvol.alias)
        except rpc_exc.SpdkRpcError:
            if lvols.get(self.client, lvol.uuid) is not None:
                raise
            LOG.info('%s is gone although its deletion failed', lvol.alias)

    def before_volume_copy(self, context, src_vol, dest_vol, remote=None):
        """Refuse Cinder's generic migration of a volume of this backend.

        Called on the source's backend once the destination volume is
        made, before any copy; Cinder then deletes that volume.
        """
        raise exception.VolumeMigrationFailed(reason=HOST_COPY_REFUSED)

    @staticmethod
    def _refuse_host_copy(volume):
        """Refuse to be the new volume of Cinder's generic migration.

        Its ``migration_status`` is ``target:<source id>``: refused
        before anything is made or copied, whatever the source backend.
        """
        # An object built without a database row may lack the field.
        if (volume.obj_attr_is_set('migration_status') and
                volume.is_migration_target()):
            raise exception.VolumeMigrationFailed(reason=HOST_COPY_REFUSED)

    # -- export ----------------------------------------------------------

    def create_export(self, context, volume, connector):
        """Exports are per attachment: see initialize_connection."""

    def ensure_export(self, context, volume):
        """NVMe-oF subsystems live in the target's saved config."""

    def remove_export(self, context, volume):
        """Exports are per attachment: see terminate_connection."""

    def _is_local(self, connector):
        return isinstance(connector, dict) and (
            connector.get('spdk_target_id') == self.target_id)

    def initialize_connection(self, volume, connector):
        """Return DESIGN.md's ``spdk_vhost`` connection_info.

        Connector keys read (os-brick's ``get_connector_properties()``
        plus the SPDK vhost connector's additions):

        * ``spdk_target_id``: identity of the compute host's SPDK target;
          equal to this backend's ``spdk_target_id`` means hyperconverged,
          and the lvol is handed over as is (``transport: local``).
        * ``nqn``: the compute host's NVMe host NQN; the only host the
          volume's NVMe-oF subsystem admits (required unless local).

        cinder-backup's connector (no ``spdk_target_id``) for a volume
        being backed up or restored gets a staged raw file instead
        (os-brick's ``local`` protocol): see :mod:`backup`.
        """
        kind = backup.staged_kind(volume, connector)
        if kind:
            return self._stage_volume(volume, kind)
        validation.check_connector(connector,
                                   need_nqn=not self._is_local(connector),
                                   need_target_id=True)
        access = 'ro' if self._read_only(volume) else 'rw'
        with locks.locked(locks.vlock(volume.id)), \
                errors.translated('attach volume %s' % volume.id), \
                rollback.Rollback('attach volume %s' % volume.id) as rb:
            lvol = self._get(volume)
            data = {'volume_id': volume.id, 'bdev': lvol.alias,
                    'lvol_uuid': lvol.uuid, 'access_mode': access,
                    'block_size': lvol.block_size}
            if self._is_local(connector):
                data['transport'] = 'local'
            else:
                host_nqn = export.require_host_nqn(connector)
                attached = export.host_attachments(volume, host_nqn,
                                                   export.ATTACHED)
                data.update(self.exporter.export(volume.name, lvol,
                                                 host_nqn, rb,
                                                 rekey=not attached))
                self._persist()
        return {'driver_volume_type': 'spdk_vhost', 'data': data}

    @staticmethod
    def _read_only(volume):
        if not volume.obj_attr_is_set('admin_metadata'):
            return False
        return volume.admin_metadata.get('readonly') == 'True'

    def terminate_connection(self, volume, connector, **kwargs):
        """Drop the host from the subsystem, and the subsystem when empty.

        ``connector`` None (force detach) removes every host. A host with
        another attachment of the volume (a multiattach volume's other
        guest there) stays admitted: True tells Cinder so.
        """
        kind = backup.staged_kind(volume, connector)
        if kind:
            return self._unstage_volume(volume, kind)
        if self._is_local(connector):
            return
        if connector is not None:
            validation.check_connector(connector, need_nqn=False)
        host_nqn = (connector or {}).get('nqn')
        if connector and not host_nqn:
            LOG.warning('Detaching volume %s from a connector without nqn; '
                        'nothing to remove', volume.id)
            return
        with locks.locked(locks.vlock(volume.id)), \
                errors.translated('detach volume %s' % volume.id):
            if host_nqn and len(export.host_attachments(volume,
                                                        host_nqn)) > 1:
                LOG.info('Volume %s stays exported to %s: another of its '
                         'attachments is there', volume.id, host_nqn)
                return True
            self.exporter.unexport(volume.name, host_nqn)
            self._persist()

    # -- stats -------------------------------------------------------------

    @staticmethod
    def _provisioned(store, bdevs):
        """Bytes the lvols of ``store`` may hold.

        A volume its whole size; a snapshot, with or without a Cinder
        record (hidden and deleted ones too), only the clusters it holds:
        it never grows, and what it shares is counted once. Markers of
        deleted snapshots hold nothing.
        """
        total = 0
        for bdev in bdevs:
            info = bdev.get('driver_specific', {}).get('lvol', {})
            if (info.get('lvol_store_uuid') != store['uuid'] or
                    lvols.is_marker(lvols.from_bdev(bdev).name)):
                continue
            if info.get('snapshot'):
                total += ((info.get('num_allocated_clusters') or 0) *
                          store['cluster_size'])
            else:
                total += bdev['num_blocks'] * bdev['block_size']
        return total

    def _pool_stats(self, lvs, bdevs):
        store = self.client.bdev_lvol_get_lvstores(lvs_name=lvs)[0]
        cluster = store['cluster_size']
        provisioned = self._provisioned(store, bdevs)
        conf = self.configuration
        return {
            'pool_name': lvs,
            'total_capacity_gb': round(
                store['total_data_clusters'] * cluster / lvols.GIB, 2),
            'free_capacity_gb': round(
                store['free_clusters'] * cluster / lvols.GIB, 2),
            'provisioned_capacity_gb': round(provisioned / lvols.GIB, 2),
            'reserved_percentage': conf.reserved_percentage,
            'max_over_subscription_ratio':
                conf.max_over_subscription_ratio,
            'thin_provisioning_support': conf.spdk_thin_provision,
            'thick_provisioning_support': not conf.spdk_thin_provision,
            'QoS_support': True,
            'multiattach': True,
            'location_info': 'spdk_vhost:%s:%s' % (self.target_id, lvs),
        }

    def _update_volume_stats(self):
        with errors.translated('volume stats'):
            bdevs = self.client.bdev_get_bdevs()
            pools = [self._pool_stats(lvs, bdevs) for lvs in self.lvstores]
        self._stats = {
            'volume_backend_name': (
                self.configuration.safe_get('volume_backend_name') or
                self.__class__.__name__),
            'vendor_name': 'SPDK',
            'driver_version': self.VERSION,
            'storage_protocol': 'vhost-user',
            'pools': pools,
        }

    def get_volume_stats(self, refresh=False):
        if refresh or not self._stats:
            self._update_volume_stats()
        return self._stats
