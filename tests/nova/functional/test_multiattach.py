"""A multiattach volume shared by two real QEMU (TCG) guests of one host.

Each guest has its own vhost-blk controller on the volume's one bdev
(the layer over a local lvol, or the NVMe-oF namespace of a remote one),
on a real SPDK target: both read the volume id as their disk serial, what
one writes (raw, no file system) the other reads, and detaching one guest
leaves the other reading and writing.
"""

import hashlib

from testbed.guest import qemu
from testbed import spdk_target
from tests.nova.functional import test_volume_serial as serial_tests

VOLUME_A = serial_tests.VOLUME_A
GUESTS = ('6f0b4d53-2a3e-4a5b-9d8e-0c1d2e3f4a5b',
          '0e7c1a2b-3c4d-4e5f-8a6b-7c8d9e0f1a2b')
MIB = serial_tests.MIB
FIRST = (0, MIB)
SECOND = (2 * MIB, MIB)


def sha(token, length):
    return hashlib.sha256(qemu.pattern_bytes(token, length)).hexdigest()


class SharedVolumeCase(serial_tests.SerialCase):

    def check_shared(self, shared_bdev):
        props = self.props()
        attached = [dict(props, attached_to=guest) for guest in GUESTS]
        infos = [self.connect(p) for p in attached]
        self.assertEqual([shared_bdev] * 2, [self.exposed(i) for i in infos])
        guests = [self.boot(info) for info in infos]
        for guest in guests:
            got = guest.execute(serial_tests.serial_command('vda'))
            self.assertEqual('[%s]' % VOLUME_A[:20], got['vda.serial'])

        # One writes, the other reads it (O_DIRECT: no guest cache).
        guests[0].execute(qemu.write_pattern('vda', FIRST[0], FIRST[1],
                                             'first'))
        got = guests[1].execute(qemu.read_back('vda', *FIRST))
        self.assertEqual(sha('first', FIRST[1]),
                         got['vda.read@%d' % FIRST[0]])

        # The first guest goes and is detached: the second works on.
        guests[0].stop()
        self.connector.disconnect_volume(attached[0], infos[0])
        self.assertEqual([infos[1]['controller']],
                         [c['ctrlr']
                          for c in self.client.vhost_get_controllers()])
        guests[1].execute(qemu.write_pattern('vda', SECOND[0], SECOND[1],
                                             'second'))
        for (offset, length), token in ((FIRST, 'first'),
                                        (SECOND, 'second')):
            got = guests[1].execute(qemu.read_back('vda', offset, length))
            self.assertEqual(sha(token, length), got['vda.read@%d' % offset])

        guests[1].stop()
        self.connector.disconnect_volume(attached[1], infos[1])
        self.assertEqual([], self.client.vhost_get_controllers())
        self.assertNotIn(shared_bdev, spdk_target.bdev_names(self.client))


class TestLocalMultiattach(SharedVolumeCase):

    def test_two_guests_one_layer(self):
        self.check_shared(VOLUME_A)
        self.assertEqual([], self.raids())


class TestRemoteMultiattach(SharedVolumeCase):

    remote = True

    def test_two_guests_one_nvme_link(self):
        self.check_shared(VOLUME_A + 'n1')
        self.assertEqual([], self.nvme_names())
