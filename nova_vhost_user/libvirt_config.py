"""libvirt config objects Nova lacks: a vhost-user disk, memfd memory.

Nova's ``LibvirtConfigGuestDisk`` knows file, block, mount and network
sources only, and its memory backing knows ``<source type='file'/>`` only.
These subclasses add the missing parts and nothing else, so the rest of
Nova (which parses and formats its own classes) keeps working.
"""

from lxml import etree
from nova.virt.libvirt import config as vconfig

# What libvirt refuses on a vhostuser disk (checked with libvirt 9.0):
# Nova's disk code sets several of these on every volume.
_REJECTED_CHILDREN = frozenset(('serial', 'iotune', 'blockio', 'readonly',
                                'shareable', 'encryption'))
_REJECTED_DRIVER_ATTRS = ('cache', 'io', 'discard')


class LibvirtConfigGuestVhostUserDisk(vconfig.LibvirtConfigGuestDisk):
    """``<disk type='vhostuser'>`` served on a Unix socket.

    Read-only access and QoS are enforced by the SPDK controller, not by
    libvirt, which rejects ``<readonly/>`` and ``<iotune>`` here; the
    formatter drops whatever generic Nova code may have set of those.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.source_type = 'vhostuser'
        self.target_bus = 'virtio'
        self.driver_name = 'qemu'
        self.driver_format = 'raw'
        self.driver_queues = None
        self.reconnect_timeout = None

    def format_dom(self):
        dev = super().format_dom()
        for child in list(dev):
            if child.tag in _REJECTED_CHILDREN:
                dev.remove(child)
        driver = dev.find('driver')
        for attr in _REJECTED_DRIVER_ATTRS:
            driver.attrib.pop(attr, None)
        if self.driver_queues is not None:
            driver.set('queues', str(self.driver_queues))
        source = etree.Element('source', type='unix', path=self.source_path)
        if self.reconnect_timeout is not None:
            etree.SubElement(source, 'reconnect', enabled='yes',
                             timeout=str(self.reconnect_timeout))
        dev.insert(dev.index(dev.find('target')), source)
        return dev

    def parse_dom(self, xmldoc):
        super().parse_dom(xmldoc)
        driver = xmldoc.find('driver')
        if driver is not None and driver.get('queues') is not None:
            self.driver_queues = int(driver.get('queues'))
        source = xmldoc.find('source')
        if source is not None:
            self.source_path = source.get('path')
            reconnect = source.find('reconnect')
            if reconnect is not None and reconnect.get('enabled') == 'yes':
                self.reconnect_timeout = int(reconnect.get('timeout', 0))


class LibvirtConfigGuestMemoryBacking(vconfig.LibvirtConfigGuestMemoryBacking):
    """Nova's memory backing plus ``<source type='memfd'/>``.

    Nova only writes ``<source type='file'/>`` (for file-backed memory);
    memfd hugepages need no hugetlbfs mount reachable by QEMU.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.memfd = False

    @classmethod
    def from_nova(cls, membacking):
        """Copy of one of Nova's memory backings, as this class."""
        copy = cls()
        copy.__dict__.update(membacking.__dict__)
        copy.memfd = False
        return copy

    def format_dom(self):
        root = super().format_dom()
        if self.memfd and root.find('source') is None:
            source = etree.Element('source', type='memfd')
            access = root.find('access')
            if access is not None:
                access.addprevious(source)
            else:
                root.append(source)
        return root


def shared_hugepages(membacking, memfd):
    """Nova's hugepage memory backing, made shared for vhost-user.

    ``memfd``: back it with memfd (hugetlb) instead of a hugetlbfs file.
    """
    shared = LibvirtConfigGuestMemoryBacking.from_nova(membacking)
    shared.sharedaccess = True
    shared.memfd = memfd
    return shared
