"""This host's NUMA layout of SPDK reactors, and where a controller goes.

A vhost-blk controller is polled by the reactors in its ``cpumask``; it
should be polled on the guest's NUMA node, so the guest's virtqueues and
the poller share a memory controller and last-level cache. Placement picks
one reactor (a single-core mask), the one with the fewest controllers,
so controllers spread evenly over a node's reactors instead of SPDK
putting them all on the mask's first core.

The node of a reactor is read from sysfs (``devices/system/node/node*/
cpulist``): those are the node numbers libvirt and Nova use for the guest,
so they are the ones to compare with. SPDK's own ``numa_id`` is used only
for a core sysfs does not place (no NUMA in sysfs, or a remapped lcore).
"""

import glob
import os
import re

from oslo_log import log

from os_brick_connector import connector_errors as errors

#: Where the NUMA layout is read (a test points it at a fake tree).
SYSFS_ROOT = '/sys'

LOG = log.getLogger(__name__)

UNKNOWN_NODE = -1
POLICY_REQUIRED = 'required'
POLICY_PREFERRED = 'preferred'
POLICY_NONE = 'none'


def parse_cpulist(text):
    """The CPUs of a sysfs list such as ``0-3,8,10-11``."""
    cpus = set()
    for part in text.strip().split(','):
        if not part:
            continue
        low, _sep, high = part.partition('-')
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def sysfs_cpu_nodes(sysfs_root):
    """Map each CPU to its NUMA node, as sysfs under ``sysfs_root`` says."""
    nodes = {}
    pattern = os.path.join(sysfs_root, 'devices', 'system', 'node',
                           'node*', 'cpulist')
    for path in glob.glob(pattern):
        match = re.search(r'node(\d+)$', os.path.dirname(path))
        if not match:
            continue
        with open(path) as src:
            for cpu in parse_cpulist(src.read()):
                nodes[cpu] = int(match.group(1))
    return nodes


def default_hugepage_kb(meminfo='/proc/meminfo'):
    """The host's default hugepage size in kB, the one SPDK maps."""
    with open(meminfo) as src:
        for line in src:
            if line.startswith('Hugepagesize:'):
                return int(line.split()[1])
    raise ValueError('no Hugepagesize in %s' % meminfo)


def hugepages_per_node(mem_mb, page_kb, reactor_nodes):
    """{node: pages} of ``page_kb`` holding an SPDK target's ``-s``.

    DPDK spreads ``-s`` (``mem_mb``) over the NUMA nodes of the target's
    cores (``reactor_nodes``, one entry per reactor), in proportion to
    their count; node 0 when none is known. Rounded up.
    """
    nodes = list(reactor_nodes) or [0]
    pages = -(-mem_mb * 1024 // page_kb)
    return {node: -(-pages * nodes.count(node) // len(nodes))
            for node in sorted(set(nodes))}


def in_interrupt_mode(reactors):
    """Whether every reactor of ``framework_get_reactors`` sleeps when idle.

    Only then does the target leave its cores to others, and only then
    does SPDK's NVMe-oF initiator refuse to run on it.
    """
    return bool(reactors) and all(r.get('in_interrupt') for r in reactors)


def cpumask_cores(mask):
    """The cores of an SPDK hex cpumask (``0x5`` or ``5``)."""
    value = int(mask, 16)
    return [core for core in range(value.bit_length()) if value >> core & 1]


def core_mask(core):
    """SPDK's hex cpumask for one core."""
    return '0x%x' % (1 << core)


class Topology(object):
    """The reactors of one SPDK target, their NUMA nodes, who runs where.

    SPDK runs each vhost controller in a thread of its own, named after
    the controller, on the core its cpumask names; so one
    ``framework_get_reactors`` answers where the reactors are, which
    controllers exist and how many each core polls.
    """

    def __init__(self, reactor_nodes, interrupt_mode=False, threads=None):
        # {lcore: node}; node is UNKNOWN_NODE when nobody knows it.
        self.reactor_nodes = dict(reactor_nodes)
        # Every reactor sleeps when idle (--interrupt-mode).
        self.interrupt_mode = interrupt_mode
        # {thread name: the lcore it runs on}
        self.threads = dict(threads or {})

    def load(self, prefix):
        """How many threads named ``prefix``-something each core runs."""
        load = {}
        for name, core in self.threads.items():
            if name.startswith(prefix):
                load[core] = load.get(core, 0) + 1
        return load

    @classmethod
    def read(cls, client, sysfs_root=None):
        """Ask the target for its reactors and sysfs for their nodes."""
        cpu_nodes = sysfs_cpu_nodes(sysfs_root or SYSFS_ROOT)
        reactor_nodes, threads = {}, {}
        reactors = client.framework_get_reactors()['reactors']
        for reactor in reactors:
            lcore = reactor['lcore']
            for thread in reactor.get('lw_threads') or ():
                threads[thread['name']] = lcore
            spdk_node = reactor.get('numa_id', UNKNOWN_NODE)
            node = cpu_nodes.get(lcore, spdk_node)
            if lcore in cpu_nodes and spdk_node not in (UNKNOWN_NODE, node):
                LOG.warning('SPDK places reactor %(core)d on NUMA node '
                            '%(spdk)d but sysfs on node %(node)d; using '
                            'sysfs, as Nova does for guests',
                            {'core': lcore, 'spdk': spdk_node, 'node': node})
            reactor_nodes[lcore] = node
        return cls(reactor_nodes, in_interrupt_mode(reactors), threads)

    def node_of(self, core):
        """The node of a reactor, or None when unknown."""
        node = self.reactor_nodes.get(core, UNKNOWN_NODE)
        return None if node == UNKNOWN_NODE else node

    def layout(self):
        """``{node: [cores]}`` for the connector properties.

        Keys are strings, as they would be after a trip through JSON
        anyway; reactors on no known node are under ``"-1"``.
        """
        result = {}
        for core, node in sorted(self.reactor_nodes.items()):
            result.setdefault(str(node), []).append(core)
        return result

    def cores_on(self, node):
        return sorted(core for core, where in self.reactor_nodes.items()
                      if where == node)


def _least_loaded(cores, load):
    return min(cores, key=lambda core: (load.get(core, 0), core))


def choose_core(topology, load, node, policy):
    """Pick the reactor for a new controller of a guest on ``node``.

    ``node`` None means the guest has no NUMA preference. Raises
    :class:`errors.NumaPlacementError` under the ``required`` policy when
    the node has no reactor.
    """
    every_core = sorted(topology.reactor_nodes)
    if not every_core:
        raise errors.NumaPlacementError(node=node,
                                        reason='the target has no reactors')
    if policy == POLICY_NONE or node is None:
        return _least_loaded(every_core, load)
    local = topology.cores_on(node)
    if local:
        return _least_loaded(local, load)
    reason = ('no SPDK reactor runs on node %s (reactors by node: %s)'
              % (node, topology.layout()))
    if policy == POLICY_REQUIRED:
        raise errors.NumaPlacementError(node=node, reason=reason)
    core = _least_loaded(every_core, load)
    LOG.warning('%(reason)s; numa_policy is preferred, so core %(core)d '
                '(node %(other)s) polls the volume: expect cross-node '
                'memory traffic', {'reason': reason, 'core': core,
                                   'other': topology.node_of(core)})
    return core
