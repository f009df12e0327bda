"""LibvirtVhostUserDriver's hooks into Nova's libvirt driver."""

import os
from unittest import mock

import fixtures
from nova import exception
from nova import objects
from nova.virt import fake
from nova.virt.libvirt import config as vconfig
from nova.virt.libvirt import driver as libvirt_driver
from oslo_config import fixture as config_fixture

from nova_vhost_user import brick
from nova_vhost_user import driver
from nova_vhost_user import exception as vhost_exception
from nova_vhost_user import libvirt_config
from nova_vhost_user import reactors
from nova_vhost_user import volume
from os_brick_connector import options
from spdk_vhost_core import exception as spdk_exception
from spdk_vhost_core import spdk_rpc
from tests import base
from tests.nova.unit import nova_fakes as fakes

HUGEPAGE_TOPOLOGY = fakes.numa_topology([(0, [0, 1], 2048)])
HOST_NQN = ('nqn.2014-08.org.nvmexpress:uuid:'
            '1b4e28ba-2fa1-11d2-883f-b9a761bde3fb')


class DriverTestCase(base.TestCase):
    """A driver on a Host that never connects: its calls are faked."""

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(volume.CONF))
        self.useFixture(fixtures.MockPatchObject(
            libvirt_driver, 'VOLUME_DRIVERS',
            dict(libvirt_driver.VOLUME_DRIVERS)))
        self.connector = fakes.FakeConnector(sizes={'vol-1': 3 << 30})
        self.useFixture(fixtures.MockPatchObject(
            brick, 'get_connector', return_value=self.connector))
        self.driver = driver.LibvirtVhostUserDriver(fake.FakeVirtAPI())
        self.driver._host = mock.Mock(
            spec=['get_guest', 'get_capabilities', 'find_secret'])
        self.driver._host.find_secret.return_value = None
        self.driver._host.get_capabilities.return_value = fakes.FakeHost(
            fakes.host_topology([0, 1])).caps
        self.guest = None
        self.driver._host.get_guest.side_effect = self._get_guest

    def _get_guest(self, instance):
        if self.guest is None:
            raise exception.InstanceNotFound(instance_id=instance.uuid)
        return self.guest


class TestVolumeDriverTable(DriverTestCase):

    def test_spdk_vhost_is_loaded_by_nova(self):
        vol_driver = self.driver._get_volume_driver(fakes.connection_info())

        self.assertIsInstance(vol_driver,
                              volume.LibvirtVhostUserBlkVolumeDriver)
        self.assertIs(self.connector, vol_driver.connector)

    def test_other_types_untouched(self):
        self.assertEqual(
            'nova.virt.libvirt.volume.iscsi.LibvirtISCSIVolumeDriver',
            libvirt_driver.VOLUME_DRIVERS['iscsi'])


class TestMultiattachDisconnect(DriverTestCase):
    """Nova's skip of a shared host connection does not apply here."""

    def test_vhost_volumes_always_disconnect(self):
        api = self.driver._volume_api = mock.Mock(spec=['get'])
        vol_driver = self.driver._get_volume_driver(fakes.connection_info())
        self.assertTrue(self.driver._should_disconnect_target(
            None, fakes.instance(), True, vol_driver, 'vol-1'))
        api.get.assert_not_called()

    def test_other_drivers_keep_novas_check(self):
        api = self.driver._volume_api = mock.Mock(spec=['get'])
        api.get.return_value = {'attachments': {'a': {}, 'b': {}}}
        other = mock.Mock(spec=[])
        inst = fakes.instance()
        inst.host = 'compute1'
        with mock.patch.object(objects.InstanceList,
                               'get_uuids_by_host', autospec=True,
                               return_value=['a', 'b']):
            self.assertFalse(self.driver._should_disconnect_target(
                None, inst, True, other, 'vol-1'))


class TestAttachGuard(DriverTestCase):

    def _connect(self, inst):
        conn = fakes.connection_info()
        self.driver._connect_volume(None, conn, inst)
        return conn

    def test_running_guest_without_hugepages_refused(self):
        self.guest = fakes.FakeGuest(fakes.domain_xml(
            '<memoryBacking><source type="memfd"/><access mode="shared"/>'
            '</memoryBacking>'))

        err = self.assertRaises(vhost_exception.VhostUserMemoryNotShared,
                                self._connect,
                                fakes.instance(topology=HUGEPAGE_TOPOLOGY))

        self.assertEqual({}, self.connector.controllers)
        self.assertIn('hw:mem_page_size', str(err))
        self.assertIn('not backed by hugepages', str(err))

    def test_running_guest_private_hugepages_refused(self):
        self.guest = fakes.FakeGuest(fakes.domain_xml(
            '<memoryBacking><hugepages/></memoryBacking>'))

        err = self.assertRaises(vhost_exception.VhostUserMemoryNotShared,
                                self._connect, fakes.instance())

        self.assertIn('not shared', str(err))
        self.assertEqual({}, self.connector.controllers)

    def test_running_guest_shared_hugepages_attached(self):
        # The live XML decides, even if the instance record says nothing.
        self.guest = fakes.FakeGuest(fakes.domain_xml(
            fakes.HUGEPAGES_SHARED))

        conn = self._connect(fakes.instance())

        self.assertEqual(['vhost-vol-1'], list(self.connector.controllers))
        self.assertEqual('/var/tmp/vhost/vhost-vol-1',
                         conn['data']['device_path'])

    def test_guest_being_built_judged_by_flavor(self):
        self.assertRaises(vhost_exception.VhostUserMemoryNotShared,
                          self._connect, fakes.instance())
        self.assertEqual({}, self.connector.controllers)

        self._connect(fakes.instance(topology=HUGEPAGE_TOPOLOGY))

        self.assertEqual(['vhost-vol-1'], list(self.connector.controllers))

    def test_stopped_guest_judged_by_flavor(self):
        self.guest = fakes.FakeGuest(fakes.domain_xml(), active=False)

        self._connect(fakes.instance(topology=HUGEPAGE_TOPOLOGY))

        self.assertEqual(['vhost-vol-1'], list(self.connector.controllers))

    def test_other_volume_types_not_checked(self):
        vol_driver = mock.Mock()
        self.useFixture(fixtures.MockPatchObject(
            self.driver, '_get_volume_driver', return_value=vol_driver))
        conn = {'driver_volume_type': 'iscsi', 'data': {}}

        self.driver._connect_volume(None, conn, fakes.instance())

        vol_driver.connect_volume.assert_called_once_with(conn, mock.ANY)


class TestMemoryBacking(DriverTestCase):

    def _backing(self, nova_backing):
        self.useFixture(fixtures.MockPatchObject(
            libvirt_driver.LibvirtDriver, '_get_guest_memory_backing_config',
            return_value=nova_backing))
        return self.driver._get_guest_memory_backing_config(
            None, None, None, None)

    def _hugepages(self):
        page = vconfig.LibvirtConfigGuestMemoryBackingPage()
        page.size_kb = 2048
        page.nodeset = [0]
        backing = vconfig.LibvirtConfigGuestMemoryBacking()
        backing.hugepages = [page]
        return backing

    def test_hugepages_become_shared_memfd(self):
        backing = self._backing(self._hugepages())

        self.assertIsInstance(backing,
                              libvirt_config.LibvirtConfigGuestMemoryBacking)
        self.assertTrue(backing.sharedaccess)
        self.assertTrue(backing.memfd)
        self.assertEqual([2048], [p.size_kb for p in backing.hugepages])

    def test_file_source_when_configured(self):
        self.conf.config(group='spdk_vhost', guest_memory_source='file')

        backing = self._backing(self._hugepages())

        self.assertTrue(backing.sharedaccess)
        self.assertFalse(backing.memfd)

    def test_no_memfd_outside_qemu(self):
        self.conf.config(group='libvirt', virt_type='lxc')

        self.assertFalse(self._backing(self._hugepages()).memfd)

    def test_guests_without_hugepages_untouched(self):
        self.assertIsNone(self._backing(None))
        locked = vconfig.LibvirtConfigGuestMemoryBacking()
        locked.locked = True

        self.assertIs(locked, self._backing(locked))
        self.assertFalse(locked.sharedaccess)


class TestVolumeConnector(DriverTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MockPatchObject(
            libvirt_driver.LibvirtDriver, 'get_volume_connector',
            return_value={'host': 'cmp1', 'ip': '192.0.2.5'}))
        self.log = self.useFixture(fixtures.FakeLogger())
        options.register_opts(volume.CONF)
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.conf.config(group='spdk_vhost', target_id='t1',
                         host_nqn=HOST_NQN,
                         spdk_rpc_socket=os.path.join(self.tmp, 'none.sock'),
                         spdk_rpc_connect_retries=0)
        # Every RPC the real connector would send is counted, and fails.
        self.rpcs = []
        self.useFixture(fixtures.MockPatchObject(
            spdk_rpc.SpdkClient, 'call', side_effect=self._rpc))

    def _rpc(self, method, params=None):
        self.rpcs.append(method)
        raise spdk_exception.TargetUnreachable(method, message='no target')

    def test_only_what_cinder_reads_and_no_rpc(self):
        # Cinder's driver reads spdk_target_id, nqn and the reconnect
        # settings; none needs the target, so a target that is down
        # changes nothing.
        self.assertEqual({'host': 'cmp1', 'ip': '192.0.2.5',
                          'spdk_target_id': 't1', 'nqn': HOST_NQN,
                          'spdk_nvme_reconnect': {
                              'ctrlr_loss_timeout_sec': 120,
                              'reconnect_delay_sec': 2,
                              'fast_io_fail_timeout_sec': 70}},
                         self.driver.get_volume_connector(None))
        self.assertEqual([], self.rpcs)
        self.assertEqual('', self.log.output)

    def test_identity_read_error_keeps_other_volume_types_working(self):
        # Not an SPDK error: the host NQN file cannot be read.
        self.conf.config(group='spdk_vhost', host_nqn=None,
                         host_nqn_file=self.tmp)

        props = self.driver.get_volume_connector(None)

        self.assertEqual({'host': 'cmp1', 'ip': '192.0.2.5'}, props)
        self.assertEqual(1, self.log.output.count('cannot attach SPDK'))
        self.assertIn('IsADirectoryError', self.log.output)

    def test_any_connector_failure_is_logged_not_raised(self):
        self.useFixture(fixtures.MockPatchObject(
            brick, 'get_connector_properties',
            side_effect=ValueError('bad machine id')))

        self.assertEqual({'host': 'cmp1', 'ip': '192.0.2.5'},
                         self.driver.get_volume_connector(None))
        self.assertEqual(1, self.log.output.count('cannot attach SPDK'))
        self.assertIn('ValueError: bad machine id', self.log.output)


class TestExtend(DriverTestCase):

    def test_online_extend_without_block_resize(self):
        self.guest = fakes.FakeGuest(fakes.domain_xml(
            fakes.HUGEPAGES_SHARED))

        self.driver.extend_volume(None, fakes.connection_info(),
                                  fakes.instance(), 3 << 30)

        self.assertEqual([], self.guest.resized)

    def test_no_size_is_a_failure(self):
        self.assertRaises(exception.VolumeExtendFailed,
                          self.driver.extend_volume, None,
                          fakes.connection_info('vol-2'),
                          fakes.instance(), 3 << 30)

    def test_other_types_use_nova(self):
        parent = self.useFixture(fixtures.MockPatchObject(
            libvirt_driver.LibvirtDriver, 'extend_volume')).mock
        conn = {'driver_volume_type': 'rbd', 'data': {}}

        self.driver.extend_volume(None, conn, fakes.instance(), 1)

        parent.assert_called_once_with(None, conn, mock.ANY, 1)


class FakeSpdk(object):
    target = 'unix:/fake.sock'

    def __init__(self, lcores=None, error=None, interrupt_mode=False,
                 version=(26, 5)):
        self.lcores = lcores or []
        self.error = error
        self.interrupt_mode = interrupt_mode
        self.version = version
        self.closed = False

    def spdk_get_version(self):
        if self.error:
            raise self.error
        return {'version': 'SPDK v%d.%02d' % self.version,
                'fields': {'major': self.version[0],
                           'minor': self.version[1], 'patch': 0,
                           'suffix': ''}}

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.closed = True

    def framework_get_reactors(self):
        if self.error:
            raise self.error
        return {'reactors': [{'lcore': c, 'numa_id': 0,
                              'in_interrupt': self.interrupt_mode}
                             for c in self.lcores]}


ONLINE = set(range(8))


class TestReactorOverlap(base.TestCase):
    """Every CPU configuration Nova 34 allows, against the reactors."""

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(volume.CONF))
        self.log = self.useFixture(fixtures.FakeLogger())

    def check(self, lcores, online=ONLINE, **kwargs):
        return reactors.check_overlap(FakeSpdk(lcores, **kwargs), online)

    def test_overlaps_warned_per_option(self):
        self.conf.config(group='compute', cpu_dedicated_set='2-5',
                         cpu_shared_set='0-1')

        overlaps = self.check([1, 2, 3])

        self.assertEqual({reactors.DEDICATED_SET: {2, 3},
                          reactors.SHARED_SET: {1}}, overlaps)
        self.assertIn('[compute] cpu_dedicated_set contains CPUs 2-3',
                      self.log.output)
        self.assertIn('[compute] cpu_shared_set contains CPUs 1',
                      self.log.output)
        self.assertEqual(1, self.log.output.count('slow down SPDK'))

    def test_interrupt_mode_reactors_may_share_floating_cores(self):
        self.conf.config(group='compute', cpu_dedicated_set='2-5',
                         cpu_shared_set='0-1')

        overlaps = self.check([1, 2], interrupt_mode=True)

        self.assertEqual({reactors.DEDICATED_SET: {2}}, overlaps)
        self.assertNotIn('cpu_shared_set contains', self.log.output)
        self.assertIn('pinned guest vCPU expects its core', self.log.output)

    def test_disjoint_sets_quiet(self):
        self.conf.config(group='compute', cpu_dedicated_set='2-5')

        self.assertEqual({}, self.check([0, 1]))
        self.assertEqual('', self.log.output)

    def test_nova_default_lets_guests_onto_every_cpu(self):
        # Neither set: guests float (and may be pinned) over every online
        # CPU, the reactors' included.
        overlaps = self.check([0, 1])

        self.assertEqual({reactors.UNSET: {0, 1}}, overlaps)
        self.assertIn('Neither [compute] cpu_shared_set nor [compute] '
                      'cpu_dedicated_set nor [DEFAULT] vcpu_pin_set is set',
                      self.log.output)
        self.assertIn('e.g. cpu_shared_set = 2-7', self.log.output)

    def test_nova_default_online_cpus_only(self):
        # Offline CPUs are no guest's; libvirt's online set is.
        self.assertEqual({}, self.check([3], online={0, 1, 2}))

    def test_nova_default_in_interrupt_mode_still_warned(self):
        # Nova's fallback may pin a vCPU on any of these CPUs.
        overlaps = self.check([0], interrupt_mode=True)

        self.assertEqual({reactors.UNSET: {0}}, overlaps)

    def test_single_cpu_host_says_nothing_is_left(self):
        self.check([0], online={0})

        self.assertIn('no CPU left for guests', self.log.output)
        self.assertNotIn('e.g. cpu_shared_set =', self.log.output)

    def test_vcpu_pin_set_is_checked(self):
        # The deprecated option places floating and pinned vCPUs alike,
        # so even sleeping reactors must stay out of it.
        self.conf.config(vcpu_pin_set='1-3')

        self.assertEqual({reactors.VCPU_PIN_SET: {1}},
                         self.check([0, 1], interrupt_mode=True))
        self.assertIn('[DEFAULT] vcpu_pin_set contains CPUs 1',
                      self.log.output)

    def test_vcpu_pin_set_with_shared_set(self):
        self.conf.config(vcpu_pin_set='2-7')
        self.conf.config(group='compute', cpu_shared_set='0-1')

        self.assertEqual({reactors.VCPU_PIN_SET: {2},
                          reactors.SHARED_SET: {0}}, self.check([0, 2]))

    def test_dedicated_set_only_leaves_other_cpus_unused(self):
        # No floating guest at all: the reactors may have CPUs 0-1.
        self.conf.config(group='compute', cpu_dedicated_set='2-7')

        self.assertEqual({}, self.check([0, 1]))

    def test_refuse_names_option_and_cpus(self):
        self.conf.config(group='compute', cpu_shared_set='0-3')

        err = self.assertRaises(
            exception.InvalidConfiguration, reactors.check_overlap,
            FakeSpdk([2, 3]), ONLINE, refuse=True)

        self.assertIn('[compute] cpu_shared_set contains CPUs 2-3', str(err))
        self.assertIn('nova_refuse_reactor_overlap', str(err))

    def test_refuse_nova_default(self):
        err = self.assertRaises(
            exception.InvalidConfiguration, reactors.check_overlap,
            FakeSpdk([0]), {0}, refuse=True)

        self.assertIn('no CPU left for guests', str(err))

    def test_unreachable_target_is_a_warning_even_when_refusing(self):
        self.conf.config(group='compute', cpu_shared_set='0-1')
        error = spdk_exception.TargetUnreachable(
            'framework_get_reactors', message='no socket')

        self.assertEqual({}, reactors.check_overlap(
            FakeSpdk(error=error), ONLINE, refuse=True))
        self.assertIn('Could not check', self.log.output)


class TestInitHost(DriverTestCase):
    """init_host runs the check on libvirt's online CPUs, as configured."""

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MockPatchObject(
            libvirt_driver.LibvirtDriver, 'init_host'))
        # The [spdk_vhost] checks are another test's business.
        self.useFixture(fixtures.MockPatchObject(
            driver.LibvirtVhostUserDriver, '_check_spdk_options'))
        self.useFixture(fixtures.MockPatchObject(
            driver.LibvirtVhostUserDriver, '_check_qemu_rpc_access'))
        self.driver._host = mock.Mock(spec=['get_online_cpus'])
        self.driver._host.get_online_cpus.return_value = {0, 1, 2, 3}
        self.target = FakeSpdk([0])
        self.useFixture(fixtures.MockPatchObject(
            spdk_rpc.SpdkClient, 'from_conf', return_value=self.target))
        self.log = self.useFixture(fixtures.FakeLogger())

    def test_default_warns_and_starts(self):
        self.driver.init_host('cmp1')

        self.assertIn('e.g. cpu_shared_set = 1-3', self.log.output)
        self.assertTrue(self.target.closed)

    def test_refusing_stops_nova_compute(self):
        self.conf.config(group='spdk_vhost',
                         nova_refuse_reactor_overlap=True)

        err = self.assertRaises(exception.InvalidConfiguration,
                                self.driver.init_host, 'cmp1')
        self.assertIn('reactor cores 0 included', str(err))

    def test_unsupported_spdk_release_stops_nova_compute(self):
        self.target.version = (26, 9)

        err = self.assertRaises(exception.InvalidConfiguration,
                                self.driver.init_host, 'cmp1')
        self.assertIn('runs SPDK v26.09', str(err))
        self.assertIn('supports SPDK v26.01, v26.05 only', str(err))

    def test_older_supported_release_starts(self):
        self.target.version = (26, 1)

        self.driver.init_host('cmp1')

        self.assertTrue(self.target.closed)

    def test_check_off(self):
        self.conf.config(group='spdk_vhost',
                         nova_check_reactor_overlap=False,
                         nova_refuse_reactor_overlap=True)

        self.driver.init_host('cmp1')

        self.driver._host.get_online_cpus.assert_not_called()
