"""The scheduler places volumes by the capabilities the driver reports."""

from tests.deployment import base
from tests.deployment import deployment


def pool_of(volume):
    return getattr(volume, 'os-vol-host-attr:host').rpartition('#')[2]


class TestScheduler(base.DeploymentTestCase):

    def test_pools_report_capabilities(self):
        # cinderclient lifts the capabilities up to pool attributes.
        pools = {p.name.rpartition('#')[2]: vars(p) for p in
                 self.admin_client().pools.list(detailed=True)}
        self.assertEqual(sorted(deployment.LVSTORES), sorted(pools))
        for lvs, mib in deployment.LVSTORES.items():
            caps = pools[lvs]
            self.assertEqual('spdk', caps['volume_backend_name'])
            self.assertEqual('vhost-user', caps['storage_protocol'])
            self.assertTrue(caps['thin_provisioning_support'])
            self.assertFalse(caps['thick_provisioning_support'])
            self.assertTrue(caps['QoS_support'])
            # The lvstore's metadata takes a few clusters.
            self.assertGreater(caps['total_capacity_gb'], mib / 1024 - 0.1)
            self.assertLessEqual(caps['total_capacity_gb'], mib / 1024)

    def test_default_placement_prefers_most_free_space(self):
        vol = self.create_volume(1)
        self.assertEqual('lvs0', pool_of(vol))

    def test_type_pins_pool(self):
        vtype = self.make_type(extra_specs={'pool_name': 'lvs1'})
        vol = self.create_volume(1, volume_type=vtype.id)
        self.assertEqual('lvs1', pool_of(vol))
        self.assertIn('volume-%s' % vol.id, self.lvols('lvs1'))

    def test_type_matching_capabilities_is_placed(self):
        vtype = self.make_type(extra_specs={
            'volume_backend_name': 'spdk',
            'thin_provisioning_support': '<is> True',
            'QoS_support': '<is> True'})
        vol = self.create_volume(1, volume_type=vtype.id)
        self.assertEqual(self.deployment.host + '#lvs0',
                         getattr(vol, 'os-vol-host-attr:host'))

    def test_unsupported_capability_finds_no_backend(self):
        vtype = self.make_type(extra_specs={
            'thick_provisioning_support': '<is> True'})
        vol = self.create_volume(1, status='error', volume_type=vtype.id)
        self.assertIsNone(getattr(vol, 'os-vol-host-attr:host'))
        self.assertEqual({}, self.lvols())

    def test_size_beyond_reported_capacity_finds_no_backend(self):
        # 4 GiB pools with the default over-subscription ratio of 20.
        vol = self.create_volume(500, status='error')
        self.assertIsNone(getattr(vol, 'os-vol-host-attr:host'))
