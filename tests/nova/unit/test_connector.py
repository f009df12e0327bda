"""Connector checks that need no SPDK target: names and properties."""

from os_brick_connector import nvme_initiator
from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import nvme_auth
from spdk_vhost_core import properties
from tests import base

VOLUME = '6a1c7b8e-0d2f-4c3e-9a51-0a2b3c4d5e6f'


class TestNames(base.TestCase):

    def test_controller_name_comes_from_the_volume_id(self):
        self.assertEqual('vhost-' + VOLUME, properties.controller_name(VOLUME))

    def test_unsafe_volume_ids_are_refused(self):
        for bad in ('../etc/passwd', 'a/b', '', None, 'x' * 65, 'a b'):
            self.assertRaises(spdk_exc.InvalidProperties,
                              properties.controller_name, bad)

    def test_nvme_name_is_the_volume_id(self):
        """Its namespace bdev, <id>n1, is the disk serial the guest sees."""
        props = {'volume_id': VOLUME, 'transport': 'tcp', 'nqn': 'nqn.a:1'}
        name = nvme_initiator.controller_name(props)
        self.assertEqual(VOLUME, name)
        self.assertEqual(VOLUME + 'n1', nvme_initiator.namespace_bdev(name, 1))
        self.assertTrue(nvme_initiator.owns_bdev(name, name + 'n1'))
        self.assertFalse(nvme_initiator.owns_bdev(name, name + 'n1x'))
        self.assertFalse(nvme_initiator.owns_bdev(name, 'other'))
        self.assertFalse(nvme_initiator.owns_bdev(name, None))
        # An older release's name is found from its bdev, not recomputed.
        self.assertEqual('spdkvhost0a1bn2', nvme_initiator.owner(
            'spdkvhost0a1bn2n1'))
        self.assertIsNone(nvme_initiator.owner(VOLUME))


class TestProperties(base.TestCase):

    check = properties.ConnectionProperties

    def test_valid(self):
        self.check({'volume_id': VOLUME, 'transport': 'local', 'bdev': 'b',
                    'numa_node': 1})
        self.check({'volume_id': VOLUME, 'transport': 'tcp',
                    'nqn': 'nqn.2016-06.io.spdk:cinder:v1',
                    'traddr': '192.0.2.1'})

    def test_invalid(self):
        for props in ({'volume_id': VOLUME, 'transport': 'fc', 'bdev': 'b'},
                      {'volume_id': VOLUME, 'transport': 'local'},
                      {'volume_id': VOLUME, 'transport': 'tcp', 'nqn': 'n'},
                      {'volume_id': VOLUME, 'transport': 'local',
                       'bdev': 'b', 'numa_node': '1'},
                      {'volume_id': VOLUME, 'transport': 'local',
                       'bdev': 'b', 'numa_node': True}):
            self.assertRaises(spdk_exc.InvalidProperties,
                              self.check, props)

    def test_dhchap_secrets(self):
        secret = nvme_auth.generate_secret()
        remote = {'volume_id': VOLUME, 'transport': 'tcp',
                  'nqn': 'nqn.2016-06.io.spdk:cinder:v1',
                  'traddr': '192.0.2.1'}
        self.check(dict(remote, dhchap_key=secret, dhchap_ctrlr_key=secret))
        for bad in ({'dhchap_key': secret, 'dhchap_ctrlr_key': 'DHHC-1:x'},
                    {'dhchap_ctrlr_key': secret}):
            err = self.assertRaises(spdk_exc.InvalidProperties,
                                    self.check, dict(remote, **bad))
            self.assertIn('dhchap_ctrlr_key', str(err))
            self.assertNotIn(secret, str(err))


class TestMultiattachNames(base.TestCase):

    def test_one_controller_per_guest(self):
        first = properties.controller_name(VOLUME, 'guest-1')
        second = properties.controller_name(VOLUME, 'guest-2')
        self.assertNotEqual(first, second)
        for name in (first, second):
            self.assertTrue(name.startswith('vhost-%s.' % VOLUME))
            # Short enough for a socket path (sun_path: 107 bytes).
            self.assertEqual(len('vhost-') + 36 + 1 + 12, len(name))
        self.assertEqual(first, properties.controller_name(VOLUME, 'guest-1'))
        # Without a guest, the single-attach name is unchanged.
        self.assertEqual('vhost-' + VOLUME, properties.controller_name(VOLUME))

    def test_bad_guest_refused(self):
        for bad in ('', 5, b'x'):
            self.assertRaises(spdk_exc.InvalidProperties,
                              properties.controller_name, VOLUME, bad)
        props = {'volume_id': VOLUME, 'transport': 'local', 'bdev': 'b'}
        parsed = properties.ConnectionProperties(
            dict(props, attached_to='6f0b4d53-2a3e-4a5b-9d8e-0c1d2e3f4a5b'))
        self.assertTrue(parsed.controller.startswith('vhost-%s.' % VOLUME))
        self.assertTrue(parsed.is_local)
        self.assertEqual('b', parsed['bdev'])
        for bad in ('a/b', '', 'x' * 256, 3):
            self.assertRaises(spdk_exc.InvalidProperties,
                              properties.ConnectionProperties,
                              dict(props, attached_to=bad))
