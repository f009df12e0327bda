"""Live migration of guests with vhost-user-blk volumes.

Nova points each volume's disk at the destination's device by matching
the disk's ``<serial>`` (``nova.virt.libvirt.migration._update_volume_xml``),
and libvirt refuses ``<serial>`` on a vhostuser disk: without this module
the destination QEMU would be given the *source's* vhost socket path. So
vhostuser disks are found by the alias Nova gives every volume
(``ua-<volume id>``), or else by their target device, and get the
destination's ``<source>`` and queue count.

Nova also strips ``<access>``, ``<source>`` and ``<allocation>`` from the
memory backing of the XML it sends (it only knows file-backed memory
there), which would give the destination a private-memory guest that
libvirt refuses to migrate into ("memoryBacking source 'none' doesn't
match") and SPDK could not serve: :func:`keep_memory_backing` puts back
the source's.

Hyperconverged volumes (``transport: local``) cannot move: their lvol is
claimed by this host's vhost layer (see :mod:`spdk_vhost_core.volume_bdev`),
so it cannot be exported to the destination while the guest runs here,
and a guest left reading through this host would pin it all the same.
:func:`local_volume_problem` names them for the source pre-check.
"""

from lxml import etree
from nova.virt import block_device as driver_block_device
from nova.virt.libvirt import config as vconfig
from nova.virt.libvirt import guest as libvirt_guest

DRIVER_TYPE = 'spdk_vhost'
LOCAL = 'local'


def _is_vhost(connection_info):
    return (isinstance(connection_info, dict) and
            connection_info.get('driver_volume_type') == DRIVER_TYPE)


def local_volume_problem(block_device_info):
    """Why the volumes of ``block_device_info`` cannot move, or None."""
    mapping = (block_device_info or {}).get('block_device_mapping') or []
    local = []
    for bdm in mapping:
        info = bdm.get('connection_info')
        if _is_vhost(info) and (info.get('data') or {}).get(
                'transport') == LOCAL:
            local.append(driver_block_device.get_volume_id(info))
    if not local:
        return None
    return ('SPDK vhost volume(s) %s are hyperconverged (transport local): '
            'their data is on this host\'s SPDK target, which cannot export '
            'them while this host serves the guest, and the instance '
            'would depend on this host all the same. Only volumes of a '
            'storage node backend (transport tcp or rdma) can move with '
            'the instance' % ', '.join(sorted(local)))


def _vhost_bdms(bdms):
    return [bdm for bdm in bdms or ()
            if 'connection_info_json' in bdm and
            _is_vhost(bdm.connection_info)]


def _find_disk(doc, bdm):
    alias = vconfig.make_libvirt_device_alias(
        driver_block_device.get_volume_id(bdm.connection_info))
    disks = doc.findall("./devices/disk[@type='vhostuser']")
    for disk in disks:
        found = disk.find('alias')
        if found is not None and found.get('name') == alias:
            return disk
    for disk in disks:
        target = disk.find('target')
        if target is not None and target.get('dev') == bdm.dev:
            return disk
    return None


def update_vhost_disks(xml, bdms, get_volume_config):
    """``xml`` with each vhostuser volume pointed at the destination.

    ``bdms`` are ``migrate_data.bdms``: their connection_info is the
    destination's, completed by its ``pre_live_migration`` (socket path,
    queues). Only ``<source>`` and the driver's ``queues`` change: the
    guest-visible address stays.
    """
    wanted = _vhost_bdms(bdms)
    if not wanted:
        return xml
    doc = etree.fromstring(xml)
    for bdm in wanted:
        disk = _find_disk(doc, bdm)
        if disk is None:
            continue
        new = get_volume_config(bdm.connection_info,
                                bdm.as_disk_info()).format_dom()
        disk.replace(disk.find('source'), new.find('source'))
        queues = new.find('driver').get('queues')
        driver = disk.find('driver')
        if driver is not None and queues is not None:
            driver.set('queues', queues)
    return etree.tostring(doc, encoding='unicode')


_MEMORY_CHILDREN = ('source', 'access', 'allocation', 'discard')


def keep_memory_backing(source_xml, dest_xml):
    """``dest_xml`` with the memory backing children of ``source_xml``.

    Only for hugepage memory (this driver's shared memory; Nova's
    file-backed memory never has hugepages) and only where Nova removed
    them all (a destination asking for file-backed memory gets Nova's).
    """
    dest = etree.fromstring(dest_xml)
    dest_backing = dest.find('./memoryBacking')
    src_backing = etree.fromstring(source_xml).find('./memoryBacking')
    if (dest_backing is None or src_backing is None or
            src_backing.find('hugepages') is None or
            any(dest_backing.find(name) is not None
                for name in _MEMORY_CHILDREN)):
        return dest_xml
    for child in src_backing:
        if child.tag in _MEMORY_CHILDREN:
            dest_backing.append(child)
    return etree.tostring(dest, encoding='unicode')


class DestinationXmlGuest(libvirt_guest.Guest):
    """The source guest, as the destination should get it.

    Nova's ``get_updated_guest_xml`` starts from the migratable XML of
    the guest it is given, so this is where the vhostuser disks get the
    destination's sockets; everything else Nova does to it still applies,
    and what it does to the memory backing is undone in :meth:`migrate`.
    """

    def __init__(self, guest, rewrite):
        super().__init__(guest._domain)
        self._rewrite = rewrite

    def migrate(self, destination, destination_xml=None, **kwargs):
        if destination_xml is not None:
            destination_xml = keep_memory_backing(
                super().get_xml_desc(dump_migratable=True), destination_xml)
        return super().migrate(destination, destination_xml=destination_xml,
                               **kwargs)

    def get_xml_desc(self, dump_inactive=False, dump_sensitive=False,
                     dump_migratable=False):
        xml = super().get_xml_desc(dump_inactive=dump_inactive,
                                   dump_sensitive=dump_sensitive,
                                   dump_migratable=dump_migratable)
        return self._rewrite(xml) if dump_migratable else xml
