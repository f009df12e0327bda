"""The start-up check that no guest's QEMU can open SPDK's RPC socket.

On a real Unix socket and directories the test makes (it runs as root,
so it sets any owner and mode); the QEMU identity is ``nobody``, as
libvirt's capabilities would name it. Whether real QEMU agrees is
tests/nova/functional/test_rpc_access.py's business.
"""

import os
import pwd
import socket

import fixtures
from nova import exception

from nova_vhost_user import rpc_access
from tests import base
from tests.nova import libvirt_guest as guests

NOBODY = pwd.getpwnam('nobody')
CAPS = '''<capabilities><host>
  <secmodel><model>none</model><doi>0</doi></secmodel>
  <secmodel><model>dac</model><doi>0</doi>
    <baselabel type='kvm'>+%(uid)d:+%(gid)d</baselabel>
    <baselabel type='qemu'>+%(uid)d:+%(gid)d</baselabel>
  </secmodel>
</host></capabilities>'''


def caps(uid=NOBODY.pw_uid, gid=NOBODY.pw_gid):
    return CAPS % {'uid': uid, 'gid': gid}


class TestRpcAccess(base.TestCase):

    def setUp(self):
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger())
        self.dir = self.useFixture(fixtures.TempDir()).path
        guests.open_to_qemu(self.dir)
        self.path = os.path.join(self.dir, 'spdk.sock')
        server = socket.socket(socket.AF_UNIX)
        self.addCleanup(server.close)
        server.bind(self.path)
        self.useFixture(fixtures.MonkeyPatch('os.getgrouplist',
                                             self._grouplist))
        self.groups = {}

    def _grouplist(self, user, gid):
        return [gid] + self.groups.get(user, [])

    def access(self, mode, uid=0, gid=0):
        os.chown(self.path, uid, gid)
        os.chmod(self.path, mode)

    def check(self, xml=None):
        rpc_access.check(xml or caps(), 'qemu', self.path)

    def assertRefused(self, xml=None):
        err = self.assertRaises(exception.InvalidConfiguration,
                                self.check, xml)
        self.assertIn('can open the SPDK RPC socket %s' % self.path,
                      str(err))
        return str(err)

    def test_services_group_only_passes(self):
        self.access(0o660)

        self.check()

        self.assertIn('QEMU (nobody (groups nogroup)) cannot open',
                      self.log.output)

    def test_qemus_primary_group_is_refused(self):
        self.access(0o660, gid=NOBODY.pw_gid)

        message = self.assertRefused()

        self.assertIn('QEMU runs as nobody', message)
        self.assertIn('(root:nogroup, mode 0660)', message)
        self.assertIn('vhost_socket_group', message)

    def test_a_group_qemus_user_is_in_is_refused(self):
        # libvirt gives QEMU its user's groups.
        self.groups['nobody'] = [4242]
        self.access(0o660, gid=4242)

        self.assertIn('groups 4242, nogroup', self.assertRefused())

    def test_the_users_passwd_group_counts_beside_libvirts(self):
        # Debian's libvirt-qemu: passwd group kvm, qemu.conf's group
        # libvirt-qemu; QEMU runs with both.
        self.access(0o660, gid=NOBODY.pw_gid)

        self.assertIn('groups 4245, nogroup',
                      self.assertRefused(caps(gid=4245)))

    def test_world_writable_is_refused(self):
        self.access(0o666)

        self.assertRefused()

    def test_owner_bits_decide_for_the_owner(self):
        # As the kernel checks: the owner gets the owner's bits only.
        self.access(0o466, uid=NOBODY.pw_uid)

        self.check()

    def test_a_directory_qemu_cannot_search_keeps_it_out(self):
        self.access(0o666)
        os.chmod(self.dir, 0o700)

        self.check()

    def test_qemu_as_root_is_refused(self):
        self.access(0o600)

        self.assertIn('QEMU runs as root', self.assertRefused(caps(0, 0)))

    def test_the_label_of_the_virt_type_in_use(self):
        xml = caps().replace("type='qemu'>+%d" % NOBODY.pw_uid,
                             "type='qemu'>+0")
        self.access(0o600)

        self.assertIn('QEMU runs as root', self.assertRefused(xml))

    def test_uid_without_passwd_entry(self):
        # No user name, so no supplementary groups to look up.
        self.access(0o660, gid=4244)

        self.check(caps(uid=4242, gid=4243))

        self.assertIn('QEMU (4242 (groups 4243)) cannot open',
                      self.log.output)

    def test_no_dac_label_is_a_warning(self):
        self.access(0o666)

        self.check('<capabilities><host><secmodel><model>none</model>'
                   '</secmodel></host></capabilities>')

        self.assertIn('Could not tell which user libvirt runs QEMU as',
                      self.log.output)

    def test_no_socket_yet_is_a_warning(self):
        os.unlink(self.path)

        self.check()

        self.assertIn('Could not check that guests cannot open',
                      self.log.output)
