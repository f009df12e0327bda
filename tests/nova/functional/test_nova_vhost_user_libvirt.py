"""Real libvirtd and QEMU (TCG) accept the driver's vhost-user XML.

A guest defined from Nova's config classes plus this package's (acpi,
shared memfd hugepage memory, a vhostuser boot disk) boots on a
qemu-storage-daemon vhost-user-blk export; a second disk is hot-attached
through the driver's connect + get_config path and Nova's Guest object,
used by the guest, then detached. A running guest without shared
hugepage memory is refused before the connector is asked for anything.

Needs libvirtd running as root after hugetlbfs is mounted
(tools/setup-hugepages.sh; ``virtlogd -d; libvirtd -d``).
"""

import os
import time
import uuid

import fixtures
from lxml import etree
from nova import context as nova_context
from nova.virt import fake
from nova.virt.libvirt import config as vconfig
from nova.virt.libvirt import guest as libvirt_guest
from oslo_config import fixture as config_fixture

from nova_vhost_user import brick
from nova_vhost_user import driver
from nova_vhost_user import exception as vhost_exception
from nova_vhost_user import libvirt_config
from nova_vhost_user import volume
from tests import base
from tests.functional import test_guest
from tests.guest import initramfs
from tests.nova.unit import nova_fakes as fakes

try:
    import libvirt
except ImportError:  # reported by setUp, with what to install
    libvirt = None

MiB = 1024 * 1024
GUEST_MIB = 256
URI = os.environ.get('SPDK_VHOST_TEST_LIBVIRT_URI', 'qemu:///system')
# Runs in the guest: check the boot disk, wait for the hot-attached one,
# use it, then report when it is gone again; stay up for the detach.
SCRIPT = '''
gt_check vda 4096 8192 boot-disk
while [ ! -e /sys/block/vdb ]; do usleep 100000; done
gt_check vdb 1048576 8192 hot-disk
gt_disk_info vdb
while [ -e /sys/block/vdb ]; do usleep 100000; done
gt_result hot gone
while :; do sleep 10; done
'''


def _open_to_qemu(path):
    """Let other users traverse path and its private temp parents.

    Only adds search permission, and only on directories this process
    owns (the test's temp dirs), never removes any.
    """
    while path != os.path.dirname(path):
        info = os.stat(path)
        if info.st_uid == os.getuid() and not info.st_mode & 0o001:
            os.chmod(path, (info.st_mode & 0o7777) | 0o011)
        path = os.path.dirname(path)


class ExportConnector(object):
    """Stands in for the SPDK connector: hands out qsd export sockets.

    The connector itself is tested against the SPDK emulator elsewhere;
    here the point is what libvirt and QEMU accept. It records calls so
    the refusal test can show nothing was asked of it.
    """

    def __init__(self, qsd):
        self.qsd = qsd
        self.connected = []

    def connect_volume(self, props):
        self.connected.append(props['volume_id'])
        return {'type': 'vhost_user_blk',
                'path': self.qsd.socket(props['volume_id']),
                'controller': props['volume_id'], 'cpumask': '0x1',
                'numa_node': props.get('numa_node')}

    def disconnect_volume(self, props, device_info, force=False):
        self.connected.remove(props['volume_id'])


class TestLibvirtVhostUser(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(400, gentle=True))
        self.assertIsNotNone(libvirt, 'libvirt-python is not installed')
        try:
            self.conn = libvirt.open(URI)
        except libvirt.libvirtError as err:
            self.fail('libvirtd not reachable at %s (start it after '
                      'tools/setup-hugepages.sh): %s' % (URI, err))
        self.addCleanup(self.conn.close)
        self.conf = self.useFixture(config_fixture.Config(volume.CONF))
        self.conf.config(group='libvirt', virt_type='qemu')
        self.conf.config(group='spdk_vhost', guest_max_queues=2,
                         guest_reconnect_timeout=5,
                         nova_check_reactor_overlap=False)
        self.qsd = self.useFixture(test_guest.QemuStorageDaemon(
            [('boot', 32 * MiB, 2), ('hot', 32 * MiB, 2)]))
        self.workdir = self.useFixture(fixtures.TempDir()).path
        # QEMU runs as libvirt-qemu: it must reach the sockets and files.
        for path in (self.workdir, self.qsd.path):
            _open_to_qemu(path)
        for name in ('boot', 'hot'):
            os.chmod(self.qsd.socket(name), 0o666)
        self.connector = ExportConnector(self.qsd)
        self.useFixture(fixtures.MockPatchObject(
            brick, 'get_connector', return_value=self.connector))
        self.driver = driver.LibvirtVhostUserDriver(fake.FakeVirtAPI())
        # A one-node host, whatever this one has: the NUMA choice is
        # unit-tested; volumes here are not encrypted.
        self.useFixture(fixtures.MockPatchObject(
            self.driver._host, 'get_capabilities',
            return_value=fakes.FakeHost(fakes.host_topology([0, 1])).caps))
        self.useFixture(fixtures.MockPatchObject(
            self.driver._host, 'find_secret', return_value=None))
        self.context = nova_context.get_admin_context()

    # -- helpers -------------------------------------------------------

    def _use_domain(self, dom):
        """Find test domains by object: Nova would look up its name."""
        self.useFixture(fixtures.MockPatchObject(
            self.driver._host, 'get_guest',
            return_value=libvirt_guest.Guest(dom)))

    def _disk(self, volume_id, dev, inst):
        conn = fakes.connection_info(volume_id)
        self.driver._connect_volume(self.context, conn, inst)
        disk_info = {'bus': 'virtio', 'dev': dev, 'type': 'disk'}
        return conn, self.driver._get_volume_config(conn, disk_info)

    def _domain_config(self, disks, hugepages):
        cfg = vconfig.LibvirtConfigGuest()
        cfg.virt_type = 'qemu'
        cfg.name = 'spdk-vhost-test-%s' % uuid.uuid4().hex[:8]
        cfg.uuid = str(uuid.uuid4())
        cfg.memory = GUEST_MIB * 1024
        cfg.vcpus = 2
        cfg.os_type = 'hvm'
        cfg.os_kernel = initramfs.find_kernel().image
        cfg.os_initrd = initramfs.make_initrd(
            os.path.join(self.workdir, 'initrd'), SCRIPT)
        os.chmod(cfg.os_initrd, 0o644)
        cfg.os_cmdline = initramfs.kernel_cmdline(disks=len(disks))
        cfg.features = [vconfig.LibvirtConfigGuestFeatureACPI()]
        if hugepages:
            cell = vconfig.LibvirtConfigGuestCPUNUMACell()
            cell.id, cell.cpus, cell.memory = 0, {0, 1}, GUEST_MIB * 1024
            cfg.cpu = vconfig.LibvirtConfigGuestCPU()
            cfg.cpu.numa = vconfig.LibvirtConfigGuestCPUNUMA()
            cfg.cpu.numa.cells = [cell]
            page = vconfig.LibvirtConfigGuestMemoryBackingPage()
            page.size_kb, page.nodeset = 2048, [0]
            nova_backing = vconfig.LibvirtConfigGuestMemoryBacking()
            nova_backing.hugepages = [page]
            cfg.membacking = libvirt_config.shared_hugepages(nova_backing,
                                                             memfd=True)
        for disk in disks:
            cfg.add_device(disk)
        serial = vconfig.LibvirtConfigGuestSerial()
        serial.type = 'file'
        serial.source_path = os.path.join(self.workdir, 'console.log')
        cfg.add_device(serial)
        return cfg

    def _start(self, cfg):
        dom = self.conn.defineXML(cfg.to_xml())
        self.addCleanup(dom.undefine)
        dom.create()
        self.addCleanup(self._destroy, dom)
        return dom

    @staticmethod
    def _destroy(dom):
        if dom.isActive():
            dom.destroy()

    def _console_result(self, key, timeout=180):
        path = os.path.join(self.workdir, 'console.log')
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            results = test_guest.qemu.Results(self._console(path), 0)
            if results.errors:
                self.fail('guest reported %s' % results.errors)
            if key in results.values:
                return results.values[key]
            time.sleep(0.5)
        self.fail('no %s from the guest after %d s:\n%s'
                  % (key, timeout, '\n'.join(self._console(path)[-30:])))

    @staticmethod
    def _console(path):
        try:
            with open(path, errors='replace') as f:
                return [line.rstrip('\r\n') for line in f]
        except FileNotFoundError:
            return []

    def _live_disks(self, dom):
        cfg = vconfig.LibvirtConfigGuest()
        cfg.parse_str(dom.XMLDesc(0))
        return [d.target_dev for d in cfg.devices
                if isinstance(d, vconfig.LibvirtConfigGuestDisk)]

    def _live_vhost_disk(self, dom, dev):
        root = etree.fromstring(dom.XMLDesc(0))
        for element in root.findall('devices/disk'):
            if element.find('target').get('dev') == dev:
                disk = libvirt_config.LibvirtConfigGuestVhostUserDisk()
                disk.parse_dom(element)
                return disk
        self.fail('no disk %s in the live domain' % dev)

    # -- tests ---------------------------------------------------------

    def test_boot_hot_attach_detach(self):
        inst = fakes.instance(topology=fakes.numa_topology(
            [(0, [0, 1], 2048)]))
        _conn, boot = self._disk('boot', 'vda', inst)
        dom = self._start(self._domain_config([boot], hugepages=True))
        self._use_domain(dom)
        self.assertIsNotNone(self._console_result('vda.verify@4096'))

        hot_conn, hot = self._disk('hot', 'vdb', inst)
        guest = libvirt_guest.Guest(dom)
        guest.attach_device(hot, persistent=True, live=True)

        self.assertEqual('ok', self._console_result('vdb.verify@1048576'))
        self.assertEqual('2', self._console_result('vdb.queues'))
        self.assertEqual(['vda', 'vdb'], self._live_disks(dom))
        # What libvirt kept is what the driver wrote.
        live = self._live_vhost_disk(dom, 'vdb')
        self.assertEqual((self.qsd.socket('hot'), 2, 5),
                         (live.source_path, live.driver_queues,
                          live.reconnect_timeout))

        # Detach the way Nova does: with the disk it parses back itself.
        guest.detach_device(guest.get_disk('vdb'), persistent=True,
                            live=True)
        self.assertEqual('gone', self._console_result('hot'))
        self.assertEqual(['vda'], self._live_disks(dom))
        self.driver._disconnect_volume(self.context, hot_conn, inst)
        self.assertEqual(['boot'], self.connector.connected)

    def test_guest_without_shared_hugepages_refused(self):
        dom = self._start(self._domain_config([], hugepages=False))
        self._use_domain(dom)
        inst = fakes.instance(topology=fakes.numa_topology(
            [(0, [0, 1], 2048)]))

        err = self.assertRaises(vhost_exception.VhostUserMemoryNotShared,
                                self._disk, 'hot', 'vdb', inst)

        self.assertIn('hw:mem_page_size', str(err))
        self.assertEqual([], self.connector.connected)
        self.assertEqual([], self._live_disks(dom))
