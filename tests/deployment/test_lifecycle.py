"""A tenant's volume life cycle through the real Cinder API.

Each step is checked on the SPDK target too: the API saying
``available`` is not enough, the lvol must be there, with the QoS limit
of the volume type in force.
"""

from testbed import waiting
from tests.deployment import base

HIGH_IOPS = {'total_iops_sec': '5000'}
GOLD = {'total_iops_sec': '8000', 'total_bytes_sec': str(100 * 1024 ** 2)}
PER_GB = {'total_iops_sec_per_gb': '2000'}


def lvol_name(volume):
    return 'volume-%s' % volume.id


class TestLifecycle(base.DeploymentTestCase):

    def test_high_iops_volume_has_backend_qos(self):
        vtype = self.make_type('high-iops', qos=HIGH_IOPS)
        vol = self.create_volume(1, volume_type=vtype.id)
        host = getattr(vol, 'os-vol-host-attr:host')
        self.assertEqual(self.deployment.host + '#' + base.LVS, host)
        lvol = self.lvol(lvol_name(vol))
        self.assertEqual(1024 ** 3, lvol['num_blocks'] * lvol['block_size'])
        self.assertEqual({'rw_ios_per_sec': 5000},
                         self.rate_limits(lvol_name(vol)))

    def test_snapshot_revert_clone_extend_retype(self):
        vtype = self.make_type(qos=HIGH_IOPS)
        gold = self.make_type(qos=GOLD)
        vol = self.create_volume(1, volume_type=vtype.id)
        before = self.lvol(lvol_name(vol))['uuid']
        snap = self.create_snapshot(vol.id)
        snap_lvol = self.lvol('snapshot-%s' % snap.id)
        self.assertTrue(snap_lvol['driver_specific']['lvol']['snapshot'])

        self.cinder.volumes.revert_to_snapshot(vol, snap)
        self.wait_status(self.cinder.volumes, vol.id, 'available')
        reverted = self.lvol(lvol_name(vol))
        self.assertNotEqual(before, reverted['uuid'])
        self.assertEqual('snapshot-%s' % snap.id,
                         reverted['driver_specific']['lvol']['base_snapshot'])
        self.assertEqual({'rw_ios_per_sec': 5000},
                         self.rate_limits(lvol_name(vol)))

        from_snap = self.create_volume(2, snapshot_id=snap.id,
                                       volume_type=vtype.id)
        clone = self.create_volume(1, source_volid=vol.id,
                                   volume_type=vtype.id)
        for made in (from_snap, clone):
            self.assertEqual({'rw_ios_per_sec': 5000},
                             self.rate_limits(lvol_name(made)))
        self.assertEqual(2 * 1024 ** 3, self._size(from_snap))

        self.cinder.volumes.extend(vol, 3)
        vol = self.wait_status(self.cinder.volumes, vol.id, 'available')
        self.assertEqual(3, vol.size)
        self.assertEqual(3 * 1024 ** 3, self._size(vol))

        self.cinder.volumes.retype(vol, gold.id, 'never')
        self._wait_type(vol, gold.name)
        self.assertEqual({'rw_ios_per_sec': 8000, 'rw_mbytes_per_sec': 100},
                         self.rate_limits(lvol_name(vol)))

    def test_extend_scales_per_gb_qos(self):
        vtype = self.make_type(qos=PER_GB)
        vol = self.create_volume(1, volume_type=vtype.id)
        self.assertEqual({'rw_ios_per_sec': 2000},
                         self.rate_limits(lvol_name(vol)))
        self.cinder.volumes.extend(vol, 2)
        self.wait_status(self.cinder.volumes, vol.id, 'available')
        self.assertEqual({'rw_ios_per_sec': 4000},
                         self.rate_limits(lvol_name(vol)))

    def test_retype_to_type_without_qos_lifts_limit(self):
        vtype = self.make_type(qos=HIGH_IOPS)
        plain = self.make_type()
        vol = self.create_volume(1, volume_type=vtype.id)
        self.cinder.volumes.retype(vol, plain.id, 'never')
        self._wait_type(vol, plain.name)
        self.assertEqual({}, self.rate_limits(lvol_name(vol)))

    def _size(self, volume):
        lvol = self.lvol(lvol_name(volume))
        return lvol['num_blocks'] * lvol['block_size']

    def _wait_type(self, volume, type_name):
        def retyped():
            got = self.cinder.volumes.get(volume.id)
            return got.status == 'available' and got.volume_type == type_name
        waiting.wait_for('retype of %s' % volume.id, retyped,
                         base.TIMEOUT)
