"""The libvirt XML of vhost-user disks and shared hugepage memory."""

from lxml import etree
from nova.virt.libvirt import config as vconfig

from nova_vhost_user import libvirt_config
from tests import base

REJECTED = ('serial', 'iotune', 'blockio', 'readonly', 'shareable',
            'encryption')


def _disk(**attrs):
    disk = libvirt_config.LibvirtConfigGuestVhostUserDisk()
    disk.target_dev = 'vdb'
    disk.source_path = '/var/tmp/vhost/vhost-vol-1'
    for key, value in attrs.items():
        setattr(disk, key, value)
    return disk


class TestVhostUserDisk(base.TestCase):

    def _xml(self, disk):
        return etree.fromstring(disk.to_xml())

    def test_source_reconnect_queues_driver(self):
        root = self._xml(_disk(driver_queues=2, reconnect_timeout=10))

        self.assertEqual(('disk', 'vhostuser', 'disk'),
                         (root.tag, root.get('type'), root.get('device')))
        source = root.find('source')
        self.assertEqual({'type': 'unix',
                          'path': '/var/tmp/vhost/vhost-vol-1'},
                         dict(source.attrib))
        self.assertEqual({'enabled': 'yes', 'timeout': '10'},
                         dict(source.find('reconnect').attrib))
        self.assertEqual({'name': 'qemu', 'type': 'raw', 'queues': '2'},
                         dict(root.find('driver').attrib))
        self.assertEqual({'dev': 'vdb', 'bus': 'virtio'},
                         dict(root.find('target').attrib))

    def test_no_queues_no_reconnect_when_unset(self):
        root = self._xml(_disk())

        self.assertIsNone(root.find('driver').get('queues'))
        self.assertIsNone(root.find('source/reconnect'))

    def test_drops_everything_libvirt_rejects(self):
        encryption = vconfig.LibvirtConfigGuestDiskEncryption()
        encryption.format = 'luks'
        encryption.secret = (
            vconfig.LibvirtConfigGuestDiskEncryptionSecret())
        encryption.secret.type = 'passphrase'
        encryption.secret.uuid = '0b1c2d3e-0000-4000-8000-000000000001'
        disk = _disk(serial='vol-1', driver_cache='none', driver_io='native',
                     driver_discard='unmap', disk_total_iops_sec=1000,
                     logical_block_size='4096', readonly=True,
                     shareable=True, volume_encryption=encryption)

        root = self._xml(disk)

        self.assertEqual([], [c.tag for c in root if c.tag in REJECTED])
        self.assertEqual({'name': 'qemu', 'type': 'raw'},
                         dict(root.find('driver').attrib))

    def test_parse_round_trip(self):
        xml = _disk(driver_queues=3, reconnect_timeout=7,
                    alias='ua-vol-1').to_xml()
        parsed = libvirt_config.LibvirtConfigGuestVhostUserDisk()
        parsed.parse_str(xml)

        self.assertEqual(('vhostuser', '/var/tmp/vhost/vhost-vol-1', 3, 7,
                          'vdb', 'virtio', 'ua-vol-1'),
                         (parsed.source_type, parsed.source_path,
                          parsed.driver_queues, parsed.reconnect_timeout,
                          parsed.target_dev, parsed.target_bus,
                          parsed.alias))
        self.assertEqual(xml, parsed.to_xml())


class TestMemoryBacking(base.TestCase):

    def _nova_backing(self):
        page = vconfig.LibvirtConfigGuestMemoryBackingPage()
        page.size_kb = 2048
        page.nodeset = [0]
        nova = vconfig.LibvirtConfigGuestMemoryBacking()
        nova.hugepages = [page]
        nova.locked = True
        return nova

    def test_memfd_shared_keeps_nova_settings(self):
        backing = libvirt_config.LibvirtConfigGuestMemoryBacking.from_nova(
            self._nova_backing())
        backing.sharedaccess = True
        backing.memfd = True

        root = etree.fromstring(backing.to_xml())

        self.assertEqual(['hugepages', 'locked', 'source', 'access'],
                         [c.tag for c in root])
        self.assertEqual('memfd', root.find('source').get('type'))
        self.assertEqual('shared', root.find('access').get('mode'))
        self.assertEqual({'size': '2048', 'nodeset': '0', 'unit': 'KiB'},
                         dict(root.find('hugepages/page').attrib))

    def test_no_memfd_no_source(self):
        backing = libvirt_config.LibvirtConfigGuestMemoryBacking.from_nova(
            self._nova_backing())
        backing.sharedaccess = True

        root = etree.fromstring(backing.to_xml())

        self.assertIsNone(root.find('source'))
        self.assertEqual('shared', root.find('access').get('mode'))
