"""Guest NUMA node choice and the guest memory checks."""

from oslo_config import fixture as config_fixture

from nova_vhost_user import memory
from nova_vhost_user import numa
from nova_vhost_user import volume
from tests import base
from tests.nova.unit import nova_fakes as fakes

TWO_NODES = fakes.host_topology([0, 1, 2, 3], [4, 5, 6, 7])


class TestGuestNumaNode(base.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(volume.CONF))

    def test_node_of_single_cell(self):
        inst = fakes.instance(topology=fakes.numa_topology(
            [(1, [0, 1], 2048)]))

        self.assertEqual(1, numa.guest_numa_node(inst, TWO_NODES))

    def test_node_with_most_vcpus_lowest_on_ties(self):
        most = fakes.instance(topology=fakes.numa_topology(
            [(0, [0], 2048), (1, [1, 2], 2048)]))
        tie = fakes.instance(topology=fakes.numa_topology(
            [(1, [0], 2048), (0, [1], 2048)]))

        self.assertEqual(1, numa.guest_numa_node(most, TWO_NODES))
        self.assertEqual(0, numa.guest_numa_node(tie, TWO_NODES))

    def test_floating_guest_on_shared_set_of_one_node(self):
        self.conf.config(group='compute', cpu_shared_set='5-7')

        self.assertEqual(1, numa.guest_numa_node(fakes.instance(),
                                                 TWO_NODES))

    def test_floating_guest_over_two_nodes_has_no_preference(self):
        self.conf.config(group='compute', cpu_shared_set='3-4')

        self.assertIsNone(numa.guest_numa_node(fakes.instance(), TWO_NODES))

    def test_all_host_cpus_when_no_shared_set(self):
        one_node = fakes.host_topology([0, 1])

        self.assertIsNone(numa.guest_numa_node(fakes.instance(), TWO_NODES))
        self.assertEqual(0, numa.guest_numa_node(fakes.instance(), one_node))

    def test_no_host_topology(self):
        self.assertIsNone(numa.guest_numa_node(fakes.instance(), None))


class TestDomainMemory(base.TestCase):

    def test_hugepages_shared_by_backing(self):
        self.assertIsNone(memory.domain_problem(
            fakes.domain_xml(fakes.HUGEPAGES_SHARED)))

    def test_hugepages_shared_by_every_cell(self):
        xml = fakes.domain_xml(
            '<memoryBacking><hugepages/></memoryBacking>',
            '<cell id="0" memAccess="shared"/>'
            '<cell id="1" memAccess="shared"/>')

        self.assertIsNone(memory.domain_problem(xml))

    def test_one_private_cell_is_not_shared(self):
        xml = fakes.domain_xml(fakes.HUGEPAGES_SHARED,
                               '<cell id="0"/><cell id="1" '
                               'memAccess="private"/>')

        self.assertEqual(memory.NOT_SHARED, memory.domain_problem(xml))

    def test_hugepages_private(self):
        xml = fakes.domain_xml('<memoryBacking><hugepages/></memoryBacking>')

        self.assertEqual(memory.NOT_SHARED, memory.domain_problem(xml))

    def test_plain_memfd_shared_is_refused(self):
        xml = fakes.domain_xml('<memoryBacking><source type="memfd"/>'
                               '<access mode="shared"/></memoryBacking>')

        self.assertEqual(memory.NO_HUGEPAGES, memory.domain_problem(xml))

    def test_no_memory_backing(self):
        self.assertEqual(memory.NO_HUGEPAGES,
                         memory.domain_problem(fakes.domain_xml()))


class TestInstanceMemory(base.TestCase):

    def test_hugepage_cells(self):
        inst = fakes.instance(topology=fakes.numa_topology(
            [(0, [0], 2048), (1, [1], 1048576)]))

        self.assertIsNone(memory.instance_problem(inst))

    def test_refusals(self):
        for topology in (None,
                         fakes.numa_topology([(0, [0], None)]),
                         fakes.numa_topology([(0, [0], 4)]),
                         fakes.numa_topology([(0, [0], 2048),
                                              (1, [1], 4)])):
            self.assertEqual(memory.NO_HUGEPAGES_REQUESTED,
                             memory.instance_problem(
                                 fakes.instance(topology=topology)))
