"""Live migration hooks: the destination's sockets, local volumes refused."""

from unittest import mock

from lxml import etree
from nova import exception
from nova import objects
from nova.virt.libvirt import driver as libvirt_driver

from nova_vhost_user import migration
from tests.nova.unit import nova_fakes as fakes
from tests.nova.unit import test_nova_vhost_user_driver as driver_tests

SOURCE_XML = '''<domain type="qemu"><name>g</name><devices>
<disk type="vhostuser" device="disk">
  <driver name="qemu" type="raw" queues="2"/>
  <source type="unix" path="/src/vhost/vhost-vol-1">
    <reconnect enabled="yes" timeout="10"/>
  </source>
  <target dev="vdb" bus="virtio"/>
  <alias name="ua-vol-1"/>
  <address type="pci" domain="0x0000" bus="0x00" slot="0x07"/>
</disk>
<disk type="file" device="disk"><source file="/img"/>
  <target dev="vda" bus="virtio"/></disk>
</devices></domain>'''


def bdm_info(conn, dev='vdb'):
    bdm = objects.LibvirtLiveMigrateBDMInfo(
        serial=conn['serial'], bus='virtio', dev=dev, type='disk',
        format=None, boot_index=None)
    bdm.connection_info = conn
    return bdm


def dest_conn(volume_id='vol-1', transport='tcp'):
    conn = fakes.connection_info(volume_id, transport=transport)
    conn['data'].update(device_path='/dst/vhost/vhost-%s' % volume_id,
                        vhost_queues=4)
    return conn


def disk(xml, dev):
    return etree.fromstring(xml).find(
        "./devices/disk/target[@dev='%s']/.." % dev)


class TestDestinationXml(driver_tests.DriverTestCase):

    def rewrite(self, bdms, xml=SOURCE_XML):
        return migration.update_vhost_disks(
            xml, bdms, self.driver._get_volume_config)

    def test_source_and_queues_from_destination(self):
        new = disk(self.rewrite([bdm_info(dest_conn())]), 'vdb')

        self.assertEqual('/dst/vhost/vhost-vol-1',
                         new.find('source').get('path'))
        self.assertEqual('4', new.find('driver').get('queues'))
        # What the guest sees does not move.
        self.assertEqual('0x07', new.find('address').get('slot'))
        self.assertEqual('ua-vol-1', new.find('alias').get('name'))

    def test_found_by_target_without_alias(self):
        xml = SOURCE_XML.replace('<alias name="ua-vol-1"/>', '')
        new = disk(self.rewrite([bdm_info(dest_conn())], xml), 'vdb')
        self.assertEqual('/dst/vhost/vhost-vol-1',
                         new.find('source').get('path'))

    def test_other_disks_untouched(self):
        other = bdm_info({'driver_volume_type': 'iscsi', 'serial': 'x',
                          'data': {}}, dev='vda')
        self.assertEqual(SOURCE_XML, self.rewrite([other]))

    def test_nova_rewrite_alone_keeps_the_source_socket(self):
        """Why the hook exists: Nova's matching by <serial> skips it."""
        from nova.virt.libvirt import migration as nova_migration
        migrate_data = objects.LibvirtLiveMigrateData(
            bdms=[bdm_info(dest_conn())])
        doc = nova_migration._update_volume_xml(
            etree.fromstring(SOURCE_XML), migrate_data, None,
            self.driver._get_volume_config)
        self.assertEqual('/src/vhost/vhost-vol-1', doc.find(
            "./devices/disk/source[@type='unix']").get('path'))

    def test_migration_operation_sees_destination_xml(self):
        migrate_data = objects.LibvirtLiveMigrateData(
            bdms=[bdm_info(dest_conn())])
        domain = mock.Mock()
        domain.XMLDesc.return_value = SOURCE_XML
        guest = mock.Mock(_domain=domain)
        seen = {}

        def operation(self_, ctx, inst, dest, block, data, wrapped, names):
            seen['xml'] = wrapped.get_xml_desc(dump_migratable=True)
            seen['live'] = wrapped.get_xml_desc()

        with mock.patch.object(libvirt_driver.LibvirtDriver,
                               '_live_migration_operation', operation):
            self.driver._live_migration_operation(
                None, fakes.instance(), 'dest', False, migrate_data, guest,
                [])
        self.assertIn('/dst/vhost/vhost-vol-1', seen['xml'])
        self.assertEqual(SOURCE_XML, seen['live'])


class TestSourcePreCheck(driver_tests.DriverTestCase):

    def check(self, conn):
        bdi = {'block_device_mapping': [{'connection_info': conn}]}
        data = objects.LibvirtLiveMigrateData()
        with mock.patch.object(libvirt_driver.LibvirtDriver,
                               'check_can_live_migrate_source',
                               autospec=True,
                               return_value=data) as parent:
            result = self.driver.check_can_live_migrate_source(
                None, fakes.instance(), data, block_device_info=bdi)
        return parent, result

    def test_local_volume_refused(self):
        err = self.assertRaises(exception.MigrationPreCheckError,
                                self.check, fakes.connection_info('vol-9'))
        self.assertIn('vol-9', str(err))
        self.assertIn('transport local', str(err))

    def test_remote_volume_passes_to_nova(self):
        parent, result = self.check(dest_conn(transport='tcp'))
        parent.assert_called_once()


class TestMemoryBacking(driver_tests.DriverTestCase):
    """Nova strips the shared memfd backing; it is put back."""

    SOURCE = fakes.domain_xml(fakes.HUGEPAGES_SHARED)

    def test_stripped_backing_restored(self):
        stripped = fakes.domain_xml('<memoryBacking><hugepages/>'
                                    '</memoryBacking>')
        backing = etree.fromstring(migration.keep_memory_backing(
            self.SOURCE, stripped)).find('memoryBacking')
        self.assertEqual('memfd', backing.find('source').get('type'))
        self.assertEqual('shared', backing.find('access').get('mode'))
        self.assertIsNotNone(backing.find('hugepages'))

    def test_file_backed_destination_untouched(self):
        dest = fakes.domain_xml('<memoryBacking><source type="file"/>'
                                '<access mode="shared"/></memoryBacking>')
        self.assertEqual(dest, migration.keep_memory_backing(self.SOURCE,
                                                             dest))

    def test_file_backed_source_left_to_nova(self):
        source = fakes.domain_xml('<memoryBacking><source type="file"/>'
                                  '<access mode="shared"/></memoryBacking>')
        dest = fakes.domain_xml('<memoryBacking/>')
        self.assertEqual(dest, migration.keep_memory_backing(source, dest))

    def test_migrate_sends_the_source_backing(self):
        domain = mock.Mock()
        domain.XMLDesc.return_value = self.SOURCE
        guest = migration.DestinationXmlGuest(mock.Mock(_domain=domain),
                                              lambda xml: xml)
        guest.migrate('qemu+tcp://b/system', destination_xml=fakes.domain_xml(
            '<memoryBacking><hugepages/></memoryBacking>'), flags=0)
        params = domain.migrateToURI3.call_args.kwargs['params']
        self.assertIn('<access mode="shared"/>', params['destination_xml'])
