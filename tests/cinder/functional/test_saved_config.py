"""The storage side's exports and QoS come back after a target crash.

The driver saves the target's config after each change
(``spdk_saved_config``); the real target is SIGKILLed and restarted with
``--json`` of that file, as the service unit does. The lvstore is on an
aio file, so it survives the restart.
"""

import json

from testbed import net
from tests.cinder import base

MIB = 1024 * 1024
HOST_NQN = ('nqn.2014-08.org.nvmexpress:uuid:'
            '1b4e28ba-2fa1-11d2-883f-b9a761bde3fb')
REMOTE = {'spdk_target_id': 'compute-target', 'host': 'compute',
          'nqn': HOST_NQN}


class SavedConfigTest(base.TargetTestCase):

    SAVED_CONFIG = True

    def setUp(self):
        super().setUp()
        self.port = net.free_port()
        self.driver = self.make_driver(spdk_saved_config=self.saved,
                                       spdk_nvmf_port=self.port)

    def state(self):
        subsystems = [{k: s[k] for k in ('nqn', 'hosts', 'namespaces',
                                         'listen_addresses')}
                      for s in self.rpc('nvmf_get_subsystems')
                      if s['subtype'] == 'NVMe']
        limits = {b['name']: b['assigned_rate_limits']
                  for b in self.rpc('bdev_get_bdevs')
                  if b['product_name'] == 'Logical Volume'}
        return subsystems, limits

    def crash_and_restart(self):
        self.driver.client.close()
        self.target.restart(crash=True)

    def test_exports_and_qos_come_back(self):
        vtype = self.make_type({'total_iops_sec': '3000'})
        exported = self.make_volume(vtype=vtype)
        self.driver.create_volume(exported)
        self.driver.initialize_connection(exported, REMOTE)
        detached = self.make_volume(vtype=vtype)
        self.driver.create_volume(detached)
        self.driver.initialize_connection(detached, REMOTE)
        self.driver.terminate_connection(detached, REMOTE)
        before = self.state()
        self.assertEqual(1, len(before[0]))
        self.assertEqual({3000}, {v['rw_ios_per_sec']
                                  for v in before[1].values()})

        self.crash_and_restart()
        self.assertEqual(before, self.state())

    def test_deleted_volume_leaves_nothing_to_replay(self):
        vtype = self.make_type({'total_iops_sec': '3000'})
        volume = self.make_volume(vtype=vtype)
        self.driver.create_volume(volume)
        self.driver.delete_volume(volume)
        with open(self.saved) as src:
            saved = json.load(src)
        methods = [c['method'] for s in saved['subsystems']
                   for c in s['config'] or ()]
        self.assertNotIn('bdev_set_qos_limit', methods)
        self.crash_and_restart()
        self.assertEqual(([], {}), self.state())
