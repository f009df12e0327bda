"""libvirt volume driver for ``driver_volume_type = spdk_vhost``.

The os-brick connector makes an SPDK vhost-blk controller (a Unix socket)
for the volume; this driver hands that socket to the guest as a
``<disk type='vhostuser'>``. QEMU then talks to SPDK directly: there is
no host block device, so nothing here goes through the host's kernel.
"""

import nova.conf
from nova import exception
from nova.virt import block_device as driver_block_device
from nova.virt.libvirt import config as vconfig
from nova.virt.libvirt.volume import volume as libvirt_volume
from oslo_log import log as logging

from nova_vhost_user import brick
from nova_vhost_user import exception as vhost_exception
from nova_vhost_user import libvirt_config
from nova_vhost_user import numa
from nova_vhost_user import options

CONF = nova.conf.CONF
options.register_opts(CONF)
LOG = logging.getLogger(__name__)

DRIVER_TYPE = 'spdk_vhost'


def queue_count(instance):
    """min(guest vCPUs, guest_max_queues): more hangs some guest kernels."""
    return max(1, min(instance.flavor.vcpus,
                      CONF.spdk_vhost.guest_max_queues))


def _data(connection_info):
    """``connection_info['data']``, refusing what Cinder never sends.

    A malformed record (a corrupted block device mapping, a hostile API
    caller) must fail as a Nova error naming the volume, not as a
    KeyError deep in the attach.
    """
    data = (connection_info.get('data')
            if isinstance(connection_info, dict) else None)
    if not isinstance(data, dict):
        volume_id = (connection_info.get('serial')
                     if isinstance(connection_info, dict) else None)
        raise exception.VolumeAttachFailed(
            volume_id=volume_id,
            reason='connection_info has no data dict: %.200r'
                   % (connection_info,))
    return data


def connector_properties(connection_info, instance):
    """What the connector gets: Cinder's data, plus whose attachment it is.

    A multiattach volume (Nova marks its connection_info) gets a
    controller per guest, told apart by ``attached_to``: the instance
    uuid, stable across retries and known again at detach. Any other
    volume keeps the one controller named after it.
    """
    properties = dict(_data(connection_info))
    if connection_info.get('multiattach'):
        properties['attached_to'] = instance.uuid
    return properties


class LibvirtVhostUserBlkVolumeDriver(libvirt_volume.LibvirtBaseVolumeDriver):
    """Attach SPDK volumes to libvirt guests as vhost-user-blk disks.

    Exceptions of connect/disconnect: ``VolumeAttachFailed`` for a
    connection_info without a ``data`` dict, ``InvalidVolumeAccessMode``
    and ``VolumeEncryptionNotSupported`` for what vhost-user cannot do;
    the connector's :class:`os_brick.exception.BrickException` classes
    (``InvalidConnectionProperties`` for malformed data, before any RPC;
    ``TargetError`` for a failure of the SPDK target) pass through
    unchanged.
    """

    def __init__(self, host):
        super().__init__(host, is_block_dev=False)
        self.connector = brick.get_connector()

    def _host_topology(self):
        return self.host.get_capabilities().host.topology

    def connect_volume(self, connection_info, instance):
        """Make the SPDK controller on the guest's NUMA node.

        What get_config needs later (socket, queue count) is kept in
        ``connection_info['data']``, which Nova saves with the attachment.
        """
        data = _data(connection_info)
        volume_id = driver_block_device.get_volume_id(connection_info)
        if data.get('encrypted'):
            # No host block device exists for an encryptor to work on.
            raise exception.VolumeEncryptionNotSupported(
                volume_type=DRIVER_TYPE, volume_id=volume_id)
        if data.get('access_mode') not in (None, 'rw', 'ro'):
            raise exception.InvalidVolumeAccessMode(
                access_mode=str(data['access_mode'])[:80])
        properties = connector_properties(connection_info, instance)
        properties['numa_node'] = numa.guest_numa_node(
            instance, self._host_topology())
        device_info = self.connector.connect_volume(properties)
        LOG.debug('Connected SPDK vhost volume %(volume)s: %(info)s',
                  {'volume': volume_id, 'info': device_info},
                  instance=instance)
        data['device_path'] = device_info['path']
        data['vhost_controller'] = device_info['controller']
        data['vhost_queues'] = queue_count(instance)

    def disconnect_volume(self, connection_info, instance, force=False):
        """Delete the controller; SPDK refuses while QEMU still uses it."""
        self.connector.disconnect_volume(
            connector_properties(connection_info, instance), None,
            force=force)

    def extend_volume(self, connection_info, instance, requested_size):
        """Grow the bdev; SPDK tells the guest the new size itself."""
        return self.connector.extend_volume(
            connector_properties(connection_info, instance))

    def get_config(self, connection_info, disk_info):
        """The vhostuser disk, with none of what libvirt rejects on it.

        The base class is not called: most of what it sets (serial, cache,
        iotune, readonly, shareable, blockio, discard, encryption) is
        refused on a vhostuser disk. Read-only and QoS are enforced in
        SPDK instead; a multiattach volume needs no ``<shareable/>``:
        each guest has its own socket and there is no host image for QEMU
        to lock.
        """
        data = connection_info['data']
        volume_id = driver_block_device.get_volume_id(connection_info)
        if disk_info['bus'] != 'virtio':
            raise vhost_exception.VhostUserBusUnsupported(
                volume_id=volume_id, bus=disk_info['bus'])
        conf = libvirt_config.LibvirtConfigGuestVhostUserDisk()
        conf.source_device = disk_info['type']
        conf.target_dev = disk_info['dev']
        conf.source_path = data['device_path']
        conf.driver_queues = data.get('vhost_queues')
        conf.reconnect_timeout = CONF.spdk_vhost.guest_reconnect_timeout
        conf.alias = vconfig.make_libvirt_device_alias(volume_id)
        return conf
