"""DH-HMAC-CHAP on the emulated NVMe-oF link, between two emulators.

The storage emulator exports a raw file (bdev_aio) in a subsystem that
admits the host only with a keyring key; the compute emulator attaches it
with bdev_nvme_attach_controller naming its own keyring key.  Data moves
through the compute side's NVMe bdev (qemu-io, QEMU's NBD client, on the
link's initiator socket) and is checked in the raw file itself.  The
emulator models SPDK's *check* of the key, not the NVMe in-band
authentication protocol.
"""

import errno
import os
import shutil
import stat
import subprocess

import fixtures

from os_brick_connector import exception as spdk_exc
from os_brick_connector import nvme_auth
from os_brick_connector import spdk_rpc
from testbed import net
from tests import base
from tests.emulator import fixture as emu_fixture
from tests.emulator import nvmf

SUBNQN = 'nqn.2016-06.io.spdk:cinder:volume-auth'
HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:0d6c1a6e-3c55-4d3b-9f0e-5b1d2b7c'
SIZE = 8 * 1024 * 1024


class NvmfAuthTest(base.TestCase):

    def setUp(self):
        super().setUp()
        if not shutil.which('qemu-io'):
            self.skipTest('qemu-io is not installed')
        self.useFixture(fixtures.Timeout(120, gentle=True))
        tmp = self.useFixture(fixtures.TempDir()).path
        self.storage_keys = os.path.join(tmp, 'storage-keys')
        self.compute_keys = os.path.join(tmp, 'compute-keys')
        self.raw = os.path.join(tmp, 'volume.raw')
        with open(self.raw, 'wb') as f:
            f.truncate(SIZE)
        self.storage = self._target()
        self.compute_target = self.useFixture(
            emu_fixture.EmulatorFixture(use_real=False))
        self.compute = self._client(self.compute_target)
        self.port = str(net.free_port())
        self.storage.nvmf_create_transport('TCP')
        self.storage.bdev_aio_create(self.raw, 'vol0', block_size=512)
        self.storage.nvmf_create_subsystem(SUBNQN, allow_any_host=False)
        self.storage.nvmf_subsystem_add_ns(SUBNQN, 'vol0')
        self.storage.nvmf_subsystem_add_listener(
            SUBNQN, 'TCP', '127.0.0.1', self.port, adrfam='IPv4')
        self.secret = nvme_auth.generate_secret()
        nvme_auth.register(self.storage, self.storage_keys, 'host0',
                           self.secret)
        self.storage.nvmf_subsystem_add_host(SUBNQN, HOSTNQN,
                                             dhchap_key='host0')

    def _client(self, target):
        client = spdk_rpc.SpdkClient(socket_path=target.socket_path,
                                     timeout=30, connect_retries=0)
        self.addCleanup(client.close)
        return client

    def _target(self):
        return self._client(self.useFixture(
            emu_fixture.EmulatorFixture(use_real=False)))

    def _attach(self, key=None):
        return self.compute.bdev_nvme_attach_controller(
            name='auth0', trtype='TCP', traddr='127.0.0.1',
            trsvcid=self.port, subnqn=SUBNQN, hostnqn=HOSTNQN,
            adrfam='IPv4', dhchap_key=key)

    def _compute_key(self, secret):
        nvme_auth.register(self.compute, self.compute_keys, 'vol0-key',
                           secret)
        self.addCleanup(nvme_auth.unregister, self.compute,
                        self.compute_keys, 'vol0-key')
        return 'vol0-key'

    def _assert_refused(self, key):
        err = self.assertRaises(spdk_exc.SpdkRpcError, self._attach, key)
        self.assertEqual(-errno.EIO, err.code)
        self.assertEqual([], self.compute.bdev_nvme_get_controllers())

    def _qemu_io(self, command):
        sock = os.path.join(self.compute_target.state_dir, 'nvme',
                            'auth0n1.sock')
        uri = 'nbd+unix:///%s?socket=%s' % (nvmf.export_name(SUBNQN, 1),
                                            sock)
        subprocess.run(['qemu-io', '-f', 'raw', '-c', command, uri],
                       check=True, capture_output=True, timeout=60)

    def test_right_key_attaches_and_moves_data(self):
        key = self._compute_key(self.secret)
        self.assertEqual(['auth0n1'], self._attach(key))
        self._qemu_io('write -P 0x5a 65536 131072')
        with open(self.raw, 'rb') as f:
            f.seek(65536)
            self.assertEqual(b'\x5a' * 131072, f.read(131072))
            self.assertEqual(b'\0' * 65536, f.read(65536))
        self.compute.bdev_nvme_detach_controller('auth0')

    def test_wrong_key_is_refused(self):
        self._assert_refused(self._compute_key(
            nvme_auth.generate_secret()))

    def test_no_key_is_refused(self):
        self._assert_refused(None)

    def test_host_removed_with_its_key(self):
        self.storage.nvmf_subsystem_remove_host(SUBNQN, HOSTNQN)
        nvme_auth.unregister(self.storage, self.storage_keys, 'host0')
        self.assertEqual([], self.storage.keyring_get_keys())
        self.assertEqual([], os.listdir(self.storage_keys))
        self.assertEqual([], self.storage.nvmf_get_subsystems(
            nqn=SUBNQN)[0]['hosts'])
        # And a second unregister (a retried detach) is fine.
        nvme_auth.unregister(self.storage, self.storage_keys, 'host0')

    def test_subsystem_lists_key_name_not_secret(self):
        hosts = self.storage.nvmf_get_subsystems(nqn=SUBNQN)[0]['hosts']
        self.assertEqual([{'nqn': HOSTNQN, 'dhchap_key': 'host0'}], hosts)
        [key] = self.storage.keyring_get_keys()
        self.assertEqual('host0', key['name'])
        self.assertEqual(0o600, stat.S_IMODE(os.stat(key['path']).st_mode))


class KeyringErrorsTest(base.TestCase):
    """keyring_file_* refusals (from SPDK's source; no transcript)."""

    def setUp(self):
        super().setUp()
        target = self.useFixture(emu_fixture.EmulatorFixture(use_real=False))
        self.client = spdk_rpc.SpdkClient(socket_path=target.socket_path,
                                          timeout=30, connect_retries=0)
        self.addCleanup(self.client.close)
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
        err = self.assertRaises(spdk_exc.SpdkRpcError,
                                self.client.keyring_file_remove_key, 'k9')
        self.assertEqual(-errno.ENOKEY, err.code)

    def test_add_host_with_unknown_key_refused(self):
        nqn = 'nqn.2016-06.io.spdk:cinder:k'
        self.client.nvmf_create_subsystem(nqn)
        self.assertRaises(spdk_exc.InvalidParams,
                          self.client.nvmf_subsystem_add_host, nqn, HOSTNQN,
                          dhchap_key='k9')
