"""DH-HMAC-CHAP secret format and key files (spdk_vhost_core.nvme_auth)."""

import base64
import os
import stat
import zlib

import fixtures

from spdk_vhost_core import nvme_auth
from tests import base


def _secret(key, hh='00', crc=None):
    crc = zlib.crc32(key).to_bytes(4, 'little') if crc is None else crc
    return 'DHHC-1:%s:%s:' % (hh, base64.b64encode(key + crc).decode())


class SecretFormatTest(base.TestCase):

    def test_generated_secret_is_well_formed_and_fresh(self):
        for length in nvme_auth.KEY_LENGTHS:
            secret = nvme_auth.generate_secret(length)
            nvme_auth.check_secret(secret)
            prefix, hh, b64, end = secret.split(':')
            self.assertEqual(('DHHC-1', '00', ''), (prefix, hh, end))
            raw = base64.b64decode(b64)
            self.assertEqual(length + 4, len(raw))
            self.assertEqual(zlib.crc32(raw[:-4]).to_bytes(4, 'little'),
                             raw[-4:])
        self.assertNotEqual(nvme_auth.generate_secret(),
                            nvme_auth.generate_secret())

    def test_bad_length_not_generated(self):
        self.assertRaises(ValueError, nvme_auth.generate_secret, 16)

    def test_transformed_secret_accepted_with_matching_length(self):
        nvme_auth.check_secret(_secret(b'k' * 48, hh='02'))

    def test_malformed_secrets_refused(self):
        key = b'\x01' * 32
        for bad in (None, '', 'DHHC-1:00:', _secret(key)[:-1],
                    _secret(key).replace('DHHC-1', 'DHHC-2'),
                    _secret(key, hh='04'), _secret(key, hh='02'),
                    _secret(b'\x01' * 31), _secret(key, crc=b'\0' * 4),
                    'DHHC-1:00:not*base64:'):
            err = self.assertRaises(ValueError, nvme_auth.check_secret, bad)
            self.assertNotIn(base64.b64encode(key).decode()[:8], str(err))

    def test_key_name_stable_and_distinct(self):
        self.assertEqual(nvme_auth.key_name('a', 'b'),
                         nvme_auth.key_name('a', 'b'))
        self.assertNotEqual(nvme_auth.key_name('a', 'b'),
                            nvme_auth.key_name('a', 'c'))
        self.assertTrue(nvme_auth.key_name('a').startswith('spdkvhost-'))


class KeyFileTest(base.TestCase):

    def test_write_is_private_and_replaces(self):
        key_dir = os.path.join(self.useFixture(fixtures.TempDir()).path,
                               'keys')
        path = nvme_auth.write_key(key_dir, 'k', 'first')
        self.assertEqual(0o700, stat.S_IMODE(os.stat(key_dir).st_mode))
        os.chmod(path, 0o644)
        nvme_auth.write_key(key_dir, 'k', 'second')
        self.assertEqual(0o600, stat.S_IMODE(os.stat(path).st_mode))
        with open(path) as f:
            self.assertEqual('second', f.read())
