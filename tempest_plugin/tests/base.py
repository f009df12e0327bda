"""Shared set-up of the spdk-vhost tempest tests.

Shaped like cinder-tempest-plugin's api/volume/base.py: resources are
created through helpers that register their cleanup at once (per test,
or per class for class-level resources), so a failing test leaves
nothing behind.
"""

import json

from tempest.common import waiters
from tempest import config
from tempest.lib.common import api_microversion_fixture
from tempest.lib.common.utils import data_utils
from tempest.lib.common.utils import test_utils
from tempest import test

from tempest_plugin import spdk_target

CONF = config.CONF


def post_volume_action(client, volume_id, body, microversion):
    """POST a volume action at a microversion the client may lack.

    tempest's volumes client has no method for some actions (revert),
    and sends the test class's microversion, if any, on every request
    (extend of an in-use volume needs 3.42): the request is built here,
    under tempest's own microversion fixture, so it carries exactly one
    version header, and the answer's is checked against it.
    """
    with api_microversion_fixture.APIMicroversionFixture(
            volume_microversion=microversion):
        resp, _ = client.post('volumes/%s/action' % volume_id,
                              json.dumps(body))
    client.expected_success(202, resp.status)


def retype_in_place(client, volume_id, type_name, status):
    """Retype without migration; wait until done and back in ``status``.

    On the spdk_vhost backend that is a QoS change on the lvol itself.
    """
    client.retype_volume(volume_id, new_type=type_name,
                         migration_policy='never')
    waiters.wait_for_volume_retype(client, volume_id, type_name)
    waiters.wait_for_volume_resource_status(client, volume_id, status)


class TargetChecks(object):
    """Checks against the SPDK target itself, where tempest can reach it.

    Without ``[spdk_vhost] spdk_rpc_socket`` they check nothing: the API
    results are all a remote tempest can see.
    """

    target = None

    @classmethod
    def setup_target(cls):
        socket = CONF.spdk_vhost.spdk_rpc_socket
        cls.target = spdk_target.Target(socket) if socket else None

    def assertEnforced(self, volume_id, qos_specs):
        """SPDK enforces exactly these limits on the volume's lvol."""
        if self.target is None:
            return
        self.assertEqual(spdk_target.expected_limits(qos_specs),
                         self.target.rate_limits(volume_id))

    def assertLvolSize(self, volume_id, size_gb):
        """The lvol has this size in SPDK."""
        if self.target is None:
            return
        lvol = self.target.lvol(volume_id)
        self.assertIsNotNone(lvol, 'no lvol for volume %s' % volume_id)
        self.assertEqual(size_gb * 1024 ** 3,
                         lvol['num_blocks'] * lvol['block_size'])


class SpdkVhostBaseTest(TargetChecks, test.BaseTestCase):
    """Admin (types, QoS) and primary (volumes) clients of Cinder v3."""

    credentials = ['primary', 'admin']
    # The [spdk_vhost] flag that enables a subclass's tests.
    feature_flag = 'api_tests'

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.service_available.cinder:
            raise cls.skipException('Cinder is not available')
        if not getattr(CONF.spdk_vhost, cls.feature_flag):
            raise cls.skipException(
                '[spdk_vhost] %s is disabled' % cls.feature_flag)

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        cls.volumes_client = cls.os_primary.volumes_client_latest
        cls.snapshots_client = cls.os_primary.snapshots_client_latest
        cls.admin_volumes_client = cls.os_admin.volumes_client_latest
        cls.types_client = cls.os_admin.volume_types_client_latest
        cls.qos_client = cls.os_admin.volume_qos_client_latest

    @classmethod
    def resource_setup(cls):
        super().resource_setup()
        cls.setup_target()

    # Class-level resources: kept for every test of the class.

    @classmethod
    def create_volume_type(cls, **extra_specs):
        """A type on the spdk_vhost backend, deleted after the class."""
        specs = {'volume_backend_name': CONF.spdk_vhost.backend_name}
        specs.update(extra_specs)
        vol_type = cls.types_client.create_volume_type(
            name=data_utils.rand_name(cls.__name__ + '-type'),
            extra_specs=specs)['volume_type']
        cls.addClassResourceCleanup(
            test_utils.call_and_ignore_notfound_exc,
            cls.types_client.delete_volume_type, vol_type['id'])
        return vol_type

    @classmethod
    def create_qos(cls, consumer='back-end', **specs):
        """A QoS spec, disassociated and deleted after the class."""
        qos = cls.qos_client.create_qos(
            name=data_utils.rand_name(cls.__name__ + '-qos'),
            consumer=consumer, **specs)['qos_specs']
        cls.addClassResourceCleanup(
            test_utils.call_and_ignore_notfound_exc,
            cls.qos_client.delete_qos, qos['id'], force=True)
        cls.addClassResourceCleanup(
            test_utils.call_and_ignore_notfound_exc,
            cls.qos_client.disassociate_all_qos, qos['id'])
        return qos

    @classmethod
    def create_qos_type(cls, consumer='back-end', **specs):
        """A volume type with a fresh QoS spec associated to it."""
        vol_type = cls.create_volume_type()
        qos = cls.create_qos(consumer=consumer, **specs)
        cls.qos_client.associate_qos(qos['id'], vol_type['id'])
        return vol_type, qos

    # Per-test resources.

    def create_volume(self, volume_type=None, **kwargs):
        """An available volume, deleted after the test."""
        kwargs.setdefault('size', CONF.volume.volume_size)
        kwargs.setdefault('name', data_utils.rand_name('spdk-volume'))
        volume = self.volumes_client.create_volume(
            volume_type=volume_type or CONF.spdk_vhost.volume_type,
            **kwargs)['volume']
        self.addCleanup(self.delete_volume, volume['id'])
        waiters.wait_for_volume_resource_status(
            self.volumes_client, volume['id'], 'available')
        return self.volumes_client.show_volume(volume['id'])['volume']

    def delete_volume(self, volume_id):
        test_utils.call_and_ignore_notfound_exc(
            self.volumes_client.delete_volume, volume_id)
        self.volumes_client.wait_for_resource_deletion(volume_id)

    def create_snapshot(self, volume_id):
        """An available snapshot, deleted after the test."""
        snapshot = self.snapshots_client.create_snapshot(
            volume_id=volume_id,
            name=data_utils.rand_name('spdk-snapshot'))['snapshot']
        self.addCleanup(self.delete_snapshot, snapshot['id'])
        waiters.wait_for_volume_resource_status(
            self.snapshots_client, snapshot['id'], 'available')
        return snapshot

    def delete_snapshot(self, snapshot_id):
        test_utils.call_and_ignore_notfound_exc(
            self.snapshots_client.delete_snapshot, snapshot_id)
        self.snapshots_client.wait_for_resource_deletion(snapshot_id)
