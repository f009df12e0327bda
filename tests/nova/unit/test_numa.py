"""NUMA layout from reactors and a fake sysfs, and controller placement."""

import fixtures

from os_brick_connector import connector_errors as errors
from os_brick_connector import numa
from tests import base
from tests.nova import fake_sysfs


class FakeReactors(object):
    """framework_get_reactors of a target with the given (lcore, numa)."""

    def __init__(self, reactors):
        self.reactors = reactors

    def framework_get_reactors(self):
        return {'tick_rate': 1, 'pid': 1, 'reactors': [
            {'lcore': core, 'numa_id': node, 'lw_threads': []}
            for core, node in self.reactors]}


class TestParsing(base.TestCase):

    def test_parse_cpulist(self):
        self.assertEqual({0, 1, 2, 3, 8, 10, 11},
                         numa.parse_cpulist('0-3,8,10-11\n'))
        self.assertEqual(set(), numa.parse_cpulist('\n'))

    def test_cpumask_round_trip(self):
        self.assertEqual([0, 2], numa.cpumask_cores('0x5'))
        self.assertEqual([4], numa.cpumask_cores(numa.core_mask(4)))
        self.assertEqual([1], numa.cpumask_cores('2'))

    def test_sysfs_cpu_nodes(self):
        sysfs = self.useFixture(fake_sysfs.FakeSysfs({0: '0-1', 1: '2-3'}))
        self.assertEqual({0: 0, 1: 0, 2: 1, 3: 1},
                         numa.sysfs_cpu_nodes(sysfs.root))

    def test_controller_load(self):
        """Each vhost controller runs in a thread named after it."""
        topology = numa.Topology({0: 0, 1: 0}, threads={
            'app_thread': 0, 'vhost-a': 0, 'vhost-b': 1, 'vhost-c': 1,
            'nvmf_tgt_poll_group_000': 1})
        self.assertEqual({0: 1, 1: 2}, topology.load('vhost-'))


class TestTopology(base.TestCase):

    def test_sysfs_decides_over_spdk(self):
        sysfs = self.useFixture(fake_sysfs.FakeSysfs({0: '0-1', 1: '2-3'}))
        logger = self.useFixture(fixtures.FakeLogger(
            name='os_brick_connector.numa'))
        client = FakeReactors([(0, 0), (2, 0), (3, 1)])
        topology = numa.Topology.read(client, sysfs.root)
        self.assertEqual({'0': [0], '1': [2, 3]}, topology.layout())
        self.assertIn('reactor 2 on NUMA node 0 but sysfs on node 1',
                      logger.output)

    def test_spdk_node_when_sysfs_has_none(self):
        sysfs = self.useFixture(fake_sysfs.FakeSysfs({}))
        client = FakeReactors([(0, 1), (1, -1)])
        topology = numa.Topology.read(client, sysfs.root)
        self.assertEqual({'-1': [1], '1': [0]}, topology.layout())
        self.assertIsNone(topology.node_of(1))
        self.assertEqual(1, topology.node_of(0))


class TestChooseCore(base.TestCase):

    def setUp(self):
        super().setUp()
        # Node 0: cores 0, 1; node 1: cores 2, 3; node 2 has none.
        self.topology = numa.Topology({0: 0, 1: 0, 2: 1, 3: 1})

    def test_fewest_controllers_on_the_node_first(self):
        self.assertEqual(2, numa.choose_core(self.topology, {}, 1,
                                             'required'))
        self.assertEqual(3, numa.choose_core(self.topology, {2: 1}, 1,
                                             'required'))
        self.assertEqual(2, numa.choose_core(self.topology,
                                             {2: 1, 3: 1, 0: 0}, 1,
                                             'preferred'))

    def test_no_preference_takes_any_least_loaded(self):
        self.assertEqual(1, numa.choose_core(self.topology,
                                             {0: 1, 2: 1, 3: 1}, None,
                                             'required'))

    def test_none_policy_ignores_the_node(self):
        self.assertEqual(0, numa.choose_core(self.topology, {}, 1, 'none'))

    def test_required_refuses(self):
        err = self.assertRaises(errors.NumaPlacementError, numa.choose_core,
                                self.topology, {}, 2, 'required')
        self.assertIn('node 2', str(err))

    def test_preferred_falls_back_with_warning(self):
        logger = self.useFixture(fixtures.FakeLogger(
            name='os_brick_connector.numa'))
        core = numa.choose_core(self.topology, {0: 3, 1: 2, 2: 1, 3: 2}, 2,
                                'preferred')
        self.assertEqual(2, core)
        self.assertIn('no SPDK reactor runs on node 2', logger.output)
        self.assertIn('core 2 (node 1)', logger.output)

    def test_no_reactors_at_all(self):
        self.assertRaises(errors.NumaPlacementError, numa.choose_core,
                          numa.Topology({}), {}, None, 'none')
