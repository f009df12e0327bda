"""Cinder volume driver: thin SPDK lvols exported for vhost-user-blk.

Volumes are lvols in the configured lvol stores (one pool each);
snapshots and clones are SPDK metadata operations and are never inflated,
so their cost does not grow with the volume size. Attaching returns
the ``spdk_vhost`` connection_info (see :mod:`connections`).

The class is Cinder's interface and little else: it delegates to
:class:`pools.Pools` (lvol work), :class:`image_ops.ImageOps`,
:class:`backup.Backups`, :class:`manageable.Manager` (whose entry points
are :class:`manageable.ManageMethods`), :class:`migration.Mover`,
:class:`connections.Connections`, :class:`replica_health.Health` and
:class:`housekeeping.Sweeper`, each method framed by
:func:`operation.running`. Operators: see
doc/source/admin/cinder-driver.rst.
"""

from cinder import exception
from cinder import interface
from cinder.volume import driver
from oslo_log import log

from cinder_spdk_vhost import backup
from cinder_spdk_vhost import connections
from cinder_spdk_vhost import errors
from cinder_spdk_vhost import export
from cinder_spdk_vhost import housekeeping
from cinder_spdk_vhost import image_ops
from cinder_spdk_vhost import locks
from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import manageable
from cinder_spdk_vhost import migration
from cinder_spdk_vhost import operation
from cinder_spdk_vhost import options
from cinder_spdk_vhost import peers
from cinder_spdk_vhost import pools
from cinder_spdk_vhost import replica_catchup
from cinder_spdk_vhost import replica_health
from cinder_spdk_vhost import replica_type
from cinder_spdk_vhost import replication
from cinder_spdk_vhost import stats
from cinder_spdk_vhost import target_rpcs
from cinder_spdk_vhost import validation
from spdk_vhost_core import exception as rpc_exc
from spdk_vhost_core import options as rpc_options
from spdk_vhost_core import spdk_rpc
from spdk_vhost_core import validation as brick_validation

LOG = log.getLogger(__name__)

VERSION = '1.0.0'


@interface.volumedriver
class SpdkVhostDriver(manageable.ManageMethods, driver.VolumeDriver):
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
    # Members of a [DEFAULT] cluster on several controllers serve one
    # backend: every lock is cinder.coordination's (see locks), and
    # validation.check_cluster refuses what they could not share.
    SUPPORTS_ACTIVE_ACTIVE = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.configuration.append_config_values(rpc_options.rpc_opts)
        self.configuration.append_config_values(rpc_options.agent_opts)
        self.configuration.append_config_values(options.driver_opts)
        self.client = None
        self.exporter = None
        self.target_id = None

    @staticmethod
    def get_driver_options():
        return (rpc_options.rpc_opts + rpc_options.agent_opts +
                options.driver_opts)

    # -- setup -----------------------------------------------------------

    def do_setup(self, context):
        """Build the RPC client and the parts; nothing is asked yet."""
        conf = self.configuration
        validation.check_config(conf, self.cluster_name)
        validation.check_tools(conf)
        validation.warn_rebuild_room(conf)
        if conf.spdk_rpc_address is None and not conf.spdk_agent_url:
            brick_validation.warn_if_world_writable(conf.spdk_rpc_socket)
        self.client = spdk_rpc.SpdkClient.from_conf(conf)
        self.exporter = export.NvmfExport(self.client, conf)
        self.target_id = peers.target_id(conf)
        self.pools = pools.Pools(self.client, conf, self.exporter)
        self.manager = manageable.Manager(self.pools)
        self.replicas = replication.Replicas(
            self.pools, peers.from_conf(conf, self.target_id),
            self.target_id)
        self.health = replica_health.Health(self.replicas, self.host,
                                            self.cluster_name)
        if self.cluster_name:
            self.pools.tally.resync_every = 1
        self.images = image_ops.ImageOps(self.pools, self.replicas)
        self.backups = backup.Backups(self.pools, self.replicas)
        self.mover = migration.Mover(self.pools, self.replicas)
        self.connections = connections.Connections(
            self.pools, self.backups, self.replicas)
        self.sweeper = housekeeping.Sweeper(
            self.images, self.pools, self.replicas.peers,
            replica_catchup.Catchup(self.replicas, self.host,
                                    self.cluster_name))

    def check_for_setup_error(self):
        """Refuse to start on an unusable target, with one clear reason."""
        methods = target_rpcs.check_target(self.client, self.configuration)
        self.exporter.has_vhost = target_rpcs.VHOST_LIST in methods
        with errors.translated('preparing the target'):
            self.exporter.ensure_transport()
            self.images.sweep_scratch()
            self.pools.sweep()
        for peer in self.replicas.peers:
            if peer.check():
                self.sweeper.catch_up(peer)
        self.sweeper.start(self.configuration.spdk_sweep_interval)

    # -- volumes ---------------------------------------------------------

    def create_volume(self, volume):
        validation.check_volume(volume)
        migration.refuse_host_copy(volume)
        self.replicas.check_room(volume)
        limits = self.pools.limits(volume.volume_type_id, volume.size)
        with operation.running('create volume %s' % volume.id,
                               locks.vlock(volume.id)) as rb:
            alias = self.pools.create_lvol(
                volume, rb, size_mib=replica_type.lvol_mib(volume))
            self.pools.new_qos(alias, limits)
            self.replicas.place(volume, limits, rb)
        return None

    def delete_volume(self, volume):
        """Delete the lvol; a missing one is success, an exported one busy.

        A replicated volume's other copies go first; an away peer's when
        it answers again (:mod:`replica_catchup`).
        """
        with operation.running('delete volume %s' % volume.id,
                               locks.vlock(volume.id)):
            lvol = self.pools.find(volume)
            if lvol is not None:
                self.pools.refuse_if_exported(lvol, volume)
            if replica_type.copies(volume) > 1:
                self.replicas.delete(volume)
            if lvol is None:
                LOG.info('Volume %s has no lvol; nothing to delete',
                         volume.id)
                return
            try:
                self.client.bdev_lvol_delete(lvol.alias)
            except rpc_exc.NotFound:
                return
            except rpc_exc.Busy as err:
                raise exception.VolumeIsBusy(volume_name=volume.name) from err
            self.pools.release_parent(lvol.lvs, lvol.base_snapshot)
            if any(lvol.rate_limits.values()):
                # Its QoS limits must leave the saved config with it.
                self.pools.persist(pools.QOS_SUBSYSTEMS)

    def extend_volume(self, volume, new_size):
        """Grow the lvol; an attached guest sees it through its controller."""
        validation.check_size(new_size, 'new size')
        limits = self.pools.limits(volume.volume_type_id, new_size)
        with operation.running('extend volume %s' % volume.id,
                               locks.vlock(volume.id)) as rb:
            lvol = self.pools.get(volume)
            self.pools.grow(lvol, replica_type.lvol_mib(volume, new_size),
                            limits, rb)
            self.replicas.extend(volume, lvol, new_size, limits, rb)

    def create_volume_from_snapshot(self, volume, snapshot):
        validation.check_volume(volume)
        replica_type.check_layout(snapshot.volume, volume)
        self.replicas.check_room(volume)
        limits = self.pools.limits(volume.volume_type_id, volume.size)
        with operation.running('create volume %s from snapshot %s'
                               % (volume.id, snapshot.id),
                               locks.vlock(volume.id),
                               locks.slock(snapshot.name)) as rb:
            snap = self.pools.get_snapshot(snapshot)
            alias = self.pools.clone(snap.alias, volume, rb)
            self.pools.finish(alias, volume, limits, snap.size_mib,
                              replica_type.lvol_mib(volume))
            self.replicas.snapshots.clone(volume, snap.alias, alias, limits,
                                          rb)
        return None

    def create_cloned_volume(self, volume, src_vref):
        """Hidden snapshot of the source, and a thin clone of it."""
        validation.check_volume(volume)
        replica_type.check_layout(src_vref, volume)
        self.replicas.check_room(volume)
        limits = self.pools.limits(volume.volume_type_id, volume.size)
        hidden = lvols.hidden_snapshot_name(volume.id)
        with operation.running('clone volume %s to %s'
                               % (src_vref.id, volume.id),
                               locks.vlock(src_vref.id),
                               locks.vlock(volume.id),
                               locks.slock(hidden)) as rb:
            src = self.pools.get(src_vref)
            snap_alias = lvols.alias(src.lvs, hidden)
            self.replicas.snapshots.snapshot(
                src_vref, src, lambda: self._snapshot(src.alias, snap_alias,
                                                      rb))
            alias = self.pools.clone(snap_alias, volume, rb)
            self.pools.finish(alias, volume, limits, src.size_mib,
                              replica_type.lvol_mib(volume))
            self.replicas.snapshots.clone(volume, snap_alias, alias, limits,
                                          rb)
        return None

    def _snapshot(self, alias, snap_alias, rb):
        """Snapshot lvol ``alias`` as ``snap_alias``, undone by ``rb``."""
        with rb.change('delete snapshot %s' % snap_alias,
                       self.pools.delete_lvol, snap_alias):
            self.client.bdev_lvol_snapshot(alias,
                                           snap_alias.partition('/')[2])

    def revert_to_snapshot(self, context, volume, snapshot):
        """Swap the volume's lvol for a fresh clone of the snapshot.

        SPDK has no in-place revert: a clone of the snapshot takes the
        volume's name, then the old lvol is deleted. Its UUID changes,
        which is fine as Cinder only reverts detached volumes.
        """
        limits = self.pools.limits(volume.volume_type_id, volume.size)
        with operation.running('revert volume %s to snapshot %s'
                               % (volume.id, snapshot.id),
                               locks.vlock(volume.id),
                               locks.slock(snapshot.name)) as rb:
            old = self.pools.get(volume)
            self.pools.refuse_if_exported(old, volume)
            snap = self.pools.get_snapshot(snapshot)
            tmp_name = volume.name + '-revert'
            self.client.bdev_lvol_clone(snap.alias, tmp_name)
            tmp = lvols.alias(snap.lvs, tmp_name)
            rb.add('delete %s' % tmp, self.pools.delete_lvol, tmp)
            stale = self.replicas.snapshots.revert(volume, snap, tmp, limits,
                                                   rb)
            self.pools.replace(old, tmp, volume, limits, rb, 'reverted',
                               replica_type.lvol_mib(volume))
        with errors.translated('clean up after revert'):
            self.replicas.drop(stale)
            self.pools.release_parent(old.lvs, old.base_snapshot)

    # -- snapshots -------------------------------------------------------

    def create_snapshot(self, snapshot):
        """A snapshot of the lvol; of a replicated volume, its own copy's."""
        with operation.running('create snapshot %s' % snapshot.id,
                               locks.vlock(snapshot.volume_id),
                               locks.slock(snapshot.name)) as rb:
            lvol = self.pools.get(snapshot.volume)
            self.replicas.snapshots.snapshot(snapshot.volume, lvol, lambda: (
                self._snapshot(lvol.alias, lvols.alias(lvol.lvs,
                                                       snapshot.name), rb)))
        return None

    def delete_snapshot(self, snapshot):
        """Delete a snapshot; with volumes still using it, mark it.

        With at most one dependent lvol SPDK deletes it (folded into that
        lvol: metadata only). With more, it stays for them, marked as
        deleted (see :func:`lvols.retired_marker_name`: SPDK cannot
        rename a snapshot), and goes with its second-last dependent
        (:meth:`pools.Pools.drop_hidden`). Never decoupled: that would copy
        its data into every clone, time and space growing with the volume
        size.
        A snapshot already marked or gone is success, so a retry after a
        lost answer does no harm.
        """
        with operation.running('delete snapshot %s' % snapshot.id,
                               locks.vlock(snapshot.volume_id),
                               locks.slock(snapshot.name)):
            self.pools.delete_snapshot(snapshot)

    # -- images and backups (image_ops, backup) -------------------------

    def copy_image_to_volume(self, context, volume, image_service, image_id,
                             disable_sparse=False):
        self.images.copy_image_to_volume(context, volume, image_service,
                                         image_id, disable_sparse)

    def copy_volume_to_image(self, context, volume, image_service,
                             image_meta):
        self.images.copy_volume_to_image(context, volume, image_service,
                                         image_meta)

    def clone_image(self, context, volume, image_location, image_meta,
                    image_service):
        return self.images.clone_image(context, volume, image_location,
                                       image_meta, image_service)

    def create_export_snapshot(self, context, snapshot, connector):
        """Nothing to export: see initialize_connection_snapshot."""

    def remove_export_snapshot(self, context, snapshot):
        """Nothing exported: see terminate_connection_snapshot."""

    def initialize_connection_snapshot(self, snapshot, connector, **kwargs):
        return self.backups.stage_snapshot(snapshot, connector)

    def terminate_connection_snapshot(self, snapshot, connector, **kwargs):
        self.backups.unstage_snapshot(snapshot)

    # -- retype and migration (migration) --------------------------------

    def retype(self, ctxt, volume, new_type, diff, host):
        """Change QoS in place, or move a detached volume to another pool.

        A move to another backend, or of an attached volume, is left to
        Cinder's migration (``False``).
        """
        return self.mover.retype(volume, new_type, host)

    def migrate_volume(self, context, volume, host):
        """Move a volume to another lvol store of this target.

        SPDK copies the allocated clusters (see :mod:`migration`).
        ``(False, None)`` for any other destination or an lvol SPDK
        cannot copy: Cinder then tries its generic migration, which
        :meth:`before_volume_copy` refuses.
        """
        return self.mover.migrate_volume(volume, host), None

    def before_volume_copy(self, context, src_vol, dest_vol, remote=None):
        """Refuse Cinder's generic migration of a volume of this backend.

        Called on the source's backend once the destination volume is
        made, before any copy; Cinder then deletes that volume.
        """
        raise exception.VolumeMigrationFailed(
            reason=migration.HOST_COPY_REFUSED)

    # -- export ----------------------------------------------------------

    def create_export(self, context, volume, connector):
        """Exports are per attachment: see initialize_connection."""

    def ensure_export(self, context, volume):
        """NVMe-oF subsystems live in the target's saved config."""

    def remove_export(self, context, volume):
        """Exports are per attachment: see terminate_connection."""

    def initialize_connection(self, volume, connector):
        return self.connections.initialize(volume, connector)

    def terminate_connection(self, volume, connector, **kwargs):
        return self.connections.terminate(volume, connector)

    # -- stats -----------------------------------------------------------

    def _update_volume_stats(self):
        """One pool per lvol store, flat in the number of volumes.

        Also the driver's one periodic task: the degraded marks of
        replicated volumes (:mod:`replica_health`) are brought up to date.
        """
        with errors.translated('volume stats'):
            pool_stats = self.pools.stats(self.target_id)
            # The most copies (spdk:replicas) a volume could have now,
            # for a replicated type's capabilities:spdk_max_replicas.
            most = self.replicas.available()
        self._stats = stats.report(
            self.configuration.safe_get('volume_backend_name') or
            self.__class__.__name__, self.VERSION, pool_stats, most)
        if self.replicas.peers:
            self.health.survey()

    def get_volume_stats(self, refresh=False):
        if refresh or not self._stats:
            self._update_volume_stats()
        return self._stats
