"""Requests the spdk_vhost backend must refuse, loudly."""

from tempest.common import waiters
from tempest.lib.common.utils import data_utils
from tempest.lib import decorators

from tempest_plugin.tests import base


class ErrorPathTest(base.SpdkVhostBaseTest):

    @decorators.idempotent_id('e54f9d79-0137-4f13-a1d1-f79071468ac0')
    def test_unsupported_qos_key_fails_the_create(self):
        # SPDK has no read-only IOPS limit: never a silent drop. The
        # same type with a limit SPDK has works, so the key alone fails
        # the create, not a backend down. (Cinder reschedules the
        # driver's failure and ends with no backend left: the failed
        # volume has no host to tell where it failed.)
        good_type, _ = self.create_qos_type(total_iops_sec='1000')
        self.create_volume(volume_type=good_type['name'])
        vol_type, _ = self.create_qos_type(read_iops_sec='1000')
        volume = self.volumes_client.create_volume(
            size=1, volume_type=vol_type['name'],
            name=data_utils.rand_name('spdk-bad-qos'))['volume']
        self.addCleanup(self.delete_volume, volume['id'])
        waiters.wait_for_volume_resource_status(
            self.volumes_client, volume['id'], 'error')
