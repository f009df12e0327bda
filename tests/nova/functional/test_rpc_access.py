"""No guest's QEMU can drive SPDK: the start-up check and real QEMU agree.

nova-compute's check (``nova_vhost_user.rpc_access``) reads libvirt's
DAC label and the permission bits of the target's RPC socket. Here a
guest's QEMU, started by the real libvirtd as it starts every guest (as
``libvirt-qemu``, with that user's groups; paused, so no guest code
runs), is made to connect to a real target's RPC socket through its
monitor (``chardev-add``), as a QEMU taken over by its guest could: it
gets in exactly where the check refuses to start.
"""

import grp
import json
import os

import fixtures
from nova import exception

from nova_vhost_user import rpc_access
from tests import base
from tests.nova import compute
from tests.nova.functional import targets
from tests.nova.functional import test_nova_vhost_user_libvirt as attach
from tests.nova import libvirt_guest as guests

try:
    import libvirt
    import libvirt_qemu
except ImportError:  # reported by setUp, with what to install
    libvirt = None

#: The group of the OpenStack services that drive SPDK, in the test:
#: libvirt-qemu is not in it, as it must not be in the units' ``spdk``.
SERVICES_GROUP = 'root'


class TestQemuReachesRpcSocket(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(180, gentle=True))
        self.assertIsNotNone(libvirt, 'libvirt-python is not installed')
        self.conn = libvirt.open(attach.URI)
        self.addCleanup(self.conn.close)
        self.target = targets.start(self, 'compute', app='vhost',
                                    interrupt_mode=True, lvstore=False)
        # Where QEMU may search, as /var/tmp is.
        guests.open_to_qemu(self.target.workdir)
        self.socket = self.target.socket_path
        workdir = self.useFixture(fixtures.TempDir()).path
        guests.open_to_qemu(workdir)
        inst = guests.instance(vcpus=1, hugepages=False)
        dom = self.conn.defineXML(guests.domain_config(
            inst, workdir, 'true').to_xml())
        self.addCleanup(guests.remove, dom)
        dom.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
        self.dom = dom

    def socket_group(self, name):
        os.chown(self.socket, 0, grp.getgrnam(name).gr_gid)
        os.chmod(self.socket, 0o660)

    def qemu_connects(self):
        """'' once the guest's QEMU connected to the socket, else why not."""
        reply = json.loads(libvirt_qemu.qemuMonitorCommand(
            self.dom, json.dumps({'execute': 'chardev-add', 'arguments': {
                'id': 'probe', 'backend': {'type': 'socket', 'data': {
                    'server': False, 'addr': {'type': 'unix', 'data': {
                        'path': self.socket}}}}}}), 0))
        if 'error' in reply:
            return reply['error']['desc']
        libvirt_qemu.qemuMonitorCommand(self.dom, json.dumps({
            'execute': 'chardev-remove', 'arguments': {'id': 'probe'}}), 0)
        return ''

    def check(self):
        rpc_access.check(self.conn.getCapabilities(), 'qemu', self.socket)

    def test_socket_of_the_services_group_passes_and_qemu_stays_out(self):
        self.socket_group(SERVICES_GROUP)

        self.check()

        self.assertIn('Permission denied', self.qemu_connects())

    def test_socket_in_qemus_group_is_refused_and_qemu_gets_in(self):
        # kvm (Debian): not qemu.conf's group but its user's own (passwd),
        # which libvirt gives QEMU too.
        self.socket_group(compute.QEMU_GROUP)

        err = self.assertRaises(exception.InvalidConfiguration, self.check)

        self.assertIn('QEMU runs as %s' % attach.QEMU_USER, str(err))
        self.assertEqual('', self.qemu_connects())
