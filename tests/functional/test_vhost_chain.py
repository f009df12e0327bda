"""The whole data path: lvol -> vhost-blk controller -> guest -> lvol.

On a real interrupt-mode ``vhost`` target: the application a compute
node with only local volumes runs, idle at ~0% CPU between the tests.
"""

import fixtures

from spdk_vhost_core import spdk_rpc
from testbed.guest import qemu
from testbed import spdk_target
from tests import base
from tests import vhost_chain

MiB = vhost_chain.MiB


class VhostChainTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(300, gentle=True))
        target = self.useFixture(spdk_target.SpdkTarget(
            app='vhost', interrupt_mode=True, name='vhost'))
        client = spdk_rpc.SpdkClient(target.socket_path, timeout=30)
        self.addCleanup(client.close)
        workdir = self.useFixture(fixtures.TempDir()).path
        self.chain = vhost_chain.VhostChain(client, workdir, lvol_mib=64)
        self.addCleanup(self.chain.teardown)
        self.chain.build()

    def test_guest_writes_reach_the_lvol(self):
        offset, length, token = 5 * MiB + 4096, 256 * 1024, 'chain-test'
        expected = qemu.pattern_bytes(token, length)

        results = self.chain.guest_io(offset, length, token)

        self.assertEqual(str(64 * MiB), results['vda.size'])
        self.assertEqual(vhost_chain.sha256(expected),
                         results['vda.wrote@%d' % offset])
        self.assertEqual(vhost_chain.sha256(expected),
                         results['vda.read@%d' % offset])
        self.assertEqual(expected, self.chain.read_back(offset, length))

    def test_bytes_around_the_write_stay_zero(self):
        offset, length = 8 * MiB, 64 * 1024
        self.chain.guest_io(offset, length, 'edges')

        around = self.chain.read_back(offset - 4096, length + 8192)

        self.assertEqual(b'\0' * 4096, around[:4096])
        self.assertEqual(b'\0' * 4096, around[-4096:])
