"""A hugepage guest with spdk_vhost volumes, checked from inside.

vhost-user needs the guest's memory shared and hugepage-backed, hence
the ``[spdk_vhost] hugepage_flavor``. Each attached volume must show up
in the guest as the disk whose serial is the volume id, at the volume's
size, read zeros when new, carry data both ways, grow while attached
and go away on detach. The guest is seen over SSH or through its
console (``[spdk_vhost] guest_access``, see :mod:`tempest_plugin.guest`).
"""

from tempest.common import utils
from tempest.common import waiters
from tempest import config
from tempest.lib import decorators
from tempest.scenario import manager

from tempest_plugin import guest
from tempest_plugin.tests import base

CONF = config.CONF
GIB = 1024 ** 3
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
        if (CONF.spdk_vhost.guest_access == 'ssh' and
                not CONF.service_available.neutron):
            raise cls.skipException('guest_access = ssh needs a network; '
                                    'use guest_access = console')

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        cls.admin_qos_client = cls.os_admin.volume_qos_client_latest

    @classmethod
    def resource_setup(cls):
        super().resource_setup()
        cls.setup_target()

    def boot(self):
        """A hugepage server and the test's view of its disks."""
        timeout = CONF.compute.build_timeout
        if CONF.spdk_vhost.guest_access == 'console':
            server = self.create_server(
                flavor=CONF.spdk_vhost.hugepage_flavor)
            return server, guest.ConsoleGuest(self.servers_client,
                                              server['id'], timeout)
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
        return server, guest.SshGuest(ssh, timeout)

    def attach(self, server, view, volume):
        """Attach; the guest's disk, its pattern written and read back."""
        self.nova_volume_attach(server, volume)
        disk = view.wait_attached(volume['id'])
        self.assertEqual(volume['size'] * GIB, disk.size)
        self.assertTrue(disk.verified, 'data written to %s in the guest '
                        'did not read back' % disk.name)
        return disk

    def create_high_iops_volume(self, size=1):
        return self.create_volume(size=size,
                                  volume_type=CONF.spdk_vhost.volume_type)

    @decorators.idempotent_id('a5cd3d2b-d254-447c-bec1-fed912b742bd')
    @utils.services('compute', 'volume', 'image')
    def test_attach_write_read_detach(self):
        server, view = self.boot()
        volume = self.create_high_iops_volume()
        disk = self.attach(server, view, volume)
        self.assertEqual(guest.ZEROS_SHA256, disk.before,
                         'a new volume must read zeros')
        self.nova_volume_detach(server, volume)
        view.wait_detached(disk)

    @decorators.idempotent_id('0aafa891-9aa9-4e4a-8dac-a0964ce18b80')
    @utils.services('compute', 'volume', 'image')
    def test_extend_while_attached(self):
        if not CONF.volume_feature_enabled.extend_attached_volume:
            raise self.skipException('extend_attached_volume is disabled')
        server, view = self.boot()
        volume = self.create_high_iops_volume()
        disk = self.attach(server, view, volume)
        new_size = volume['size'] + 1
        base.post_volume_action(self.volumes_client, volume['id'],
                                {'os-extend': {'new_size': new_size}},
                                '3.42')
        waiters.wait_for_volume_resource_status(
            self.volumes_client, volume['id'], 'in-use')
        view.wait_size(disk, new_size * GIB)
        self.assertLvolSize(volume['id'], new_size)

    @decorators.idempotent_id('3a7c4cee-b22f-4b40-aa63-d2e761f8da05')
    @utils.services('compute', 'volume', 'image')
    def test_qos_change_applied_online(self):
        # Retyping an attached volume to a type with another back-end
        # QoS spec changes SPDK's limits under the running guest, and
        # the data stays: attached again, the disk holds the pattern.
        server, view = self.boot()
        volume = self.create_high_iops_volume()
        disk = self.attach(server, view, volume)
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

        self.nova_volume_detach(server, volume)
        view.wait_detached(disk)
        again = self.attach(server, view, volume)
        self.assertEqual(guest.pattern_sha256(disk.serial), again.before,
                         'the data written before the retype is gone')
