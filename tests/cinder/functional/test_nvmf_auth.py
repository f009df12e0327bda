"""spdk_nvmf_auth = dhchap: a fresh key per attachment, gone on detach."""

import os
import stat

from cinder import exception
import fixtures

from os_brick_connector import nvme_auth
from tests.cinder.functional import test_driver

REMOTE = test_driver.REMOTE
OTHER = dict(REMOTE, nqn=test_driver.OTHER_NQN)


class DhchapExportTest(test_driver.DriverTestCase):

    def setUp(self):
        super().setUp()
        self.key_dir = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'keys')
        self.driver = self.make_driver(spdk_nvmf_auth='dhchap',
                                       spdk_nvmf_key_dir=self.key_dir)

    def host_keys(self, volume):
        sub = self.rpc('nvmf_get_subsystems',
                       {'nqn': self.driver.exporter.nqn(volume.name)})[0]
        return {h['nqn']: h.get('dhchap_key') for h in sub['hosts']}

    def keyring(self):
        return {k['name']: k['path'] for k in self.rpc('keyring_get_keys')}

    def test_attach_gets_a_fresh_key_in_the_keyring(self):
        volume = self.created()
        secret = self.driver.initialize_connection(
            volume, REMOTE)['data']['dhchap_key']
        nvme_auth.check_secret(secret)
        name = self.host_keys(volume)[REMOTE['nqn']]
        path = self.keyring()[name]
        self.assertEqual(self.key_dir, os.path.dirname(path))
        self.assertEqual(0o600, stat.S_IMODE(os.stat(path).st_mode))
        with open(path) as f:
            self.assertEqual(secret, f.read())
        again = self.driver.initialize_connection(
            volume, REMOTE)['data']['dhchap_key']
        self.assertNotEqual(secret, again)
        self.assertEqual([name], list(self.keyring()))
        with open(path) as f:
            self.assertEqual(again, f.read())

    def test_detach_removes_host_key_and_file(self):
        volume = self.created()
        self.driver.initialize_connection(volume, REMOTE)
        self.driver.initialize_connection(volume, OTHER)
        self.assertEqual(2, len(self.keyring()))
        self.driver.terminate_connection(volume, REMOTE)
        self.assertEqual([OTHER['nqn']], list(self.host_keys(volume)))
        self.assertEqual(1, len(os.listdir(self.key_dir)))
        self.driver.terminate_connection(volume, None)
        self.assertEqual({}, self.keyring())
        self.assertEqual([], os.listdir(self.key_dir))
        self.assertEqual([], self.subsystems())

    def test_auth_off_sends_no_key(self):
        driver = self.make_driver(spdk_nvmf_auth='none',
                                  spdk_nvmf_key_dir=None)
        volume = self.created()
        data = driver.initialize_connection(volume, REMOTE)['data']
        self.assertNotIn('dhchap_key', data)
        self.assertEqual({REMOTE['nqn']: None}, self.host_keys(volume))
        self.assertEqual({}, self.keyring())

    def test_key_dir_required(self):
        self.assertRaises(exception.InvalidConfigurationValue,
                          self.make_driver, spdk_nvmf_auth='dhchap',
                          spdk_nvmf_key_dir=None)

    def test_relative_key_dir_refused(self):
        self.assertRaises(exception.InvalidConfigurationValue,
                          self.make_driver, spdk_nvmf_auth='dhchap',
                          spdk_nvmf_key_dir='keys')
