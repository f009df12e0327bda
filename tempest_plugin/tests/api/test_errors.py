"""Requests the spdk_vhost backend must refuse, loudly."""

from tempest.common import waiters
from tempest.lib.common.utils import data_utils
from tempest.lib import decorators

from tempest_plugin.tests import base


class ErrorPathTest(base.SpdkVhostBaseTest):

    @decorators.idempotent_id('e54f9d79-0137-4f13-a1d1-f79071468ac0')
    def test_unsupported_qos_key_fails_the_create(self):
        # SPDK has no read-only IOPS limit: never a silent drop.
        vol_type, _ = self.create_qos_type(read_iops_sec='1000')
        volume = self.volumes_client.create_volume(
            size=1, volume_type=vol_type['name'],
            name=data_utils.rand_name('spdk-bad-qos'))['volume']
        self.addCleanup(self.delete_volume, volume['id'])
        waiters.wait_for_volume_resource_status(
            self.volumes_client, volume['id'], 'error')

    @decorators.idempotent_id('3e535c89-6274-4ed2-9460-53d541e553da')
    def test_snapshot_with_clones_is_not_deleted(self):
        volume = self.create_volume()
        snapshot = self.create_snapshot(volume['id'])
        self.create_volume(snapshot_id=snapshot['id'])
        self.create_volume(snapshot_id=snapshot['id'])
        self.snapshots_client.delete_snapshot(snapshot['id'])
        # The driver answers SnapshotIsBusy; Cinder puts it back.
        waiters.wait_for_volume_resource_status(
            self.snapshots_client, snapshot['id'], 'available')
        shown = self.snapshots_client.show_snapshot(
            snapshot['id'])['snapshot']
        self.assertEqual('available', shown['status'])
