"""Fakes for the Nova-side unit tests: a stateful connector, hosts, guests.

The connector fake keeps controllers the way SPDK does (one per volume,
or per guest of a multiattach volume, named as the real connector names
them; created by connect, gone after disconnect), so tests see what the driver
really caused, not which method it called.
"""

from nova import objects
from nova.virt.libvirt import config as vconfig

from spdk_vhost_core import properties

objects.register_all()


class FakeConnector(object):
    """An SPDK vhost connector holding controllers in a dict."""

    def __init__(self, vhost_dir='/var/tmp/vhost', sizes=None):
        self.vhost_dir = vhost_dir
        self.controllers = {}
        self.sizes = sizes or {}

    @staticmethod
    def name(props):
        """The real connector's controller name for these properties."""
        return properties.controller_name(props['volume_id'],
                                          props.get('attached_to'))

    def connect_volume(self, props):
        name = self.name(props)
        ctrl = self.controllers.setdefault(name, {
            'numa_node': props.get('numa_node'),
            'readonly': props.get('access_mode') == 'ro'})
        return {'type': 'vhost_user_blk',
                'path': '%s/%s' % (self.vhost_dir, name),
                'controller': name, 'cpumask': '0x1',
                'numa_node': ctrl['numa_node']}

    def disconnect_volume(self, props, device_info, force=False):
        self.controllers.pop(self.name(props), None)

    def extend_volume(self, props):
        return self.sizes.get(props['volume_id'])


def host_topology(*node_cpus):
    """libvirt capabilities topology: node i has CPUs node_cpus[i]."""
    topology = vconfig.LibvirtConfigCapsNUMATopology()
    for node, cpus in enumerate(node_cpus):
        cell = vconfig.LibvirtConfigCapsNUMACell()
        cell.id = node
        for cpu_id in cpus:
            cpu = vconfig.LibvirtConfigCapsNUMACPU()
            cpu.id = cpu_id
            cell.cpus.append(cpu)
        topology.cells.append(cell)
    return topology


class FakeHost(object):
    """What the volume driver asks of nova's libvirt Host."""

    def __init__(self, topology):
        caps = vconfig.LibvirtConfigCaps()
        caps.host = vconfig.LibvirtConfigCapsHost()
        caps.host.topology = topology
        self.caps = caps

    def get_capabilities(self):
        return self.caps


def numa_topology(cells):
    """InstanceNUMATopology from (host node, vCPU ids, page size KiB)."""
    return objects.InstanceNUMATopology(cells=[
        objects.InstanceNUMACell(id=node, cpuset=set(cpus), pcpuset=set(),
                                 memory=512, pagesize=pagesize)
        for node, cpus, pagesize in cells])


def instance(vcpus=2, topology=None,
             uuid='6f0b4d53-2a3e-4a5b-9d8e-0c1d2e3f4a5b'):
    return objects.Instance(
        uuid=uuid, id=7,
        flavor=objects.Flavor(vcpus=vcpus, memory_mb=1024, extra_specs={}),
        numa_topology=topology)


def connection_info(volume_id='vol-1', **data):
    data.setdefault('volume_id', volume_id)
    data.setdefault('transport', 'local')
    data.setdefault('access_mode', 'rw')
    return {'driver_volume_type': 'spdk_vhost', 'serial': volume_id,
            'data': data}


class FakeGuest(object):
    """A libvirt guest: its live XML and whether it runs."""

    def __init__(self, xml, active=True):
        self.xml = xml
        self.active = active
        self.resized = []

    def is_active(self):
        return self.active

    def get_xml_desc(self, **kwargs):
        return self.xml

    def get_block_device(self, path):
        self.resized.append(path)
        raise AssertionError('libvirt block resize used on %s' % path)


def domain_xml(memory_backing='', cells=''):
    numa = '<numa>%s</numa>' % cells if cells else ''
    return ('<domain type="qemu"><name>g</name>%s'
            '<cpu>%s</cpu><devices/></domain>' % (memory_backing, numa))


HUGEPAGES_SHARED = ('<memoryBacking><hugepages/><source type="memfd"/>'
                    '<access mode="shared"/></memoryBacking>')
