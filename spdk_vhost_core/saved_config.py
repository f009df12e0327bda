"""Keep the SPDK target's saved config in step with what the drivers do.

vhost controllers, NVMe-oF subsystems, bdev_nvme attachments and QoS
limits live only in the target's memory; ``spdk_tgt --json FILE`` replays
a saved config when it starts. So after every change they make, the
connector (compute side) and the Cinder driver (storage side) write the
target's whole live config to ``spdk_saved_config`` (the file the service
unit starts the target with), atomically, and before they report success.

Reading and writing happen under one file lock (shared by every process
on the host, Nova and Cinder alike), so a save that read the target
after a change is always the one written last: no change is lost and no
deleted object comes back. A change whose save shows the target lost it
(it restarted in between) is reported by the caller, see :func:`names`.
"""

import contextlib
import copy
import fcntl
import json
import os
import pwd
import tempfile

from oslo_concurrency import lockutils
from oslo_log import log

from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import unreplayed

LOG = log.getLogger(__name__)

# Methods replayed only once every bdev they may name exists: SPDK's own
# save_config puts QoS limits before bdev_wait_for_examine, where an lvol
# (found by examining its base bdev) may not be registered yet.
_AFTER_EXAMINE = ('bdev_set_qos_limit',)
_EXAMINE = {'method': 'bdev_wait_for_examine'}


def replay_order(doc):
    """``doc`` with each bdev entry placed where a replay can run it.

    Base bdevs, then bdev_nvme attachments, then bdev_wait_for_examine
    (lvstores and their lvols appear), then QoS limits. Subsystems stay in
    SPDK's dependency order, so vhost controllers and NVMe-oF namespaces
    come after every bdev.
    """
    out = []
    for item in doc['subsystems']:
        config = item.get('config')
        if item.get('subsystem') == 'bdev' and config:
            early = [c for c in config if c['method'] not in
                     _AFTER_EXAMINE and c != _EXAMINE]
            late = [c for c in config if c['method'] in _AFTER_EXAMINE]
            config = early + [dict(_EXAMINE)] + late
        out.append({'subsystem': item.get('subsystem'), 'config': config})
    return {'subsystems': out}


def names(doc, method, key):
    """The ``params[key]`` of every ``method`` entry of a saved config."""
    found = []
    for item in doc['subsystems']:
        for entry in item.get('config') or ():
            if entry.get('method') == method:
                found.append(entry.get('params', {}).get(key))
    return found


def write_atomic(path, doc, mode=0o640):
    """Replace ``path`` with ``doc`` so a crash leaves old or new, whole."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory,
                               prefix='.%s.' % os.path.basename(path))
    try:
        with os.fdopen(fd, 'w') as out:
            os.fchmod(out.fileno(), mode)
            json.dump(doc, out, indent=2)
            out.write('\n')
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


@contextlib.contextmanager
def file_lock(path):
    """An exclusive flock on ``path``.lock, across processes.

    ``flock(1)`` on the same file is what the service unit's ExecStop
    takes, so its save cannot interleave with a driver's either. Opened
    read-only (all flock needs): the lock file belongs to whichever
    service made it first, nova-compute or cinder-volume, and the other
    may only read it.

    Threads of one process queue on a lock of the process first: flock
    does not nest across file descriptors, and under eventlet
    (cinder-volume) a green thread blocked in flock behind another that
    holds it and waits on I/O would block the whole process for good.
    """
    with lockutils.internal_lock('spdk-saved-config:' + path):
        fd = os.open(path + '.lock',
                     os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o660)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def _user():
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return 'uid %d' % os.getuid()


# How to fix any problem path_problem finds.
_FIX = ('set it to the file the SPDK target is started with (--json), or '
        'to nothing to turn saving off (a target restart then loses every '
        'vhost controller and NVMe-oF export)')


def path_problem(path):
    """Why the config could not be saved to ``path``, or None.

    Checked when a service starts, so that a missing or unwritable
    directory is reported then, naming the option, and not as a failed
    attachment later. An empty ``path`` (saving turned off) is fine.
    """
    why = _path_problem(path) if path else None
    return '%s; %s' % (why, _FIX) if why else None


def _path_problem(path):
    if not os.path.isabs(path):
        return 'is not an absolute path'
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        return ('its directory %s does not exist: the SPDK service unit '
                'and etc/tmpfiles.d/spdk-vhost.conf make it' % directory)
    if not os.access(directory, os.W_OK | os.X_OK):
        return ('its directory %s is not writable by %s, who must '
                'replace the file in it (make the user a member of the '
                'directory\'s group)' % (directory, _user()))
    if os.path.lexists(path) and not os.path.isfile(path):
        return 'is not a regular file'
    lock = path + '.lock'
    if os.path.lexists(lock) and not os.access(lock, os.R_OK):
        return 'its lock file %s is not readable by %s' % (lock, _user())
    return None


class ConfigSaver(object):
    """Saves one target's live config to one file; a no-op without one.

    ``transient(entry)`` may name config entries not worth replaying
    (scratch bdevs that are gone again by the next save).
    """

    def __init__(self, client, path, transient=None):
        self.client = client
        self.path = path
        self._transient = transient

    @classmethod
    def from_conf(cls, client, conf, transient=None):
        return cls(client, conf.spdk_saved_config, transient=transient)

    @property
    def enabled(self):
        return bool(self.path)

    def _filtered(self, doc):
        if self._transient is None:
            return doc
        for item in doc['subsystems']:
            if item.get('config'):
                item['config'] = [c for c in item['config']
                                  if not self._transient(c)]
        return doc

    def save(self, subsystems=None, edits=None):
        """Write the live config; return it (None when disabled).

        ``subsystems``: the names of the only subsystems a change touched.
        Their config is read from the target, one round trip each, and the
        others are kept from the file, which a whole save (one round trip
        per subsystem, a dozen or more) would only write again unchanged.
        ``edits``: ``{subsystem: edit(config) -> config}``, the caller's
        own changes to subsystems it knows the entries of, made in the
        kept file instead of a round trip whose reply grows with the
        target. Without a file yet (or without one of those subsystems
        in it), the whole config is saved, and ``edits`` are not needed.
        Either way, what the target could not replay at its start is
        kept (:mod:`unreplayed`).

        Raises :class:`~spdk_vhost_core.exception.ConfigNotSaved` (the
        target is unreachable, or the file cannot be written): the
        caller's change is then not durable.
        """
        if not self.enabled:
            return None
        try:
            with file_lock(self.path):
                return self.save_locked(subsystems, edits)
        except OSError as err:  # the lock's file: its directory
            raise spdk_exc.ConfigNotSaved(self.path, err) from err

    def save_locked(self, subsystems=None, edits=None):
        """:meth:`save`, by a caller that holds :func:`file_lock`."""
        try:
            old = self.read()
            doc, reread = None, None
            if old is not None and (subsystems or edits):
                reread = tuple(subsystems or ())
                doc = self._updated(copy.deepcopy(old), reread,
                                    edits or {})
            if doc is None:
                doc, reread = self.client.save_config(), None
            doc = unreplayed.keep(old, self._filtered(doc), reread,
                                  self.client)
            doc = replay_order(doc)
            write_atomic(self.path, doc)
        except spdk_exc.SpdkRpcError as err:
            raise spdk_exc.ConfigNotSaved(self.path, err) from err
        except OSError as err:
            raise spdk_exc.ConfigNotSaved(self.path, err) from err
        LOG.debug('Saved the SPDK config of %s to %s', self.client.target,
                  self.path)
        return doc

    def read(self):
        """The saved file; None when there is none, or it is unreadable."""
        try:
            with open(self.path) as f:
                return json.load(f)
        except FileNotFoundError:
            return None
        except ValueError as err:
            LOG.warning('Saved config %s is unreadable (%s): saving it '
                        'whole', self.path, err)
            return None

    def _updated(self, doc, subsystems, edits):
        """The saved ``doc``, ``subsystems`` read again, ``edits`` made.

        None when it lacks one of them.
        """
        items = doc.get('subsystems') or []
        if not set(subsystems) | set(edits) <= {i.get('subsystem')
                                                for i in items}:
            return None
        for item in items:
            name = item.get('subsystem')
            if name in subsystems:
                item['config'] = self.client.framework_get_config(name)
            if name in edits:
                item['config'] = edits[name](item.get('config') or [])
        return doc
