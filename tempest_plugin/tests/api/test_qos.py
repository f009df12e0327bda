"""Volume types with QoS specs on the spdk_vhost backend.

Back-end QoS specs become SPDK rate limits on the lvol (see the Cinder
driver's QoS mapping table). The limits used here are exact in SPDK's
units (multiples of 1000 IO/s and of 1 MiB/s), so no rounding is
involved and the limits read back from SPDK must be equal.
"""

from tempest.common import waiters
from tempest.lib import decorators

from tempest_plugin.tests import base

MIB = 1024 * 1024


class QosSpecTest(base.SpdkVhostBaseTest):

    @classmethod
    def resource_setup(cls):
        super().resource_setup()
        cls.gold = {'total_iops_sec': '2000',
                    'total_bytes_sec': str(100 * MIB)}
        cls.gold_type, cls.gold_qos = cls.create_qos_type(**cls.gold)

    @decorators.idempotent_id('b06be430-bd29-46b8-98c8-c7e6ea8d6b7a')
    def test_volume_type_with_qos_spec(self):
        association = self.qos_client.show_association_qos(
            self.gold_qos['id'])['qos_associations']
        self.assertEqual([self.gold_type['id']],
                         [a['id'] for a in association])
        volume = self.create_volume(volume_type=self.gold_type['name'])
        self.assertEqual(self.gold_type['name'], volume['volume_type'])
        self.assertEnforced(volume['id'], self.gold)

    @decorators.idempotent_id('52336fd0-db15-4944-b7fd-cce805e08f4d')
    def test_retype_changes_limits_in_place(self):
        silver = {'total_iops_sec': '1000', 'write_bytes_sec': str(20 * MIB)}
        silver_type, _ = self.create_qos_type(**silver)
        volume = self.create_volume(volume_type=self.gold_type['name'])
        base.retype_in_place(self.volumes_client, volume['id'],
                             silver_type['name'], 'available')
        self.assertEnforced(volume['id'], silver)

    @decorators.idempotent_id('569a7806-6a5e-4829-8925-2a69088cd70f')
    def test_spec_change_reaches_existing_volume(self):
        # Cinder does not push a changed spec to existing volumes; the
        # driver reads the type's current spec at each extend or retype.
        vol_type, qos = self.create_qos_type(total_iops_sec='3000')
        volume = self.create_volume(volume_type=vol_type['name'])
        self.assertEnforced(volume['id'], {'total_iops_sec': '3000'})
        self.qos_client.set_qos_key(qos['id'], total_iops_sec='5000')
        self.volumes_client.extend_volume(volume['id'],
                                          new_size=volume['size'] + 1)
        waiters.wait_for_volume_resource_status(
            self.volumes_client, volume['id'], 'available')
        self.assertEnforced(volume['id'], {'total_iops_sec': '5000'})

    @decorators.idempotent_id('b8879e1a-cf0f-46cc-a7dd-907683cd1b9d')
    def test_per_gb_limit_follows_the_size(self):
        vol_type, _ = self.create_qos_type(total_iops_sec_per_gb='1000')
        volume = self.create_volume(volume_type=vol_type['name'], size=1)
        self.assertEnforced(volume['id'], {'total_iops_sec': '1000'})
        self.volumes_client.extend_volume(volume['id'], new_size=3)
        waiters.wait_for_volume_resource_status(
            self.volumes_client, volume['id'], 'available')
        self.assertEnforced(volume['id'], {'total_iops_sec': '3000'})
