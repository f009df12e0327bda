"""Volume life cycle on the spdk_vhost backend: thin lvols, metadata-only
snapshots and clones, extend, revert, and snapshots deleted under their
clones."""

from tempest.common import waiters
from tempest import config
from tempest.lib import decorators

from tempest_plugin.tests import base

CONF = config.CONF


class VolumeLifecycleTest(base.SpdkVhostBaseTest):

    @decorators.idempotent_id('35af8aca-2564-4d90-bfa3-afbeabfcd9f5')
    def test_create_and_extend(self):
        volume = self.create_volume()
        self.assertEqual(CONF.spdk_vhost.volume_type, volume['volume_type'])
        self.assertLvolSize(volume['id'], volume['size'])
        new_size = volume['size'] + 1
        self.volumes_client.extend_volume(volume['id'], new_size=new_size)
        waiters.wait_for_volume_resource_status(
            self.volumes_client, volume['id'], 'available')
        volume = self.volumes_client.show_volume(volume['id'])['volume']
        self.assertEqual(new_size, volume['size'])
        self.assertLvolSize(volume['id'], new_size)

    @decorators.idempotent_id('298b957d-b9e1-41ef-a59f-b40e43f3ae66')
    def test_volume_from_snapshot(self):
        volume = self.create_volume()
        snapshot = self.create_snapshot(volume['id'])
        clone = self.create_volume(snapshot_id=snapshot['id'],
                                   size=volume['size'] + 1)
        self.assertEqual(snapshot['id'], clone['snapshot_id'])
        self.assertLvolSize(clone['id'], volume['size'] + 1)

    @decorators.idempotent_id('7694d8bc-9257-402a-bb29-77666a92b3a3')
    def test_clone_volume(self):
        volume = self.create_volume()
        clone = self.create_volume(source_volid=volume['id'])
        self.assertEqual(volume['id'], clone['source_volid'])
        # The source stays usable and deletable on its own.
        self.delete_volume(volume['id'])
        self.assertLvolSize(clone['id'], clone['size'])

    @decorators.idempotent_id('731344d2-ef00-4ae4-a8d4-e2977b8fe31f')
    def test_revert_to_snapshot(self):
        volume = self.create_volume()
        snapshot = self.create_snapshot(volume['id'])
        base.post_volume_action(
            self.volumes_client, volume['id'],
            {'revert': {'snapshot_id': snapshot['id']}}, '3.40')
        waiters.wait_for_volume_resource_status(
            self.volumes_client, volume['id'], 'available')
        waiters.wait_for_volume_resource_status(
            self.snapshots_client, snapshot['id'], 'available')
        self.assertLvolSize(volume['id'], volume['size'])

    @decorators.idempotent_id('90983fb4-4c4b-4bbe-93d4-09d236db81af')
    def test_snapshot_with_clones_is_deleted(self):
        # Deleted at once: SPDK keeps what the clones still read, and
        # they stay usable (and deletable) on their own.
        volume = self.create_volume()
        snapshot = self.create_snapshot(volume['id'])
        clones = [self.create_volume(snapshot_id=snapshot['id'])
                  for _ in range(2)]
        self.snapshots_client.delete_snapshot(snapshot['id'])
        self.snapshots_client.wait_for_resource_deletion(snapshot['id'])
        for clone in clones:
            new_size = clone['size'] + 1
            self.volumes_client.extend_volume(clone['id'],
                                              new_size=new_size)
            waiters.wait_for_volume_resource_status(
                self.volumes_client, clone['id'], 'available')
            self.assertLvolSize(clone['id'], new_size)
