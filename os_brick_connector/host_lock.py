"""The connector's lock: one attach, detach or repair at a time per host.

``connect_volume`` and ``disconnect_volume`` hold it, and so does
``spdk-vhost-replicas`` for each volume it repairs, so that a repair
never races an attach or a detach of the same volume (a mirror deleted
under a member being added back, or assembled while one is). It is an
external lock (a file in oslo.concurrency's ``lock_path``): Nova's
workers and the command are separate processes.
"""

import os

from oslo_concurrency import lockutils
from oslo_config import cfg

NAME = 'spdk-vhost-connector'

#: The connector's public methods hold it.
synchronized = lockutils.synchronized(NAME, external=True)


def directory(lock_path=None):
    """Where the lock's file is: ``lock_path``, else this process's.

    Refused (``cfg.RequiredOptError``) when neither is set, before
    anything is done that would need the lock.
    """
    found = lock_path or cfg.CONF.oslo_concurrency.lock_path
    if not found:
        raise cfg.RequiredOptError('lock_path',
                                   cfg.OptGroup('oslo_concurrency'))
    return found


def held(lock_path=None):
    """The lock, as a context manager.

    ``lock_path``: the directory of the lock's file, which must be the
    one nova-compute uses (its ``[oslo_concurrency] lock_path``); None
    takes this process's ``CONF.oslo_concurrency.lock_path``.
    """
    if lock_path:
        _create_as_directory_owner(os.path.join(lock_path, NAME))
    return lockutils.lock(NAME, external=True, lock_path=lock_path)


def _create_as_directory_owner(path):
    """Make the lock's missing file, owned as its directory is.

    ``spdk-vhost-replicas`` runs as root: a file it made first would be
    root's, and nova-compute (the directory's owner) could not open it
    any more, failing every attach on the host.
    """
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except (FileExistsError, FileNotFoundError):
        return  # nova-compute's own, or no directory yet: lockutils's
    try:
        if os.geteuid() == 0:
            owner = os.stat(os.path.dirname(path))
            os.fchown(fd, owner.st_uid, owner.st_gid)
    finally:
        os.close(fd)
