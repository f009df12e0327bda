"""SPDK's file keyring: named keys whose secret lives in a 0600 file.

The NVMe-oF RPCs take key *names*; the secret is read from the file when
a key is used, as SPDK's keyring_file module does.  No transcript covers
these RPCs: the error behaviour below follows SPDK's
module/keyring/file sources (relative path or group/other permissions:
-EPERM, missing file: -ENOENT, duplicate name: -EEXIST, removing an
unknown key: -ENOKEY), each answered as ``-errno`` with strerror's text.
"""

import errno
import os
import stat

from tests.emulator import errors
from tests.emulator import params as p


class KeyringState(object):
    def __init__(self, target):
        self.target = target
        self.keys = {}   # name -> path

    def has(self, name):
        return name in self.keys

    def path(self, name):
        return self.keys.get(name)


def read_secret(path):
    """A key file's content now, or None if it is gone or unreadable.

    Read at each use, like SPDK's file keyring, so a file rewritten in
    place is picked up.
    """
    if path is None:
        return None
    try:
        with open(path, encoding='utf-8') as f:
            return f.read().strip()
    except OSError:
        return None


def keyring_file_add_key(target, args):
    name, path = args['name'], args['path']
    if not os.path.isabs(path):
        raise errors.errno_error(errno.EPERM)
    try:
        mode = os.stat(path).st_mode
    except OSError as err:
        raise errors.errno_error(err.errno) from err
    if stat.S_IMODE(mode) & 0o077:
        raise errors.errno_error(errno.EPERM)
    if target.keyring.has(name):
        raise errors.errno_error(errno.EEXIST)
    target.keyring.keys[name] = path
    return True


def keyring_file_remove_key(target, args):
    if target.keyring.keys.pop(args['name'], None) is None:
        raise errors.errno_error(errno.ENOKEY)
    return True


def keyring_get_keys(target, args):
    return [{'name': n, 'removed': False, 'probed': False, 'refcnt': 1,
             'path': path} for n, path in target.keyring.keys.items()]


METHODS = {
    'keyring_file_add_key': (p.Object(name=p.string, path=p.string),
                             keyring_file_add_key),
    'keyring_file_remove_key': (p.Object(name=p.string),
                                keyring_file_remove_key),
    'keyring_get_keys': (p.NO_PARAMS, keyring_get_keys),
}
