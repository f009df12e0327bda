"""spdk_nvmf_auth = dhchap: fresh keys per attachment, gone on detach.

The handshake is real: a second SPDK target plays the compute host and
attaches the export over NVMe/TCP with the secrets from the connection
info (DH-HMAC-CHAP both ways); a wrong secret on either side is refused.
"""

import os
import stat
import uuid

from cinder import exception
import fixtures

from spdk_vhost_core import nvme_auth
from testbed import spdk_target
from tests.cinder.functional import test_driver

REMOTE = test_driver.REMOTE
OTHER = dict(REMOTE, nqn=test_driver.OTHER_NQN)


NVME_FIELDS = ('dhchap_key', 'dhchap_ctrlr_key')


class DhchapExportTest(test_driver.DriverTestCase):

    def setUp(self):
        super().setUp()
        self.key_dir = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'keys')
        self.driver = self.make_driver(spdk_nvmf_auth='dhchap',
                                       spdk_nvmf_key_dir=self.key_dir)

    def host_target(self):
        """A compute host's SPDK target (polls: the initiator needs it)."""
        return self.useFixture(spdk_target.SpdkTarget(app='vhost',
                                                      name='host'))

    def attach(self, host, data, fields=NVME_FIELDS, **wrong):
        """Attach as the compute host would; the raw JSON-RPC response."""
        params = {'name': 'nvme0',
                  'trtype': data['transport'], 'traddr': data['traddr'],
                  'trsvcid': data['trsvcid'], 'adrfam': data['adrfam'],
                  'subnqn': data['nqn'], 'hostnqn': data['host_nqn']}
        for field in fields:
            secret = wrong.get(field, data[field])
            name = '%s-%s' % (field, uuid.uuid4().hex)
            path = nvme_auth.write_key(host.workdir, name, secret)
            host.rpc('keyring_file_add_key', {'name': name, 'path': path})
            params[field] = name
        return host.call('bdev_nvme_attach_controller', params)

    @staticmethod
    def rpc_names(host):
        return host.rpc('bdev_nvme_get_controllers')

    def test_host_with_the_keys_completes_the_handshake(self):
        volume = self.created()
        data = self.driver.initialize_connection(volume, REMOTE)['data']
        nvme_auth.check_secret(data['dhchap_ctrlr_key'])
        self.assertNotEqual(data['dhchap_key'], data['dhchap_ctrlr_key'])
        host = self.host_target()
        reply = self.attach(host, data)
        self.assertEqual(['nvme0n1'], reply.get('result'), reply)
        qpairs = self.rpc('nvmf_subsystem_get_qpairs', {'nqn': data['nqn']})
        self.assertNotEqual([], qpairs)
        for qpair in qpairs:
            self.assertEqual('completed', qpair['auth']['state'], qpair)
        bdev = host.rpc('bdev_get_bdevs', {'name': 'nvme0n1'})[0]
        self.assertEqual(self.bdev(self.alias(volume))['num_blocks'],
                         bdev['num_blocks'])

    def test_wrong_keys_refused(self):
        volume = self.created()
        data = self.driver.initialize_connection(volume, REMOTE)['data']
        host = self.host_target()
        other = nvme_auth.generate_secret()
        for field in ('dhchap_key', 'dhchap_ctrlr_key'):
            reply = self.attach(host, data, **{field: other})
            self.assertIn('error', reply, field)
        self.assertEqual([], self.rpc_names(host))
        self.assertEqual([], self.rpc('nvmf_subsystem_get_qpairs',
                                      {'nqn': data['nqn']}))
        # The right keys still work afterwards.
        self.assertIn('result', self.attach(host, data))

    def test_host_key_alone_still_connects(self):
        """A host that does not check the subsystem (one-way) gets in."""
        volume = self.created()
        data = self.driver.initialize_connection(volume, REMOTE)['data']
        host = self.host_target()
        other = nvme_auth.generate_secret()
        self.assertIn('error', self.attach(host, data, ['dhchap_key'],
                                           dhchap_key=other))
        self.assertIn('result', self.attach(host, data, ['dhchap_key']))

    def test_old_keys_refused_after_reattach(self):
        volume = self.created()
        old = self.driver.initialize_connection(volume, REMOTE)['data']
        new = self.driver.initialize_connection(volume, REMOTE)['data']
        host = self.host_target()
        self.assertIn('error', self.attach(host, old))
        self.assertIn('result', self.attach(host, new))

    def host_keys(self, volume):
        sub = self.rpc('nvmf_get_subsystems',
                       {'nqn': self.driver.exporter.nqn(volume.name)})[0]
        return {h['nqn']: (h.get('dhchap_key'), h.get('dhchap_ctrlr_key'))
                for h in sub['hosts']}

    def keyring(self):
        return {k['name']: k['path'] for k in self.rpc('keyring_get_keys')}

    def test_attach_gets_a_fresh_key_in_the_keyring(self):
        volume = self.created()
        secret = self.driver.initialize_connection(
            volume, REMOTE)['data']['dhchap_key']
        nvme_auth.check_secret(secret)
        name, ctrlr_name = self.host_keys(volume)[REMOTE['nqn']]
        path = self.keyring()[name]
        self.assertEqual(self.key_dir, os.path.dirname(path))
        self.assertEqual(0o600, stat.S_IMODE(os.stat(path).st_mode))
        with open(path) as f:
            self.assertEqual(secret, f.read())
        again = self.driver.initialize_connection(
            volume, REMOTE)['data']['dhchap_key']
        self.assertNotEqual(secret, again)
        self.assertEqual(sorted([name, ctrlr_name]), sorted(self.keyring()))
        with open(path) as f:
            self.assertEqual(again, f.read())

    def test_detach_removes_host_key_and_file(self):
        volume = self.created()
        self.driver.initialize_connection(volume, REMOTE)
        self.driver.initialize_connection(volume, OTHER)
        self.assertEqual(4, len(self.keyring()))
        self.driver.terminate_connection(volume, REMOTE)
        self.assertEqual([OTHER['nqn']], list(self.host_keys(volume)))
        self.assertEqual(2, len(os.listdir(self.key_dir)))
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
        self.assertNotIn('dhchap_ctrlr_key', data)
        self.assertEqual({REMOTE['nqn']: (None, None)},
                         self.host_keys(volume))
        self.assertEqual({}, self.keyring())

    def test_key_dir_required(self):
        self.assertRaises(exception.InvalidConfigurationValue,
                          self.make_driver, spdk_nvmf_auth='dhchap',
                          spdk_nvmf_key_dir=None)

    def test_relative_key_dir_refused(self):
        self.assertRaises(exception.InvalidConfigurationValue,
                          self.make_driver, spdk_nvmf_auth='dhchap',
                          spdk_nvmf_key_dir='keys')
