"""A hugepage guest with spdk_vhost volumes, checked from inside over SSH.

vhost-user needs the guest's memory shared and hugepage-backed, hence
the ``[spdk_vhost] hugepage_flavor``. The volume must show up in the
guest as a plain virtio disk (the virtio_blk driver), carry data both
ways, grow while attached, and go away on detach.
"""

from tempest.common import utils
from tempest.common import waiters
from tempest import config
from tempest.lib.common.utils import test_utils
from tempest.lib import decorators
from tempest.scenario import manager

from tempest_plugin.tests import base

CONF = config.CONF
MIB = 1024 * 1024


class VhostAttachTest(base.TargetChecks, manager.ScenarioTest):

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.spdk_vhost.scenario_tests:
            raise cls.skipException('[spdk_vhost] scenario_tests is '
                                    'disabled')
        if not CONF.spdk_vhost.hugepage_flavor:
            raise cls.skipException('[spdk_vhost] hugepage_flavor unset')

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        cls.admin_types_client = cls.os_admin.volume_types_client_latest
        cls.admin_qos_client = cls.os_admin.volume_qos_client_latest

    @classmethod
    def resource_setup(cls):
        super().resource_setup()
        cls.setup_target()

    def boot(self):
        """A hugepage server reachable over SSH, and its SSH client."""
        keypair = self.create_keypair()
        security_group = self.create_security_group()
        server = self.create_server(
            flavor=CONF.spdk_vhost.hugepage_flavor,
            key_name=keypair['name'],
            security_groups=[{'name': security_group['name']}])
        # get_remote_client waits until the guest accepts the key.
        ssh = self.get_remote_client(self.get_server_ip(server),
                                     private_key=keypair['private_key'],
                                     server=server)
        return server, ssh

    def disks(self, ssh):
        return set(ssh.exec_command('ls /sys/block').split())

    def attach(self, server, ssh, volume):
        """Attach; return the guest's name of the new disk."""
        before = self.disks(ssh)
        self.nova_volume_attach(server, volume)
        new = []

        def appeared():
            new[:] = sorted(self.disks(ssh) - before)
            return bool(new)

        self.assertTrue(test_utils.call_until_true(
            appeared, CONF.compute.build_timeout, 1),
            'no new disk in the guest')
        self.assertEqual(1, len(new), new)
        return new[0]

    def guest_size(self, ssh, disk):
        return int(ssh.exec_command('cat /sys/block/%s/size' % disk)) * 512

    def create_high_iops_volume(self, size=1):
        return self.create_volume(size=size,
                                  volume_type=CONF.spdk_vhost.volume_type)

    @decorators.idempotent_id('a5cd3d2b-d254-447c-bec1-fed912b742bd')
    @utils.services('compute', 'volume', 'image', 'network')
    def test_attach_write_read_detach(self):
        server, ssh = self.boot()
        volume = self.create_high_iops_volume()
        disk = self.attach(server, ssh, volume)
        driver = ssh.exec_command(
            'basename $(readlink /sys/block/%s/device/driver)' % disk)
        self.assertEqual('virtio_blk', driver.strip())
        self.assertEqual(volume['size'] * 1024 ** 3,
                         self.guest_size(ssh, disk))

        ssh.exec_command('dd if=/dev/urandom of=/tmp/data bs=1M count=8')
        written = ssh.exec_command('md5sum < /tmp/data').split()[0]
        ssh.exec_command('sudo dd if=/tmp/data of=/dev/%s bs=1M oflag=direct'
                         % disk)
        read = ssh.exec_command(
            'sudo dd if=/dev/%s bs=1M count=8 iflag=direct | md5sum' % disk)
        self.assertEqual(written, read.split()[0])

        self.nova_volume_detach(server, volume)
        self.assertNotIn(disk, self.disks(ssh))

    @decorators.idempotent_id('0aafa891-9aa9-4e4a-8dac-a0964ce18b80')
    @utils.services('compute', 'volume', 'image', 'network')
    def test_extend_while_attached(self):
        if not CONF.volume_feature_enabled.extend_attached_volume:
            raise self.skipException('extend_attached_volume is disabled')
        server, ssh = self.boot()
        volume = self.create_high_iops_volume()
        disk = self.attach(server, ssh, volume)
        new_size = volume['size'] + 1
        base.post_volume_action(self.volumes_client, volume['id'],
                                {'os-extend': {'new_size': new_size}},
                                '3.42')
        waiters.wait_for_volume_resource_status(
            self.volumes_client, volume['id'], 'in-use')

        def grown():
            return self.guest_size(ssh, disk) == new_size * 1024 ** 3

        self.assertTrue(test_utils.call_until_true(
            grown, CONF.volume.build_timeout, 1),
            'the guest still sees %d bytes' % self.guest_size(ssh, disk))

    @decorators.idempotent_id('3a7c4cee-b22f-4b40-aa63-d2e761f8da05')
    @utils.services('compute', 'volume', 'image', 'network')
    def test_qos_change_applied_online(self):
        # Retyping an attached volume to a type with another back-end
        # QoS spec changes SPDK's limits under the running guest.
        server, ssh = self.boot()
        volume = self.create_high_iops_volume()
        disk = self.attach(server, ssh, volume)
        new_limits = {'total_iops_sec': '4000',
                      'total_bytes_sec': str(64 * MIB)}
        new_type = self.create_volume_type(
            backend_name=CONF.spdk_vhost.backend_name)
        qos = self.admin_qos_client.create_qos(
            name=new_type['name'] + '-qos', consumer='back-end',
            **new_limits)['qos_specs']
        self.addCleanup(self.admin_qos_client.delete_qos, qos['id'], True)
        self.addCleanup(self.admin_qos_client.disassociate_all_qos,
                        qos['id'])
        self.admin_qos_client.associate_qos(qos['id'], new_type['id'])

        base.retype_in_place(self.volumes_client, volume['id'],
                             new_type['name'], 'in-use')
        self.assertEnforced(volume['id'], new_limits)
        # The guest kept its disk and can still read it.
        ssh.exec_command('sudo dd if=/dev/%s of=/dev/null bs=1M count=1 '
                         'iflag=direct' % disk)
