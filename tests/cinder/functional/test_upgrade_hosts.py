"""spdk-vhost-upgrade reads the host settings the Cinder driver recorded.

End to end on real SPDK: the driver exports a volume to a compute host
whose connector reports its reconnect settings, a real compute target
attaches it with those settings, and the upgrade command replaces the
storage target without ``--force``, because the record the driver wrote
beside its saved config shows the host rides out the window.
"""


from spdk_vhost_core import host_settings
from spdk_vhost_core import reconnect
from spdk_vhost_core import spdk_rpc
from spdk_vhost_core import upgrade
from testbed import spdk_build
from testbed import spdk_target
from tests.cinder import base

HOST_NQN = ('nqn.2014-08.org.nvmexpress:uuid:'
            '5c0ffee0-7d1e-4a2b-9c3d-4e5f60718293')
SETTINGS = {reconnect.LOSS: reconnect.DEFAULT_LOSS,
            reconnect.DELAY: reconnect.DEFAULT_DELAY,
            reconnect.FAST_FAIL: reconnect.DEFAULT_FAST_FAIL}
CONNECTOR = {'spdk_target_id': 'compute-target', 'host': 'compute',
             'nqn': HOST_NQN, reconnect.KEY: SETTINGS}


class UpgradeReadsDriverRecordTest(base.TargetTestCase):

    SAVED_CONFIG = True
    APP = 'nvmf_tgt'
    INTERRUPT_MODE = True

    def setUp(self):
        super().setUp()
        self.driver = self.make_driver(spdk_saved_config=self.saved)
        # The NVMe-oF initiator needs a polling target.
        compute = self.useFixture(spdk_target.SpdkTarget(
            app='vhost', name='compute'))
        self.compute = spdk_rpc.SpdkClient(
            socket_path=compute.socket_path, timeout=30, connect_retries=0)
        self.addCleanup(self.compute.close)

    def attach(self, volume):
        data = self.driver.initialize_connection(volume, CONNECTOR)['data']
        self.compute.bdev_nvme_attach_controller(
            name='remote0', trtype='TCP', traddr=data['traddr'],
            trsvcid=data['trsvcid'], subnqn=data['nqn'], hostnqn=HOST_NQN,
            adrfam='IPv4', **SETTINGS)
        return data['nqn']

    def upgrade(self):
        said = []
        self.driver.client.close()
        # The same build again: what is read before the stop matters here
        # (release changes: tests/functional/test_upgrade.py).
        tree = self.target.tree or spdk_build.spdk_dir()
        up = upgrade.Upgrade(self.target.socket_path, self.saved, tree,
                             pid=self.target.pid,
                             say=said.append, log_path=self.target.log_path)
        try:
            up.run()
        finally:
            if up.target.process is not None:
                self.target.process = up.target.process
        return said

    def test_recorded_host_rides_out_the_upgrade_then_is_forgotten(self):
        volume = self.make_volume()
        self.driver.create_volume(volume)
        nqn = self.attach(volume)
        self.assertEqual({HOST_NQN: {nqn: SETTINGS}},
                         host_settings.read(self.saved))

        said = self.upgrade()

        self.assertIn('every connected NVMe-oF host rides out 60 s', said)
        self.assertIn('upgraded: every object back', said[-1])
        spdk_target.wait_nvme_enabled(self.compute, 'remote0')
        # The driver goes on with the new target, and forgets the host
        # at detach.
        self.compute.bdev_nvme_detach_controller('remote0')
        self.driver.terminate_connection(volume, CONNECTOR)
        self.assertEqual({}, host_settings.read(self.saved))
        self.assertEqual([], self.subsystems())
