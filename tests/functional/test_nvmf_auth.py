"""DH-HMAC-CHAP over NVMe/TCP between two real SPDK targets, on loopback.

The storage target (an interrupt-mode ``nvmf_tgt``) exports a raw file
(bdev_aio) in a subsystem that admits the host only with a keyring key;
the compute target (a polling ``vhost``: SPDK's NVMe-oF initiator refuses
interrupt mode) attaches it with ``bdev_nvme_attach_controller`` naming
its own keyring key. Both sides get their keys through
``spdk_vhost_core.nvme_auth``, as the drivers do, so the real in-band
authentication runs on the secrets the product makes.
"""

import errno
import os
import stat

import fixtures

from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import nvme_auth
from spdk_vhost_core import spdk_rpc
from testbed import net
from testbed import spdk_target
from tests import base

SUBNQN = 'nqn.2016-06.io.spdk:cinder:volume-auth'
HOSTNQN = ('nqn.2014-08.org.nvmexpress:uuid:'
           '0d6c1a6e-3c55-4d3b-9f0e-5b1d2b7c4e21')
SIZE = 8 * 1024 * 1024
BLOCK = 512


def _client(test, target):
    client = spdk_rpc.SpdkClient(socket_path=target.socket_path,
                                 timeout=60, connect_retries=0)
    test.addCleanup(client.close)
    return client


class NvmfAuthTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(180, gentle=True))
        tmp = self.useFixture(fixtures.TempDir()).path
        self.storage_keys = os.path.join(tmp, 'storage-keys')
        self.compute_keys = os.path.join(tmp, 'compute-keys')
        raw = os.path.join(tmp, 'volume.raw')
        with open(raw, 'wb') as f:
            f.truncate(SIZE)
        self.storage = _client(self, self.useFixture(spdk_target.SpdkTarget(
            app='nvmf_tgt', interrupt_mode=True, name='storage')))
        self.compute = _client(self, self.useFixture(spdk_target.SpdkTarget(
            app='vhost', name='compute')))
        self.port = str(net.free_port())
        self.storage.nvmf_create_transport('TCP')
        self.storage.bdev_aio_create(raw, 'vol0', block_size=BLOCK)
        self.storage.nvmf_create_subsystem(SUBNQN, allow_any_host=False)
        self.storage.nvmf_subsystem_add_ns(SUBNQN, 'vol0')
        self.storage.nvmf_subsystem_add_listener(
            SUBNQN, 'TCP', '127.0.0.1', self.port, adrfam='IPv4')
        self.secret = nvme_auth.generate_secret()
        nvme_auth.register(self.storage, self.storage_keys, 'host0',
                           self.secret)

    def _admit(self, ctrlr_secret=None):
        """Admit HOSTNQN with its key (and a controller key: mutual)."""
        ctrlr_key = None
        if ctrlr_secret:
            ctrlr_key = 'ctrlr0'
            nvme_auth.register(self.storage, self.storage_keys, ctrlr_key,
                               ctrlr_secret)
        self.storage.nvmf_subsystem_add_host(
            SUBNQN, HOSTNQN, dhchap_key='host0', dhchap_ctrlr_key=ctrlr_key)

    def _compute_key(self, name, secret):
        nvme_auth.register(self.compute, self.compute_keys, name, secret)
        self.addCleanup(nvme_auth.unregister, self.compute,
                        self.compute_keys, name)
        return name

    def _attach(self, key=None, ctrlr_key=None):
        return self.compute.bdev_nvme_attach_controller(
            name='auth0', trtype='TCP', traddr='127.0.0.1',
            trsvcid=self.port, subnqn=SUBNQN, hostnqn=HOSTNQN,
            adrfam='IPv4', dhchap_key=key, dhchap_ctrlr_key=ctrlr_key)

    def _assert_attached(self):
        [bdev] = self.compute.bdev_get_bdevs('auth0n1')
        self.assertEqual((SIZE // BLOCK, BLOCK),
                         (bdev['num_blocks'], bdev['block_size']))
        qpairs = self.storage.call('nvmf_subsystem_get_qpairs',
                                   {'nqn': SUBNQN})
        self.assertNotEqual([], qpairs)
        for qpair in qpairs:
            self.assertEqual('completed', qpair['auth']['state'], qpair)
        return qpairs

    def _assert_refused(self, key, ctrlr_key=None):
        err = self.assertRaises(spdk_exc.SpdkRpcError, self._attach, key,
                                ctrlr_key)
        self.assertEqual(-errno.EIO, err.code)
        self.assertEqual([], self.compute.call('bdev_nvme_get_controllers'))

    def test_host_key_completes_the_handshake(self):
        self._admit()
        key = self._compute_key('vol0-key', self.secret)
        self.assertEqual(['auth0n1'], self._attach(key))
        self._assert_attached()
        self.compute.bdev_nvme_detach_controller('auth0')

    def test_host_and_controller_keys_complete_both_ways(self):
        ctrlr_secret = nvme_auth.generate_secret(48)
        self._admit(ctrlr_secret)
        self.assertEqual(['auth0n1'], self._attach(
            self._compute_key('vol0-key', self.secret),
            self._compute_key('vol0-ctrlr', ctrlr_secret)))
        self._assert_attached()
        self.compute.bdev_nvme_detach_controller('auth0')

    def test_wrong_controller_key_is_refused(self):
        # The host checks the controller too: a storage target that does
        # not hold the secret the host expects is not trusted.
        self._admit(nvme_auth.generate_secret())
        self._assert_refused(
            self._compute_key('vol0-key', self.secret),
            self._compute_key('vol0-ctrlr', nvme_auth.generate_secret()))

    def test_wrong_key_is_refused(self):
        self._admit()
        self._assert_refused(self._compute_key(
            'vol0-key', nvme_auth.generate_secret()))

    def test_no_key_is_refused(self):
        self._admit()
        self._assert_refused(None)

    def test_removed_host_cannot_reconnect(self):
        self._admit()
        key = self._compute_key('vol0-key', self.secret)
        self._attach(key)
        self.compute.bdev_nvme_detach_controller('auth0')
        self.storage.nvmf_subsystem_remove_host(SUBNQN, HOSTNQN)
        self._assert_refused(key)

    def test_host_removed_with_its_key(self):
        self._admit()
        self.storage.nvmf_subsystem_remove_host(SUBNQN, HOSTNQN)
        nvme_auth.unregister(self.storage, self.storage_keys, 'host0')
        self.assertEqual([], self.storage.call('keyring_get_keys'))
        self.assertEqual([], os.listdir(self.storage_keys))
        self.assertEqual([], self.storage.nvmf_get_subsystems(
            nqn=SUBNQN)[0]['hosts'])
        # And a second unregister (a retried detach) is fine.
        nvme_auth.unregister(self.storage, self.storage_keys, 'host0')

    def test_subsystem_lists_key_name_not_secret(self):
        self._admit()
        hosts = self.storage.nvmf_get_subsystems(nqn=SUBNQN)[0]['hosts']
        self.assertEqual([{'nqn': HOSTNQN, 'dhchap_key': 'host0'}], hosts)
        [key] = self.storage.call('keyring_get_keys')
        self.assertEqual('host0', key['name'])
        self.assertNotIn(self.secret, str(key))
        self.assertEqual(0o600, stat.S_IMODE(os.stat(key['path']).st_mode))


class KeyringErrorsTest(base.TestCase):
    """keyring_file_* refusals on a real target, as the helpers see them."""

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(120, gentle=True))
        self.client = _client(self, self.useFixture(spdk_target.SpdkTarget(
            app='nvmf_tgt', interrupt_mode=True, name='storage')))
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = nvme_auth.write_key(self.dir, 'k0',
                                        nvme_auth.generate_secret())

    def test_group_readable_file_refused(self):
        os.chmod(self.path, 0o640)
        self.assertRaises(spdk_exc.NotPermitted,
                          self.client.keyring_file_add_key, 'k0', self.path)

    def test_relative_path_refused(self):
        self.assertRaises(spdk_exc.NotPermitted,
                          self.client.keyring_file_add_key, 'k0', 'k0')

    def test_missing_file_refused(self):
        self.assertRaises(spdk_exc.NotFound,
                          self.client.keyring_file_add_key, 'k1',
                          os.path.join(self.dir, 'nope'))

    def test_duplicate_name_refused(self):
        self.client.keyring_file_add_key('k0', self.path)
        self.assertRaises(spdk_exc.AlreadyExists,
                          self.client.keyring_file_add_key, 'k0', self.path)

    def test_remove_unknown_key(self):
        err = self.assertRaises(spdk_exc.NotFound,
                                self.client.keyring_file_remove_key, 'k9')
        self.assertEqual(-errno.ENOKEY, err.code)

    def test_add_host_with_unknown_key_refused(self):
        nqn = 'nqn.2016-06.io.spdk:cinder:k'
        self.client.nvmf_create_subsystem(nqn)
        self.assertRaises(spdk_exc.InvalidParams,
                          self.client.nvmf_subsystem_add_host, nqn, HOSTNQN,
                          dhchap_key='k9')
