"""Online extend: a running guest on the volume's vhost controller grows.

A real QEMU guest (TCG, hugepage memory) is attached through a
vhost-user-blk controller of the lvol; ``extend_volume`` resizes the lvol
and the guest kernel must see the new capacity without a reattach.
"""

import time

from testbed.guest import qemu
from tests.cinder.functional import test_driver

GIB = 1024 ** 3


class OnlineExtendTest(test_driver.DriverTestCase):

    def controller_socket(self, volume):
        name = 'extend.%s' % volume.id[:8]
        self.rpc('vhost_create_blk_controller',
                 {'ctrlr': name, 'dev_name': self.alias(volume)})
        self.addCleanup(self.target.call, 'vhost_delete_controller',
                        {'ctrlr': name})
        return self.rpc('vhost_get_controllers', {'name': name})[0]['socket']

    def guest_size(self, guest):
        return int(guest.execute(qemu.disk_info('vda'))['vda.size'])

    def test_extend_under_a_running_guest(self):
        """The lvol grows under I/O; a guest sees it where the target tells.

        SPDK's vhost-blk target sends the guest a config-change
        notification on resize. qemu-storage-daemon 7.2 (the emulator's
        data plane) has no resize notification in its vhost-user-blk
        export and sizes the export once, so against the emulator the
        running guest keeps its old size; what is checked there is that
        the extend succeeds under a running guest and its I/O goes on.
        """
        volume = self.created(size=1)
        socket = self.controller_socket(volume)
        try:
            guest = self.useFixture(qemu.GuestFixture([socket])).guest
        except qemu.HugepagesUnavailable as err:
            self.skipTest(str(err))
        self.assertEqual(GIB, self.guest_size(guest))
        guest.execute(qemu.writer_start('vda', 0, 65536, 'before'))
        self.driver.extend_volume(volume, 2)
        self.assertEqual(2048, self.size_mib(self.alias(volume)))
        guest.execute(qemu.check_pattern('vda', GIB - 65536, 65536, 'end'))
        status = guest.execute(qemu.writer_stop())
        self.assertEqual('0', status['writer.failures'])
        if not self.target.is_real:
            self.assertEqual(GIB, self.guest_size(guest))
            return
        deadline = time.monotonic() + 30
        while self.guest_size(guest) != 2 * GIB:
            if time.monotonic() > deadline:
                self.fail('guest still sees %d bytes' %
                          self.guest_size(guest))
            time.sleep(0.5)
        guest.execute(qemu.check_pattern('vda', 2 * GIB - 65536, 65536,
                                         'tail'))
