"""Bad input through the API: the documented error, a usable volume.

See doc/source/admin/cinder-driver.rst for the errors: QoS keys SPDK
cannot enforce are refused by name.
"""

from cinderclient import exceptions as cinder_exc

from tests.deployment import base
from tests.deployment import test_lifecycle

BAD_QOS = {'read_iops_sec': '1000'}
lvol_name = test_lifecycle.lvol_name


class TestBadInput(base.DeploymentTestCase):

    def _volume_log(self):
        return self.deployment.logs(limit=None)['cinder-volume']

    def _messages(self, resource_id):
        return [m for m in self.cinder.messages.list()
                if m.resource_uuid == resource_id]

    def test_create_with_unsupported_qos_key(self):
        vtype = self.make_type(qos=BAD_QOS)
        vol = self.create_volume(1, status='error', volume_type=vtype.id)
        self.assertIn('SPDK cannot enforce read_iops_sec', self._volume_log())
        self.assertEqual({}, self.lvols())
        self.assertNotEqual([], self._messages(vol.id))

    def test_retype_to_unsupported_qos_key_keeps_volume(self):
        good = self.make_type(qos=test_lifecycle.HIGH_IOPS)
        bad = self.make_type(qos=BAD_QOS)
        vol = self.create_volume(1, volume_type=good.id)
        self.cinder.volumes.retype(vol, bad.id, 'never')
        vol = self.wait_status(self.cinder.volumes, vol.id, 'available')
        self.assertEqual(good.name, vol.volume_type)
        self.assertEqual({'rw_ios_per_sec': 5000},
                         self.rate_limits(lvol_name(vol)))
        log = self._volume_log()
        self.assertIn('Volume %s: driver error when trying to retype'
                      % vol.id, log)
        self.assertIn('SPDK cannot enforce read_iops_sec', log)

    def test_size_zero_is_refused(self):
        err = self.assertRaises(cinder_exc.BadRequest,
                                self.cinder.volumes.create, 0)
        self.assertIn('size', str(err).lower())
        self.assertEqual({}, self.lvols())

    def test_extend_to_smaller_size_is_refused(self):
        vol = self.create_volume(2)
        self.assertRaises(cinder_exc.BadRequest,
                          self.cinder.volumes.extend, vol, 1)
        vol = self.wait_status(self.cinder.volumes, vol.id, 'available')
        self.assertEqual(2, vol.size)
        lvol = self.lvol(lvol_name(vol))
        self.assertEqual(2 * 1024 ** 3,
                         lvol['num_blocks'] * lvol['block_size'])
        self.cinder.volumes.extend(vol, 3)
        self.assertEqual(3, self.wait_status(
            self.cinder.volumes, vol.id, 'available').size)
