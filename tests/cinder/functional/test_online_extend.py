"""Online extend: a running guest on the volume sees it grow.

A real QEMU guest (TCG, hugepage memory) reads and writes the volume
through a vhost-user-blk controller; ``extend_volume`` resizes the lvol
and the guest kernel must see the new capacity without a reattach. SPDK
tells it: the vhost-blk target sends a config-change notification, and
over NVMe-oF the exporting target sends a namespace-change notice that
the compute target's NVMe bdev follows.
"""

from testbed.guest import qemu
from testbed import spdk_target
from testbed import waiting
from tests.cinder.functional import test_driver

GIB = 1024 ** 3
REMOTE = test_driver.REMOTE


class OnlineExtendTest(test_driver.DriverTestCase):

    def controller_socket(self, target, bdev, volume):
        name = 'extend.%s' % volume.id[:8]
        target.rpc('vhost_create_blk_controller',
                   {'ctrlr': name, 'dev_name': bdev})
        self.addCleanup(target.call, 'vhost_delete_controller',
                        {'ctrlr': name})
        return target.rpc('vhost_get_controllers',
                          {'name': name})[0]['socket']

    def remote_bdev(self, volume):
        """The volume attached over NVMe/TCP on a compute target."""
        data = self.driver.initialize_connection(volume, REMOTE)['data']
        compute = self.useFixture(spdk_target.SpdkTarget(
            app='vhost', name='compute'))
        names = compute.rpc('bdev_nvme_attach_controller', {
            'name': 'vol', 'trtype': data['transport'],
            'traddr': data['traddr'], 'trsvcid': data['trsvcid'],
            'adrfam': data['adrfam'], 'subnqn': data['nqn'],
            'hostnqn': data['host_nqn']})
        return compute, names[0]

    def guest_size(self, guest):
        return int(guest.execute(qemu.disk_info('vda'))['vda.size'])

    def extend_under_guest(self, volume, socket):
        """The lvol grows under I/O; the guest sees the new size."""
        guest = self.useFixture(qemu.GuestFixture([socket])).guest
        self.assertEqual(GIB, self.guest_size(guest))
        guest.execute(qemu.writer_start('vda', 0, 65536, 'before'))
        self.driver.extend_volume(volume, 2)
        self.assertEqual(2048, self.size_mib(self.alias(volume)))
        status = guest.execute(qemu.writer_stop())
        self.assertEqual('0', status['writer.failures'])
        waiting.wait_for('the guest to see 2 GiB',
                         lambda: self.guest_size(guest) == 2 * GIB, 60)
        guest.execute(qemu.write_pattern('vda', 2 * GIB - 65536, 65536,
                                         'tail'))
        guest.execute(qemu.check_pattern('vda', 2 * GIB - 65536, 65536,
                                         'tail'))

    def test_local_extend_under_a_running_guest(self):
        volume = self.created(size=1)
        self.extend_under_guest(volume, self.controller_socket(
            self.target, self.alias(volume), volume))

    def test_remote_extend_under_a_running_guest(self):
        volume = self.created(size=1)
        compute, bdev = self.remote_bdev(volume)
        self.extend_under_guest(volume, self.controller_socket(
            compute, bdev, volume))
        info = compute.rpc('bdev_get_bdevs', {'name': bdev})[0]
        self.assertEqual(2 * GIB, info['num_blocks'] * info['block_size'])
