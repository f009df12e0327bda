"""A real cinder-volume manager loads the driver from its config.

This catches what mocks hide: a wrong method signature, a missing
abstract method, stats the manager cannot digest.
"""

from cinder import coordination
from cinder import objects
from cinder import rpc
from cinder.volume import configuration
from cinder.volume import manager as volume_manager
import fixtures
from oslo_config import cfg
from oslo_messaging import conffixture as messaging_conffixture

from testbed import spdk_build
from tests.cinder import base

CONF = cfg.CONF


class ManagerTest(base.TargetTestCase):

    def setUp(self):
        super().setUp()
        # The manager builds RPC clients: give it oslo.messaging's fake
        # in-memory transport and a notifier that only records.
        self.useFixture(messaging_conffixture.ConfFixture(CONF)).\
            transport_url = 'fake:/'
        CONF.set_override('driver', ['test'],
                          group='oslo_messaging_notifications')
        rpc.init(CONF)
        self.addCleanup(rpc.cleanup)
        # The manager's own locks (tooz, file backend in a temp dir).
        CONF.set_override('backend_url', 'file://' + self.useFixture(
            fixtures.TempDir()).path, group='coordination')
        coordination.COORDINATOR.start()
        self.addCleanup(coordination.COORDINATOR.stop)
        # What the manager itself does with the backend's section first.
        configuration.Configuration(volume_manager.volume_backend_opts,
                                    config_group=base.BACKEND)
        CONF.set_override('volume_driver',
                          'cinder_spdk_vhost.driver.SpdkVhostDriver',
                          group=base.BACKEND)
        CONF.set_override('enabled_backends', [base.BACKEND])
        CONF.set_override('host', 'storage')
        self.manager = volume_manager.VolumeManager(
            service_name=base.BACKEND, host=base.HOST)
        # The driver registers its options when the manager builds it.
        for name, value in (('spdk_rpc_socket', self.target.socket_path),
                            ('spdk_rpc_connect_retries', 0),
                            ('spdk_dd_path', spdk_build.app_path('spdk_dd')),
                            ('volume_backend_name', base.BACKEND)):
            CONF.set_override(name, value, group=base.BACKEND)
        self.manager.init_host(service_id=None)
        self.addCleanup(self.manager.driver.client.close)

    def test_driver_initialized_from_config(self):
        self.assertTrue(self.manager.driver.initialized)
        self.assertEqual('SpdkVhostDriver',
                         type(self.manager.driver).__name__)

    def test_create_and_delete_through_manager(self):
        volume = self.make_volume(size=1)
        self.manager.create_volume(self.ctxt, volume)
        volume = objects.Volume.get_by_id(self.ctxt, volume.id)
        self.assertEqual('available', volume.status)
        self.assertEqual([volume.name], self.lvol_names())

        self.manager.delete_volume(self.ctxt, volume)
        self.assertEqual([], self.lvol_names())
        deleted = objects.Volume.get_by_id(self.ctxt.elevated(
            read_deleted='yes'), volume.id)
        self.assertEqual('deleted', deleted.status)

    def test_stats_reach_the_manager(self):
        self.manager.publish_service_capabilities(self.ctxt)
        stats = self.manager.driver.get_volume_stats()
        self.assertEqual('vhost-user', stats['storage_protocol'])
