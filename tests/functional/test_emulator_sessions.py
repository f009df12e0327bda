"""Emulated vhost controllers with a guest connected, as SPDK behaves.

A connected vhost-user client is what SPDK calls a session: it blocks
vhost_delete_controller (EBUSY) and opens an I/O channel on the bdev (so
QoS changes are accepted), but it does not stop the lvol under it from
being deleted (hot remove: the controller stays with ``bdev: null``).
"""

import socket
import time

import fixtures

from tests import base
from tests.emulator import fixture as emulator_fixture


class ConnectedGuestTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(120, gentle=True))
        self.target = self.useFixture(emulator_fixture.EmulatorFixture(
            use_real=False))
        self.ok('bdev_malloc_create', name='Malloc0', num_blocks=131072,
                block_size=512)
        self.ok('bdev_lvol_create_lvstore', bdev_name='Malloc0',
                lvs_name='lvs0', cluster_sz=1048576)
        self.ok('bdev_lvol_create', lvol_name='vol', size_in_mib=8,
                lvs_name='lvs0', thin_provision=True)
        self.ok('bdev_set_qos_limit', name='lvs0/vol', rw_ios_per_sec=2000)
        self.ok('vhost_create_blk_controller', ctrlr='vhost.0',
                dev_name='lvs0/vol')
        [ctrlr] = self.ok('vhost_get_controllers', name='vhost.0')
        self.guest = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(self.guest.close)
        self.guest.connect(ctrlr['socket'])
        self._wait_sessions(1)

    def ok(self, method, **params):
        response = self.target.call(method, params or None)
        self.assertNotIn('error', response, method)
        return response['result']

    def error(self, method, **params):
        response = self.target.call(method, params)
        self.assertIn('error', response, method)
        return response['error']

    def _wait_sessions(self, count, timeout=10):
        deadline = time.monotonic() + timeout
        while True:
            [ctrlr] = self.ok('vhost_get_controllers', name='vhost.0')
            if len(ctrlr['sessions']) == count:
                return ctrlr
            self.assertLess(time.monotonic(), deadline,
                            'sessions: %r' % ctrlr['sessions'])
            time.sleep(0.05)

    def test_delete_controller_refused_while_connected(self):
        self.assertEqual(
            {'code': -32602, 'message': 'Device or resource busy'},
            self.error('vhost_delete_controller', ctrlr='vhost.0'))
        self.guest.close()
        self._wait_sessions(0)
        self.assertTrue(self.ok('vhost_delete_controller', ctrlr='vhost.0'))

    def test_qos_change_accepted_with_an_open_channel(self):
        self.assertTrue(self.ok('bdev_set_qos_limit', name='lvs0/vol',
                                rw_ios_per_sec=5000))
        [bdev] = self.ok('bdev_get_bdevs', name='lvs0/vol')
        self.assertEqual(5000, bdev['assigned_rate_limits']['rw_ios_per_sec'])

    def test_lvol_deleted_under_a_connected_guest(self):
        self.assertTrue(self.ok('bdev_lvol_delete', name='lvs0/vol'))

        ctrlr = self._wait_sessions(0)
        self.assertIsNone(ctrlr['backend_specific']['block']['bdev'])
        # The guest's connection was dropped with the bdev.
        self.guest.settimeout(5)
        self.assertEqual(b'', self.guest.recv(1))
        self.assertTrue(self.ok('vhost_delete_controller', ctrlr='vhost.0'))
