"""A tenant's SPDK volumes through Nova's API, checked inside the guest.

Boot from a volume made from an image, hot-attach a second volume, use
it, grow it while attached, change its QoS while attached, detach it;
each step seen by the guest (over its serial console) and on the SPDK
target, and nothing left on the target afterwards.
"""

from tests.deployment import cloud_guest
from tests.deployment import nova_base

MIB = 1024 * 1024
GIB = 1024 * MIB
# A bandwidth the TCG guest exceeds easily, so the limit is what it gets.
LIMIT_MIB_S = 2


class TestNovaAttach(nova_base.NovaTestCase):

    def test_boot_attach_use_extend_retype_detach(self):
        # Made first, so removed after the volume retyped to it.
        capped = self.make_type(
            qos={'total_bytes_sec': str(LIMIT_MIB_S * MIB)})
        boot = self.boot_volume()
        server = self.boot_from_volume(boot.id)
        shell = self.console(server)

        # The boot disk holds the image Cinder imported from glance.
        got = shell.execute('gt_read vda 0 %d' % cloud_guest.ROOT_BYTES)
        self.assertEqual(cloud_guest.root_sha256(), got['vda.read@0'])
        self.assertEqual(boot.id[:20], self.serial(shell, 'vda'))

        data = self.create_volume(1)
        self.nova.volumes.create_server_volume(server.id, data.id)
        self.wait_status(self.cinder.volumes, data.id, 'in-use')
        self.wait_disk(shell, 'vdb')
        self.assertEqual(data.id[:20], self.serial(shell, 'vdb'))
        self.assert_state_on_its_host(data.id)
        got = shell.execute('gt_check vdb %d %d data-volume' % (MIB, MIB))
        self.assertEqual('ok', got['vdb.verify@%d' % MIB])
        self.assertEqual(GIB, self.guest_size(shell, 'vdb'))

        # Online extend: Cinder grows the lvol, Nova is told, the guest
        # sees the new size without a rescan.
        self.cinder.volumes.extend(data, 2)
        self.wait_for(lambda: self.guest_size(shell, 'vdb') == 2 * GIB,
                      'the guest to see vdb grow to 2 GiB')
        self.wait_status(self.cinder.volumes, data.id, 'in-use')

        # Retype to a type with a bandwidth limit, while attached.
        self.cinder.volumes.retype(data, capped.id, 'never')
        self.wait_for(lambda: self.cinder.volumes.get(data.id).volume_type
                      == capped.name, 'the retype of %s' % data.id)
        self.assertEqual({'rw_mbytes_per_sec': LIMIT_MIB_S},
                         self.rate_limits('volume-%s' % data.id))
        rate = self.read_rate(shell, 'vdb', 8 * MIB)
        self.assertLess(rate, LIMIT_MIB_S * MIB * 1.15)
        self.assertGreater(rate, LIMIT_MIB_S * MIB * 0.5)
        # The data written before is still there.
        got = shell.execute('gt_read vdb %d %d' % (MIB, MIB))
        self.assertEqual(shell.execute(
            'gt_write vdb %d %d data-volume' % (MIB, MIB))
            ['vdb.wrote@%d' % MIB], got['vdb.read@%d' % MIB])

        self.detach(server.id, data.id)
        self.wait_status(self.cinder.volumes, data.id, 'available')
        self.wait_for(lambda: not self.has_disk(shell, 'vdb'),
                      'vdb to leave the guest')
        self.assertEqual(['vhost-' + boot.id], self.controllers())


class TestNovaMoves(nova_base.NovaTestCase):
    """Shelve/unshelve and cold resize of a server with SPDK volumes."""

    def test_shelve_unshelve_resize(self):
        boot = self.boot_volume()
        data = self.create_volume(1)
        server = self.boot_from_volume(boot.id)
        self.nova.volumes.create_server_volume(server.id, data.id)
        self.wait_status(self.cinder.volumes, data.id, 'in-use')
        shell = self.console(server)
        self.wait_disk(shell, 'vdb')
        wrote = shell.execute('gt_write vdb 0 %d kept' % MIB)['vdb.wrote@0']

        # Shelved (offloaded at once): the host lets go of both volumes.
        self.nova.servers.shelve(server)
        self.wait_server(server.id, 'SHELVED_OFFLOADED')
        self.assertEqual([], self.controllers())
        self.nova.servers.unshelve(server)
        self.wait_server(server.id, 'ACTIVE')
        self.check_disks(server, wrote, boot, data, vcpus=1)

        # Cold resize to a bigger flavor, on this (the only) host.
        self.nova.servers.resize(server, self.large_flavor)
        self.wait_server(server.id, 'VERIFY_RESIZE')
        self.nova.servers.confirm_resize(server)
        self.wait_server(server.id, 'ACTIVE')
        self.check_disks(server, wrote, boot, data, vcpus=2)
        self.assertEqual(sorted('vhost-' + v.id for v in (boot, data)),
                         sorted(self.controllers()))

    def check_disks(self, server, wrote, boot, data, vcpus):
        """The guest is back with both disks and the data on them."""
        shell = self.console(server)
        self.wait_disk(shell, 'vdb')
        self.assertEqual(wrote, shell.execute(
            'gt_read vdb 0 %d' % MIB)['vdb.read@0'])
        self.assertEqual([boot.id[:20], data.id[:20]],
                         [self.serial(shell, dev) for dev in ('vda', 'vdb')])
        self.assertEqual(str(vcpus), shell.execute(
            'gt_result n "$(nproc)"')['n'])
