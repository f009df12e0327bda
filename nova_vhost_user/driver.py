"""Nova compute driver: libvirt plus SPDK vhost-user-blk volumes.

Nova has no plugin hook for volume drivers, and vhost-user needs more
than a volume driver (shared guest memory, this host's SPDK identity in
the volume connector), so the supported way in is this subclass, run by
``nova-compute-spdk-vhost`` (see :mod:`nova_vhost_user.cmd`) with
``compute_driver = spdk_vhost.LibvirtVhostUserDriver``.
"""

import functools

from nova import exception
from nova.virt import block_device as driver_block_device
from nova.virt.libvirt import driver as libvirt_driver
from oslo_log import log as logging

from nova_vhost_user import brick
from nova_vhost_user import exception as vhost_exception
from nova_vhost_user import libvirt_config
from nova_vhost_user import memory
from nova_vhost_user import migration
from nova_vhost_user import reactors
from nova_vhost_user import rpc_access
from nova_vhost_user import spdk_memory
from nova_vhost_user import volume
from os_brick_connector import conf_check
from os_brick_connector import connector_errors
from spdk_vhost_core import exception as spdk_exception
from spdk_vhost_core import spdk_rpc
from spdk_vhost_core import spdk_version
from spdk_vhost_core import validation

CONF = volume.CONF
LOG = logging.getLogger(__name__)

VOLUME_DRIVER = 'nova_vhost_user.volume.LibvirtVhostUserBlkVolumeDriver'


def _is_vhost(connection_info):
    return connection_info.get('driver_volume_type') == volume.DRIVER_TYPE


class LibvirtVhostUserDriver(libvirt_driver.LibvirtDriver):
    """LibvirtDriver that can attach SPDK volumes over vhost-user-blk."""

    def __init__(self, virtapi, read_only=False):
        super().__init__(virtapi, read_only)
        # Nova loads volume drivers on demand from this table; adding the
        # entry is all it takes for connect, get_config and disconnect.
        libvirt_driver.VOLUME_DRIVERS.setdefault(volume.DRIVER_TYPE,
                                                 VOLUME_DRIVER)

    def init_host(self, host):
        super().init_host(host)
        self._check_spdk_options()
        conf = CONF.spdk_vhost
        if conf.spdk_rpc_address is None:
            self._check_qemu_rpc_access(conf.spdk_rpc_socket)
        with spdk_rpc.SpdkClient.from_conf(conf) as client:
            self._check_spdk_version(client)
            if conf.nova_check_reactor_overlap:
                reactors.check_overlap(
                    client, self._host.get_online_cpus(),
                    refuse=conf.nova_refuse_reactor_overlap)
            if conf.nova_check_spdk_memory and conf.spdk_rpc_address is None:
                spdk_memory.check(client, conf.spdk_rpc_socket)

    def _check_qemu_rpc_access(self, socket_path):
        """Refuse to start where a guest's QEMU could drive SPDK."""
        capabilities = self._host.get_connection().getCapabilities()
        rpc_access.check(capabilities, CONF.libvirt.virt_type, socket_path)

    @staticmethod
    def _check_spdk_version(client):
        """Refuse an SPDK release the drivers do not support.

        An unreachable target is only a warning, as for the reactor
        check: nova-compute must still start.
        """
        try:
            spdk_version.check(client)
        except spdk_exception.UnsupportedSpdkVersion as err:
            raise exception.InvalidConfiguration(str(err)) from err
        except spdk_exception.SpdkRpcError as err:
            LOG.warning('Could not check the SPDK target\'s version: %s',
                        err)

    @staticmethod
    def _check_spdk_options():
        """Refuse to start with [spdk_vhost] options the connector rejects.

        Better at start, naming the option, than at a tenant's first
        attach.
        """
        conf = CONF.spdk_vhost
        try:
            conf_check.check_conf(conf)
        except connector_errors.InvalidConnectorConfig as err:
            raise exception.InvalidConfiguration(str(err)) from err
        if conf.spdk_rpc_address is None:
            validation.warn_if_world_writable(conf.spdk_rpc_socket)

    def get_volume_connector(self, instance):
        """Nova's connector properties plus this host's SPDK identity.

        Used for every volume type, so nothing of the SPDK part may fail
        it: without the SPDK keys, iSCSI or RBD volumes still attach, and
        the SPDK Cinder driver refuses the connector, saying why. The
        identity itself is read without an RPC (see host_identity).
        """
        props = super().get_volume_connector(instance)
        try:
            props.update(brick.get_connector_properties(CONF.host))
        except Exception as err:  # see the docstring
            LOG.warning('This host cannot attach SPDK volumes: its SPDK '
                        'connector properties failed (%(type)s: %(err)s). '
                        'Other volume types are not affected.',
                        {'type': type(err).__name__, 'err': err})
        return props

    def _get_guest_memory_backing_config(self, inst_topology, numatune,
                                         flavor, image_meta):
        """Make hugepage memory shared, so vhost-user disks can be added.

        Shared access cannot be turned on in a running guest, and volumes
        may be attached at any time, so every hugepage guest gets it.
        """
        membacking = super()._get_guest_memory_backing_config(
            inst_topology, numatune, flavor, image_meta)
        if membacking is None or not membacking.hugepages:
            return membacking
        return libvirt_config.shared_hugepages(
            membacking,
            memfd=(CONF.spdk_vhost.guest_memory_source == 'memfd' and
                   CONF.libvirt.virt_type in ('qemu', 'kvm')))

    def _connect_volume(self, context, connection_info, instance,
                        encryption=None):
        """Refuse a guest SPDK cannot serve, before any controller exists."""
        if _is_vhost(connection_info):
            problem = self._guest_memory_problem(instance)
            if problem:
                raise vhost_exception.VhostUserMemoryNotShared(
                    volume_id=driver_block_device.get_volume_id(
                        connection_info),
                    problem=problem)
        super()._connect_volume(context, connection_info, instance,
                                encryption=encryption)

    def _should_disconnect_target(self, context, instance, multiattach,
                                  vol_driver, volume_id):
        """Always for an SPDK volume: each guest has its own controller.

        Nova skips the disconnect of a multiattach volume still attached
        to another guest of this host, since most drivers share one host
        connection among them. Here that would leave the detached guest's
        controller behind; the connector removes only that controller and
        keeps the bdev (and NVMe-oF link) the other guest still uses.
        """
        if isinstance(vol_driver, volume.LibvirtVhostUserBlkVolumeDriver):
            return True
        return super()._should_disconnect_target(
            context, instance, multiattach, vol_driver, volume_id)

    def _guest_memory_problem(self, instance):
        """A running guest is judged by its live XML, others by flavor.

        A guest that is not running is (re)defined from its flavor by the
        next start, hard reboot or migration, with this driver's memory.
        """
        try:
            guest = self._host.get_guest(instance)
        except exception.InstanceNotFound:
            guest = None
        if guest is not None and guest.is_active():
            return memory.domain_problem(guest.get_xml_desc())
        return memory.instance_problem(instance)

    def check_can_live_migrate_source(self, context, instance,
                                      dest_check_data,
                                      block_device_info=None):
        """Refuse hyperconverged volumes first: they cannot move."""
        problem = migration.local_volume_problem(block_device_info)
        if problem:
            raise exception.MigrationPreCheckError(reason=problem)
        return super().check_can_live_migrate_source(
            context, instance, dest_check_data,
            block_device_info=block_device_info)

    def _live_migration_operation(self, context, instance, dest,
                                  block_migration, migrate_data, guest,
                                  device_names):
        """Send the destination's vhost sockets and shared memory.

        Nova's own rewrite of volume disks skips vhostuser ones (it
        matches ``<serial>``, which they cannot have), and it drops the
        shared memory backing: see :mod:`nova_vhost_user.migration`.
        """
        bdms = migrate_data.bdms if 'bdms' in migrate_data else []
        guest = migration.DestinationXmlGuest(guest, functools.partial(
            migration.update_vhost_disks, bdms=bdms,
            get_volume_config=self._get_volume_config))
        return super()._live_migration_operation(
            context, instance, dest, block_migration, migrate_data, guest,
            device_names)

    def extend_volume(self, context, connection_info, instance,
                      requested_size):
        """Online extend without libvirt's block resize.

        libvirt cannot resize a vhostuser disk (QEMU has no block node for
        it); SPDK resizes the bdev and pushes the new capacity to the
        guest through the vhost-user-blk config-change notification.
        """
        if not _is_vhost(connection_info):
            return super().extend_volume(context, connection_info, instance,
                                         requested_size)
        volume_id = driver_block_device.get_volume_id(connection_info)
        new_size = self._extend_volume(connection_info, instance,
                                       requested_size)
        if new_size is None:
            raise exception.VolumeExtendFailed(
                volume_id=volume_id,
                reason='the SPDK connector did not report a new size')
        LOG.info('Extended SPDK vhost volume %(volume)s to %(size)d bytes',
                 {'volume': volume_id, 'size': new_size}, instance=instance)
