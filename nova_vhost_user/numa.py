"""Which host NUMA node a guest runs on, for the SPDK controller's cores.

The vhost controller polls on reactors chosen by NUMA node; putting them
on the guest's node keeps virtqueue and data accesses local.
"""

import collections

from nova.virt import hardware


def _topology_node(numa_topology):
    """The host node holding most of the guest's vCPUs (lowest on ties)."""
    counts = collections.Counter()
    for cell in numa_topology.cells:
        counts[cell.id] += len(cell.total_cpus)
    return min(counts, key=lambda node: (-counts[node], node))


def _cpu_nodes(host_topology):
    """{host CPU id: NUMA node id} from libvirt's host capabilities."""
    return {cpu.id: cell.id
            for cell in host_topology.cells for cpu in cell.cpus}


def guest_numa_node(instance, host_topology):
    """The host NUMA node for this guest's storage, or None for any.

    A guest with a NUMA topology is on the node(s) Nova placed its cells
    on. A guest without one floats over the CPUs Nova allows it
    (``[compute] cpu_shared_set``, else every host CPU): when those are
    all on one node, that is the node; otherwise there is no preference.
    """
    numa_topology = instance.numa_topology
    if numa_topology is not None and numa_topology.cells:
        return _topology_node(numa_topology)
    if host_topology is None or not host_topology.cells:
        return None
    cpu_nodes = _cpu_nodes(host_topology)
    allowed = hardware.get_cpu_shared_set() or set(cpu_nodes)
    nodes = {cpu_nodes[cpu] for cpu in allowed if cpu in cpu_nodes}
    return nodes.pop() if len(nodes) == 1 else None
