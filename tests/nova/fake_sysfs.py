"""A fake sysfs tree: the NUMA layout a test wants the host to have."""

import os

import fixtures


class FakeSysfs(fixtures.Fixture):
    """``devices/system/node/nodeN/cpulist`` for ``{node: 'cpulist'}``.

    ``rdma_devices`` adds entries under ``class/infiniband``.
    """

    def __init__(self, nodes, rdma_devices=()):
        super().__init__()
        self.nodes = nodes
        self.rdma_devices = rdma_devices

    def _setUp(self):
        self.root = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.MockPatch(
            'os_brick_connector.numa.SYSFS_ROOT', self.root))
        for node, cpulist in self.nodes.items():
            path = os.path.join(self.root, 'devices', 'system', 'node',
                                'node%d' % node)
            os.makedirs(path)
            with open(os.path.join(path, 'cpulist'), 'w') as dst:
                dst.write(cpulist + '\n')
        for name in self.rdma_devices:
            os.makedirs(os.path.join(self.root, 'class', 'infiniband', name))
