"""Errors the Nova side raises; each tells the operator what to change."""

from nova import exception


class VhostUserMemoryNotShared(exception.VolumeAttachFailed):
    """The guest's memory cannot be given to an SPDK vhost target.

    SPDK maps the guest's memory and only works when it is shared and
    hugepage-backed; plain memfd memory makes the SPDK target segfault
    (seen with v26.05), taking every guest of the host down with it. So
    this is raised before any SPDK controller is made.
    """

    msg_fmt = ('Volume %(volume_id)s could not be attached. Reason: '
               'vhost-user volumes need guest memory that is shared and '
               'backed by hugepages, and this guest has %(problem)s. Use '
               'a flavor with hw:mem_page_size (e.g. "large" or "2MB") and '
               'compute_driver = spdk_vhost.LibvirtVhostUserDriver '
               '(nova-compute-spdk-vhost), then resize the server (or hard '
               'reboot it if the flavor already asks for hugepages): '
               'shared memory cannot be added to a running guest.')


class VhostUserBusUnsupported(exception.Invalid):
    """libvirt only has a virtio bus for vhost-user-blk disks."""

    msg_fmt = ('Volume %(volume_id)s is a vhost-user-blk disk, which only '
               'works on the virtio bus, not on %(bus)s: remove the '
               'hw_disk_bus image property or the disk_bus of the block '
               'device mapping.')
