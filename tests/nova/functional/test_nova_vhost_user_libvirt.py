"""The attach path on real parts: Nova driver, SPDK connector, libvirt, QEMU.

The compute driver's volume driver uses the real ``SpdkVhostConnector``
against a real SPDK target, libvirtd
defines guests built from Nova's config classes, and QEMU (TCG) runs them
as ``libvirt-qemu``: the socket is usable only because the connector gave
it to QEMU's group. The ``connection_info`` comes from the real Cinder
volume manager and driver, run in their own process
(:mod:`testbed.service_process`), for both transports: ``local`` (the lvol
on the compute host's ``spdk_tgt``, which Cinder also drives) and ``tcp``
(a storage node's ``spdk_tgt`` exporting over real NVMe/TCP to a polling
compute ``vhost`` target).

Needs libvirtd running as root after hugetlbfs is mounted
(tools/setup-hugepages.sh, tools/start-libvirt.sh).
"""

import grp
import os
import shutil
import stat
import subprocess

import fixtures
from nova import context as nova_context
from nova.virt.libvirt import guest as libvirt_guest
from oslo_config import fixture as config_fixture

from nova_vhost_user import exception as vhost_exception
from testbed import net
from testbed import service_process
from tests import base
from tests.nova import compute
from tests.nova.functional import targets
from tests.nova import libvirt_guest as guests

try:
    import libvirt
except ImportError:  # reported by setUp, with what to install
    libvirt = None

URI = os.environ.get('SPDK_VHOST_TEST_LIBVIRT_URI', 'qemu:///system')
LVS = targets.LVS
HOST_NQN = ('nqn.2014-08.org.nvmexpress:uuid:'
            '2c5f39cb-3fa2-42e3-994f-c9b872cef4fc')
QEMU_USER = 'libvirt-qemu'
DISK = {'bus': 'virtio', 'type': 'disk'}
# Runs in the guest: check the boot disk, wait for the hot-attached one,
# use it, then report when it is gone again; stay up for the detach.
SCRIPT = '''
gt_check vda 4096 8192 boot-disk
while [ ! -e /sys/block/vdb ]; do usleep 100000; done
gt_check vdb 1048576 8192 hot-disk
gt_disk_info vdb
gt_result vdb.serial "[$(cat /sys/block/vdb/serial)]"
while [ -e /sys/block/vdb ]; do usleep 100000; done
gt_result hot gone
while :; do sleep 10; done
'''


def cinder_target(test, name):
    """A target the Cinder driver may use: ``spdk_tgt`` (it needs every RPC).

    Thin 1 GiB volumes on a sparse 4 GiB lvstore.
    """
    return targets.start(test, name, app='spdk_tgt', size_mib=4096)


def rpc(target, method, params=None):
    reply = target.call(method, params)
    if 'error' in reply:
        raise AssertionError('%s %s: %s' % (method, params, reply['error']))
    return reply['result']


def qemu_user_connects(path):
    """'' if QEMU's user can connect to the socket, else the error."""
    probe = ('import socket, sys\n'
             'socket.socket(socket.AF_UNIX).connect(sys.argv[1])\n')
    # The system Python: a virtualenv may sit where that user can't go.
    python = shutil.which('python3', path=os.defpath)
    result = subprocess.run(['runuser', '-u', QEMU_USER, '--', python,
                             '-c', probe, path],
                            capture_output=True, text=True, timeout=60)
    return result.stderr if result.returncode else ''


class ComputeTestCase(base.TestCase):
    """A compute host: libvirtd, Nova's driver, one SPDK target."""

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
        self.workdir = self.useFixture(fixtures.TempDir()).path
        guests.open_to_qemu(self.workdir)
        self.addCleanup(compute.run_privileged_in_process())
        self.conf = self.useFixture(config_fixture.Config(compute.CONF))
        compute.register()
        self.conf.config(group='libvirt', virt_type='qemu',
                         connection_uri=URI)
        self.context = nova_context.get_admin_context()

    def use_compute_target(self, target, **extra):
        """Point [spdk_vhost] at ``target`` and build the compute driver."""
        self.target = target
        # SPDK's socket directory must be reachable by QEMU, as -S
        # /var/tmp is; the socket itself is the connector's business.
        guests.open_to_qemu(target.vhost_dir)
        self.conf.config(group=compute.GROUP, **compute.options(
            target.socket_path, 'compute-host', host_nqn=HOST_NQN, **extra))
        self.driver = compute.make_driver()
        self.addCleanup(compute.close, self.driver)

    def controllers(self):
        return rpc(self.target, 'vhost_get_controllers')

    def connect(self, connection_info, inst):
        self.driver._connect_volume(self.context, connection_info, inst)
        self.addCleanup(self._disconnect_quietly, connection_info, inst)

    def _disconnect_quietly(self, connection_info, inst):
        """Cleanup only: the tests disconnect and check themselves."""
        names = [c['ctrlr'] for c in self.controllers()]
        if 'vhost-' + connection_info['data']['volume_id'] in names:
            self.driver._disconnect_volume(self.context, connection_info,
                                           inst, force=True)

    def start(self, cfg):
        dom = guests.start(self.conn, cfg)
        self.addCleanup(guests.remove, dom)
        return dom


class AttachTests(object):
    """Boot on one volume, hot-attach another, use both, detach.

    Subclasses set up the targets and ``self.cinder`` (started).
    """

    def volume(self, connector):
        """A new Cinder volume and its connection_info for this host."""
        vol = self.cinder.call('create_volume', size=1)
        info = self.cinder.call('initialize_connection', volume_id=vol['id'],
                                connector=connector)
        return info

    def check_socket(self, path):
        info = os.stat(path)
        self.assertTrue(stat.S_ISSOCK(info.st_mode))
        self.assertEqual((0o660, compute.QEMU_GROUP),
                         (stat.S_IMODE(info.st_mode),
                          grp.getgrgid(info.st_gid).gr_name))

    def test_boot_hot_attach_detach(self):
        inst = guests.instance(vcpus=2, node=0)
        connector = self.driver.get_volume_connector(inst)
        boot_conn, hot_conn = self.volume(connector), self.volume(connector)
        self.assertEqual(self.transport, boot_conn['data']['transport'])

        self.connect(boot_conn, inst)
        boot = self.driver._get_volume_config(boot_conn,
                                              dict(DISK, dev='vda'))
        self.check_socket(boot.source_path)
        dom = self.start(guests.domain_config(inst, self.workdir, SCRIPT,
                                              [boot]))
        self.assertEqual('ok', guests.wait_result(self.workdir,
                                                  'vda.verify@4096'))

        # Hot attach: what LibvirtDriver.attach_volume does, minus the DB.
        guest = self.driver._host.get_guest(inst)
        self.connect(hot_conn, inst)
        hot = self.driver._get_volume_config(hot_conn, dict(DISK, dev='vdb'))
        self.check_socket(hot.source_path)
        guest.attach_device(hot, persistent=True, live=True)
        self.assertEqual('ok', guests.wait_result(self.workdir,
                                                  'vdb.verify@1048576'))
        self.assertEqual('2', guests.wait_result(self.workdir, 'vdb.queues'))
        # What udev makes /dev/disk/by-id/virtio-<serial> of (no udev in
        # the test guest): Nova's first 20 characters of the volume id.
        self.assertEqual('[%s]' % hot_conn['data']['volume_id'][:20],
                         guests.wait_result(self.workdir, 'vdb.serial'))
        self.assertEqual(['vda', 'vdb'], guests.disks(dom))
        names = sorted(c['ctrlr'] for c in self.controllers())
        self.assertEqual(sorted('vhost-' + c['data']['volume_id']
                                for c in (boot_conn, hot_conn)), names)

        # Detach as Nova does: the disk parsed back from the live domain.
        guest.detach_device(guest.get_disk('vdb'), persistent=True,
                            live=True)
        self.assertEqual('gone', guests.wait_result(self.workdir, 'hot'))
        guests.wait_detached(dom, 'vdb')
        self.driver._disconnect_volume(self.context, hot_conn, inst)
        self.assertEqual(['vhost-' + boot_conn['data']['volume_id']],
                         [c['ctrlr'] for c in self.controllers()])
        self.assertFalse(os.path.exists(hot.source_path))

        dom.destroy()  # the guest goes: its boot volume is let go of
        self.driver._disconnect_volume(self.context, boot_conn, inst)
        self.assertEqual([], self.controllers())
        # Then Nova has Cinder end both attachments.
        for conn in (boot_conn, hot_conn):
            self.cinder.call('terminate_connection',
                             volume_id=conn['data']['volume_id'],
                             connector=connector)
        self.check_gone()

    def test_only_the_configured_group_reaches_the_socket(self):
        """The connector's group and mode are what let QEMU's user in."""
        inst = guests.instance(vcpus=1, node=0)
        connector = self.driver.get_volume_connector(inst)
        conn = self.volume(connector)
        self.connect(conn, inst)
        self.assertEqual('', qemu_user_connects(conn['data']['device_path']))

        self.conf.config(group=compute.GROUP, vhost_socket_group=None,
                         vhost_socket_mode='0600')
        conn = self.volume(connector)
        self.connect(conn, inst)
        self.assertIn('PermissionError',
                      qemu_user_connects(conn['data']['device_path']))


class TestLocalAttach(AttachTests, ComputeTestCase):
    """Hyperconverged: the lvol lives on the compute host's own target."""

    transport = 'local'

    def setUp(self):
        super().setUp()
        self.use_compute_target(cinder_target(self, 'compute'))
        self.cinder = self.useFixture(service_process.ServiceProcess(
            service_process.CINDER))
        self.cinder.call('start', rpc_socket=self.target.socket_path,
                         target_id='compute-host')

    def check_gone(self):
        pass  # no NVMe-oF on this path: the controllers were all


class TestTcpAttach(AttachTests, ComputeTestCase):
    """A storage node's target exports the lvols over NVMe-oF/TCP."""

    transport = 'tcp'

    def setUp(self):
        super().setUp()
        self.storage = cinder_target(self, 'storage')
        self.use_compute_target(targets.remote_compute(self))
        port = net.free_port()
        self.cinder = self.useFixture(service_process.ServiceProcess(
            service_process.CINDER))
        self.cinder.call('start', rpc_socket=self.storage.socket_path,
                         target_id='storage-node', nvmf_port=port)

    def check_gone(self):
        self.assertEqual([], rpc(self.target, 'bdev_nvme_get_controllers'))
        subsystems = [s['nqn'] for s in rpc(self.storage,
                                            'nvmf_get_subsystems')
                      if s['subtype'] == 'NVMe']
        self.assertEqual([], subsystems)


class TestGuestMemoryRefused(ComputeTestCase):
    """No hugepage-backed shared memory: refused, nothing created.

    Refused before SPDK sees the guest: such a guest crashes the target.
    """

    def setUp(self):
        super().setUp()
        self.use_compute_target(targets.local_compute(self, lcores=None))
        lvol = rpc(self.target, 'bdev_lvol_create', {
            'lvol_name': 'vol-1', 'size_in_mib': 8, 'lvs_name': LVS,
            'thin_provision': True})
        # Built per the wire format: no Cinder needed to be refused.
        self.conn_info = {'driver_volume_type': 'spdk_vhost',
                          'serial': 'vol-1',
                          'data': {'volume_id': 'vol-1', 'bdev': lvol,
                                   'lvol_uuid': lvol, 'transport': 'local',
                                   'access_mode': 'rw', 'block_size': 512}}

    def assert_refused(self, inst):
        err = self.assertRaises(vhost_exception.VhostUserMemoryNotShared,
                                self.driver._connect_volume, self.context,
                                self.conn_info, inst)
        self.assertIn('hw:mem_page_size', str(err))
        self.assertEqual([], self.controllers())

    def test_running_guest_with_private_memory(self):
        inst = guests.instance(hugepages=False)
        dom = self.start(guests.domain_config(inst, self.workdir,
                                              'sleep 600'))
        self.assertTrue(libvirt_guest.Guest(dom).is_active())
        self.assert_refused(inst)

    def test_stopped_guest_of_a_flavor_without_hugepages(self):
        self.assert_refused(guests.instance(hugepages=False))
