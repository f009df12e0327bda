"""DH-HMAC-CHAP secrets for NVMe-oF, and SPDK's file keyring.

Shared by the Cinder driver (storage side) and the connector (compute
side): both hand SPDK a key by *name*, after writing the secret to a
0600 file that ``keyring_file_add_key`` registers, so no secret ever
appears in an RPC's parameters (or in the RPC log).

The secret uses the NVMe representation (``nvme gen-dhchap-key``):
``DHHC-1:<hh>:<base64(key || CRC-32 of key, little endian)>:`` where
``hh`` 00 means the key is used as is, and the key is 32, 48 or 64
bytes long.
"""

import base64
import binascii
import contextlib
import hashlib
import os
import secrets
import zlib

from spdk_vhost_core import exception as spdk_exc

PREFIX = 'DHHC-1'
KEY_LENGTHS = (32, 48, 64)
# hh -> the key length the transformation requires (None: any above).
_TRANSFORMS = {'00': None, '01': 32, '02': 48, '03': 64}
NAME_PREFIX = 'spdkvhost-'


def generate_secret(length=32):
    """A fresh random DH-HMAC-CHAP secret, untransformed (``00``)."""
    if length not in KEY_LENGTHS:
        raise ValueError('DH-HMAC-CHAP keys are 32, 48 or 64 bytes')
    key = secrets.token_bytes(length)
    crc = zlib.crc32(key).to_bytes(4, 'little')
    return '%s:00:%s:' % (PREFIX, base64.b64encode(key + crc).decode())


def check_secret(secret):
    """Raise ValueError unless ``secret`` is a well-formed DHHC-1 secret.

    The message never contains the secret.
    """
    parts = secret.split(':') if isinstance(secret, str) else []
    if len(parts) != 4 or parts[0] != PREFIX or parts[3] != '':
        raise ValueError('not a DHHC-1:<hh>:<base64>: secret')
    if parts[1] not in _TRANSFORMS:
        raise ValueError('unknown DH-HMAC-CHAP transformation %r'
                         % parts[1])
    try:
        raw = base64.b64decode(parts[2], validate=True)
    except binascii.Error as err:
        raise ValueError('DH-HMAC-CHAP secret is not base64') from err
    key, crc = raw[:-4], raw[-4:]
    wanted = _TRANSFORMS[parts[1]]
    if len(key) not in KEY_LENGTHS or wanted not in (None, len(key)):
        raise ValueError('DH-HMAC-CHAP key of wrong length %d' % len(key))
    if zlib.crc32(key).to_bytes(4, 'little') != crc:
        raise ValueError('DH-HMAC-CHAP secret fails its CRC check')


def key_name(*parts):
    """A stable keyring name for (subsystem, host): retries find it."""
    digest = hashlib.sha256('|'.join(parts).encode()).hexdigest()
    return NAME_PREFIX + digest[:24]


def _key_path(key_dir, name):
    return os.path.join(key_dir, name)


def has_key(key_dir, name):
    """Whether a key of that name was written (and so may be registered)."""
    return os.path.exists(_key_path(key_dir, name))


def write_key(key_dir, name, secret):
    """Write ``secret`` to ``<key_dir>/<name>``, mode 0600, and its path.

    SPDK refuses key files readable by group or others; the directory is
    made 0700 for the same reason.  An existing file is replaced.
    """
    os.makedirs(key_dir, mode=0o700, exist_ok=True)
    path = _key_path(key_dir, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                 0o600)
    with os.fdopen(fd, 'w', encoding='utf-8') as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(secret)
    return path


def register(client, key_dir, name, secret):
    """Write the key file and (re-)register it in SPDK's keyring.

    A key of that name left behind by an interrupted attach is replaced,
    since the secret is new.
    """
    path = write_key(key_dir, name, secret)
    try:
        client.keyring_file_add_key(name, path)
    except spdk_exc.AlreadyExists:
        client.keyring_file_remove_key(name)
        client.keyring_file_add_key(name, path)
    return path


def unregister(client, key_dir, name):
    """Remove the key from SPDK's keyring and delete its file.

    Both may already be gone (a retried detach): that is fine.
    """
    try:
        client.keyring_file_remove_key(name)
    except spdk_exc.NotFound:
        pass  # -ENOKEY: the keyring does not have it (any more)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_key_path(key_dir, name))
