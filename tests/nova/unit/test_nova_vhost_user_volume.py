"""LibvirtVhostUserBlkVolumeDriver against a stateful fake connector."""

import fixtures
from lxml import etree
from nova import exception
from oslo_config import fixture as config_fixture

from nova_vhost_user import brick
from nova_vhost_user import exception as vhost_exception
from nova_vhost_user import volume
from spdk_vhost_core import properties
from tests import base
from tests.nova.unit import nova_fakes as fakes

DISK_INFO = {'bus': 'virtio', 'dev': 'vdb', 'type': 'disk'}
# Two guests of one host sharing a multiattach volume.
UUIDS = ('6f0b4d53-2a3e-4a5b-9d8e-0c1d2e3f4a5b',
         '0e7c1a2b-3c4d-4e5f-8a6b-7c8d9e0f1a2b')


class TestVolumeDriver(base.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(volume.CONF))
        self.conf.config(group='spdk_vhost', guest_max_queues=4,
                         guest_reconnect_timeout=9)
        self.connector = fakes.FakeConnector(sizes={'vol-1': 2 << 30})
        self.useFixture(fixtures.MockPatchObject(
            brick, 'get_connector', return_value=self.connector))
        self.driver = volume.LibvirtVhostUserBlkVolumeDriver(
            fakes.FakeHost(fakes.host_topology([0, 1], [2, 3])))

    def _attach(self, conn, inst=None, disk_info=DISK_INFO):
        inst = inst or fakes.instance()
        self.driver.connect_volume(conn, inst)
        return etree.fromstring(
            self.driver.get_config(conn, disk_info).to_xml())

    def test_disk_xml(self):
        conn = fakes.connection_info(qos_specs={'total_iops_sec': 1000},
                                     access_mode='ro',
                                     logical_block_size='4096',
                                     discard=True, multiattach=True)

        root = self._attach(conn)

        self.assertEqual('vhostuser', root.get('type'))
        self.assertEqual('/var/tmp/vhost/vhost-vol-1',
                         root.find('source').get('path'))
        self.assertEqual('9', root.find('source/reconnect').get('timeout'))
        self.assertEqual('2', root.find('driver').get('queues'))
        self.assertEqual('ua-vol-1', root.find('alias').get('name'))
        # Read-only and QoS live in SPDK: nothing of them in the XML.
        self.assertEqual(['driver', 'alias', 'source', 'target'],
                         [c.tag for c in root])
        self.assertTrue(self.connector.controllers['vhost-vol-1']['readonly'])

    def test_queues_capped_by_config(self):
        root = self._attach(fakes.connection_info(),
                            fakes.instance(vcpus=16))

        self.assertEqual('4', root.find('driver').get('queues'))

    def test_numa_node_of_guest_reaches_connector(self):
        inst = fakes.instance(topology=fakes.numa_topology(
            [(1, [0, 1], 2048)]))

        self._attach(fakes.connection_info(), inst)

        self.assertEqual(1, self.connector.controllers['vhost-vol-1'][
            'numa_node'])

    def test_encrypted_volume_refused_before_controller(self):
        conn = fakes.connection_info(encrypted=True)

        self.assertRaises(exception.VolumeEncryptionNotSupported,
                          self.driver.connect_volume, conn, fakes.instance())
        self.assertEqual({}, self.connector.controllers)

    def test_bad_access_mode_refused_before_controller(self):
        conn = fakes.connection_info(access_mode='wo')

        self.assertRaises(exception.InvalidVolumeAccessMode,
                          self.driver.connect_volume, conn, fakes.instance())
        self.assertEqual({}, self.connector.controllers)

    def test_only_virtio_bus(self):
        conn = fakes.connection_info()
        self.driver.connect_volume(conn, fakes.instance())

        self.assertRaises(vhost_exception.VhostUserBusUnsupported,
                          self.driver.get_config, conn,
                          dict(DISK_INFO, bus='scsi'))

    def test_disconnect_removes_controller(self):
        conn = fakes.connection_info()
        self.driver.connect_volume(conn, fakes.instance())

        self.driver.disconnect_volume(conn, fakes.instance())

        self.assertEqual({}, self.connector.controllers)

    def test_extend_returns_connector_size(self):
        self.assertEqual(2 << 30, self.driver.extend_volume(
            fakes.connection_info(), fakes.instance(), 2 << 30))

    def test_multiattach_each_guest_its_own_socket(self):
        conns = [fakes.connection_info() for _uuid in UUIDS]
        for conn in conns:
            conn['multiattach'] = True
        insts = [fakes.instance(uuid=uuid) for uuid in UUIDS]
        roots = [self._attach(conn, inst)
                 for conn, inst in zip(conns, insts)]
        paths = [root.find('source').get('path') for root in roots]
        self.assertEqual(2, len(set(paths)))
        for path, uuid in zip(paths, UUIDS):
            self.assertEqual(
                '/var/tmp/vhost/' + properties.controller_name('vol-1', uuid),
                path)
        # Same alias (the volume's) in each guest; no <shareable/>.
        self.assertEqual(['ua-vol-1'] * 2,
                         [root.find('alias').get('name') for root in roots])
        self.assertIsNone(roots[0].find('shareable'))
        # Detach and extend reach the guest's own controller.
        self.assertEqual(2 << 30, self.driver.extend_volume(
            conns[1], insts[1], 2 << 30))
        self.driver.disconnect_volume(conns[0], insts[0])
        self.assertEqual([properties.controller_name('vol-1', UUIDS[1])],
                         list(self.connector.controllers))
        self.driver.disconnect_volume(conns[1], insts[1])
        self.assertEqual({}, self.connector.controllers)

    def test_single_attach_keeps_the_volume_named_controller(self):
        conn = fakes.connection_info()
        self._attach(conn)
        self.assertEqual(['vhost-vol-1'], list(self.connector.controllers))
        self.assertNotIn('attached_to', conn['data'])
