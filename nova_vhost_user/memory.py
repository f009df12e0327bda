"""Is a guest's memory usable by an SPDK vhost target?

SPDK maps all of the guest's memory, so the memory must be shared with
other processes; and it must be hugepage-backed: plain memfd memory makes
a real SPDK target segfault at VHOST_USER_SET_MEM_TABLE. Each
function returns None when the memory is fine, else what is wrong, in
words for the operator.
"""

import mmap

from lxml import etree

NO_HUGEPAGES = 'memory not backed by hugepages'
NOT_SHARED = 'private (not shared) memory'
NO_HUGEPAGES_REQUESTED = ('no hugepages asked for by its flavor or image '
                          '(hw:mem_page_size)')


def domain_problem(domain_xml):
    """Check a defined domain's XML: what QEMU really runs with."""
    root = etree.fromstring(domain_xml)
    backing = root.find('memoryBacking')
    if backing is None or backing.find('hugepages') is None:
        return NO_HUGEPAGES
    access = backing.find('access')
    default = access.get('mode') if access is not None else 'private'
    cells = root.findall('cpu/numa/cell')
    modes = [cell.get('memAccess', default) for cell in cells] or [default]
    if any(mode != 'shared' for mode in modes):
        return NOT_SHARED
    return None


def instance_problem(instance):
    """Check an instance about to be (re)built from its NUMA topology.

    Nova gives a guest hugepages only through its NUMA cells' page size;
    the compute driver then makes them shared (see driver.py).
    """
    smallest_kib = mmap.PAGESIZE // 1024
    topology = instance.numa_topology
    if topology is None or not topology.cells:
        return NO_HUGEPAGES_REQUESTED
    if any(not cell.pagesize or cell.pagesize <= smallest_kib
           for cell in topology.cells):
        return NO_HUGEPAGES_REQUESTED
    return None
