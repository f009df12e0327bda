"""The devstack plugin keeps Nova's guests off the SPDK reactor cores.

Run over the stubs of tests/unit/devstack, with the host's online CPUs
read from a file of the test's (the kernel's cpu list format).
"""

import os

from tests.unit import test_devstack_plugin as plugin


class GuestCpusTest(plugin.PluginTestBase):

    def setUp(self):
        super().setUp()
        self.prebuilt_spdk()

    def shared_set(self, online, **env):
        """cpu_shared_set written for these online CPUs, or None."""
        cpus = self.path('online')
        with open(cpus, 'w') as f:
            f.write(online + '\n')
        result = self.run_plugin('post-config', SPDK_HOST_CPUS_FILE=cpus,
                                 **env)
        compute = self.ini('NOVA_CPU_CONF')
        if not compute.has_section('compute'):
            return None, result
        return compute['compute'].get('cpu_shared_set'), result

    def test_default_mask_leaves_core_0_to_spdk(self):
        shared, result = self.shared_set('0-7')
        self.assertEqual('1-7', shared)
        self.assertEqual('', result.stderr)

    def test_same_mask_as_the_target_runs_with(self):
        shared, _ = self.shared_set('0-7', SPDK_REACTOR_MASK='0x6')
        self.assertEqual('0,3-7', shared)
        [call] = self.assertCalled('run_process spdk-tgt')
        self.assertIn(' -m 0x6 ', call)

    def test_core_list_mask_and_offline_cpus(self):
        shared, _ = self.shared_set('0-3,8-11',
                                    SPDK_REACTOR_MASK='[0-1,9]')
        self.assertEqual('2-3,8,10-11', shared)

    def test_mask_wider_than_64_bits(self):
        shared, _ = self.shared_set(
            '0-79', SPDK_REACTOR_MASK='0x10000000000000000F')
        self.assertEqual('4-67,69-79', shared)

    def test_single_cpu_host_says_nothing_is_left(self):
        shared, result = self.shared_set('0')
        self.assertIsNone(shared)
        self.assertIn('No CPU left for guests', result.stderr)
        self.assertIn('SPDK_REACTOR_MASK=0x1', result.stderr)

    def test_bad_mask_is_refused(self):
        cpus = self.path('online')
        with open(cpus, 'w') as f:
            f.write('0-3\n')
        result = self.run_plugin('post-config', check=False,
                                 SPDK_HOST_CPUS_FILE=cpus,
                                 SPDK_REACTOR_MASK='cores0-1')
        self.assertNotEqual(0, result.returncode)
        self.assertIn("not 'cores0-1'", result.stderr)
        self.assertFalse(self.ini('NOVA_CPU_CONF').has_section('compute'))


class ReservedHugePagesTest(plugin.PluginTestBase):
    """Nova reserves the target's -s on its reactors' NUMA nodes."""

    def setUp(self):
        super().setUp()
        self.prebuilt_spdk()
        self.nodes = self.path('node')
        self.meminfo = self.path('meminfo')
        with open(self.meminfo, 'w') as f:
            f.write('HugePages_Total: 4096\nHugepagesize: 2048 kB\n')

    def node(self, node, cpus):
        os.makedirs(os.path.join(self.nodes, 'node%d' % node))
        with open(os.path.join(self.nodes, 'node%d' % node,
                               'cpulist'), 'w') as f:
            f.write(cpus + '\n')

    def reserved(self, **env):
        self.run_plugin('post-config', SPDK_NODES_DIR=self.nodes,
                        SPDK_MEMINFO_FILE=self.meminfo, **env)
        return self.ini('NOVA_CPU_CONF')['DEFAULT'][
            'reserved_huge_pages'].split('\n')

    def test_one_node_holds_it_all(self):
        self.node(0, '0-7')
        self.assertEqual(['node:0,size:2048,count:512'], self.reserved())
        [call] = self.assertCalled('run_process spdk-tgt')
        self.assertIn(' -s 1024 ', call)

    def test_reactors_on_two_nodes_share_it(self):
        self.node(0, '0-3')
        self.node(1, '4-7')
        self.assertEqual(['node:0,size:2048,count:128',
                          'node:1,size:2048,count:128'],
                         self.reserved(SPDK_REACTOR_MASK='0x11',
                                       SPDK_MEM_MB='512'))
