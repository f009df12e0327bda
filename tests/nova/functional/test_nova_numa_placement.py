"""NUMA placement through the Nova path, on a faked two-node host.

Nova's driver reads the guest's node from the instance's NUMA topology
and the host's libvirt capabilities (faked: two nodes, CPUs 0-1 and
2-3); the real connector reads reactor cores from the SPDK target
(an idle ``vhost`` target with four reactors, lcores 0-3 on the two
real CPUs) and nodes from a fake sysfs.
The controllers it creates on the target are what is checked. The
``connection_info`` is built per the wire format
(``properties.ConnectionProperties``) from the target's RPCs: the
placement does not depend on who made it.
"""

import fixtures

from os_brick_connector import connector_errors
from tests.nova import compute
from tests.nova import fake_sysfs
from tests.nova.functional import targets
from tests.nova.functional import test_nova_vhost_user_libvirt as attach
from tests.nova import libvirt_guest as guests
from tests.nova.unit import nova_fakes


class NumaHostTestCase(attach.ComputeTestCase):
    """SPDK reactors on cores 0-3; the host's nodes are ``host_nodes``."""

    host_nodes = {0: '0-1', 1: '2-3'}

    def setUp(self):
        super().setUp()
        self.useFixture(fake_sysfs.FakeSysfs(self.host_nodes))
        self.use_compute_target(targets.local_compute(self))
        cpus = [[int(c) for c in cpulist.split('-')]
                for _node, cpulist in sorted(self.host_nodes.items())]
        caps = nova_fakes.FakeHost(nova_fakes.host_topology(
            *[range(low, high + 1) for low, high in cpus])).caps
        self.useFixture(fixtures.MockPatchObject(
            self.driver._host, 'get_capabilities', return_value=caps))

    def connection_info(self, name):
        lvol = attach.rpc(self.target, 'bdev_lvol_create', {
            'lvol_name': name, 'size_in_mib': 8, 'lvs_name': attach.LVS,
            'thin_provision': True})
        return {'driver_volume_type': 'spdk_vhost', 'serial': name,
                'data': {'volume_id': name, 'bdev': lvol, 'lvol_uuid': lvol,
                         'transport': 'local', 'access_mode': 'rw',
                         'block_size': 512}}

    def cpumasks(self):
        return {c['ctrlr']: c['cpumask'] for c in self.controllers()}


class TestTwoNodeHost(NumaHostTestCase):

    def test_guest_on_node_1_gets_node_1_reactors(self):
        inst = guests.instance(node=1)
        for name in ('vol-a', 'vol-b', 'vol-c'):
            self.connect(self.connection_info(name), inst)
        # Cores 2 and 3 are node 1's; spread, fewest controllers first.
        self.assertEqual({'vhost-vol-a': '0x4', 'vhost-vol-b': '0x8',
                          'vhost-vol-c': '0x4'}, self.cpumasks())

    def test_guest_on_node_0_gets_node_0_reactors(self):
        self.connect(self.connection_info('vol-a'), guests.instance(node=0))
        self.assertEqual({'vhost-vol-a': '0x1'}, self.cpumasks())


class TestNodeWithoutReactor(NumaHostTestCase):
    """A third node has CPUs but no SPDK reactor."""

    host_nodes = {0: '0-1', 1: '2-3', 2: '4-5'}

    def test_required_refuses_and_creates_nothing(self):
        self.conf.config(group=compute.GROUP, numa_policy='required')
        err = self.assertRaises(
            connector_errors.NumaPlacementError,
            self.driver._connect_volume, self.context,
            self.connection_info('vol-a'), guests.instance(node=2))
        self.assertIn('no SPDK reactor runs on node 2', str(err))
        self.assertEqual({}, self.cpumasks())

    def test_preferred_falls_back_and_warns(self):
        logger = self.useFixture(fixtures.FakeLogger(
            name='os_brick_connector.numa'))
        self.conf.config(group=compute.GROUP, numa_policy='preferred')
        self.connect(self.connection_info('vol-a'), guests.instance(node=2))
        self.assertEqual({'vhost-vol-a': '0x1'}, self.cpumasks())
        self.assertIn('no SPDK reactor runs on node 2', logger.output)
