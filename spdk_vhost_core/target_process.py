"""The SPDK target process the upgrade command replaces.

Who runs it (the command itself, or its systemd unit), with which
arguments, and how it is stopped, started and waited for: the upgrade
(:mod:`upgrade`) only says when.
"""

import os
import re
import signal
import subprocess
import time

from spdk_vhost_core import exception
from spdk_vhost_core import reconnect
from spdk_vhost_core import systemd_unit


def binary_version(app, tree):
    """``(major, minor, patch)`` that ``app --version`` of ``tree`` says."""
    path = os.path.join(tree, 'build', 'bin', app)
    try:
        out = subprocess.run([path, '--version'], env=app_env(tree),
                             stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as err:
        raise exception.UpgradeError(
            '%s cannot run: %s' % (path, err)) from err
    found = re.search(r'SPDK v(\d+)\.(\d+)(?:\.(\d+))?', out)
    if not found:
        raise exception.UpgradeError(
            '%s --version said %r, not an SPDK release'
            % (path, out.strip()[:200]))
    return tuple(int(g or 0) for g in found.groups())


def app_env(tree):
    env = dict(os.environ)
    env['LD_LIBRARY_PATH'] = os.path.join(tree, 'build', 'lib')
    return env


def socket_owner(path):
    """PID of the process listening on Unix socket ``path``, or None."""
    inodes = set()
    with open('/proc/net/unix') as table:
        next(table)
        for line in table:
            fields = line.split()
            if len(fields) >= 8 and fields[7] == path:
                inodes.add(fields[6])
    links = {'socket:[%s]' % i for i in inodes}
    for pid in filter(str.isdigit, os.listdir('/proc')):
        fd_dir = '/proc/%s/fd' % pid
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(os.path.join(fd_dir, fd)) in links:
                    return int(pid)
            except OSError:
                continue
    return None


class Target(object):
    """The running target: its command line, and how to replace it."""

    def __init__(self, pid, saved, log_path):
        self.pid = pid
        with open('/proc/%d/cmdline' % pid, 'rb') as src:
            argv = [a.decode() for a in src.read().split(b'\0') if a]
        self.binary = os.path.realpath('/proc/%d/exe' % pid)
        self.app = os.path.basename(self.binary)
        self.tree = os.path.dirname(os.path.dirname(os.path.dirname(
            self.binary)))
        self.args = _with_json(argv[1:], saved)
        self.log_path = log_path
        self.process = None

    def stop(self, timeout):
        """SIGTERM the target, SIGKILL after ``timeout``; wait it out."""
        pid = self.process.pid if self.process else self.pid
        _signal(pid, signal.SIGTERM)
        if not _wait_gone(pid, timeout, self.process):
            _signal(pid, signal.SIGKILL)
            _wait_gone(pid, reconnect.KILL_WAIT, self.process)

    def start(self, tree):
        """Start ``tree``'s application with the target's arguments."""
        binary = os.path.join(tree, 'build', 'bin', self.app)
        with open(self.log_path, 'ab') as log:
            log.write(('--- spdk-vhost-upgrade: %s %s\n' % (
                binary, ' '.join(self.args))).encode())
            log.flush()
            self.process = subprocess.Popen(
                [binary] + self.args, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, env=app_env(tree),
                start_new_session=True, close_fds=True)
        return self.process.pid

    def finish(self, tree):
        """Nothing to keep: the next start is again the command's."""


class UnitTarget(Target):
    """A target its systemd unit runs, replaced through the unit.

    See :mod:`systemd_unit`. The unit must load ``saved`` (``--json``),
    the file the command saves the config to.
    """

    def __init__(self, pid, saved, unit):
        super().__init__(pid, saved, 'journalctl -u %s' % unit.name)
        with open('/proc/%d/cmdline' % pid, 'rb') as src:
            argv = [a.decode() for a in src.read().split(b'\0') if a]
        loads = [b for a, b in zip(argv, argv[1:])
                 if a in ('--json', '-c', '--config')]
        if loads != [saved]:
            raise exception.UpgradeError(
                'unit %s starts the target with --json %s, not the '
                '--saved-config %s; nothing was stopped'
                % (unit.name, ' '.join(loads) or '(none)', saved))
        self.unit = unit
        self._stop_set = False

    def stop(self, timeout):
        """``systemctl stop``, without the unit's own ExecStop save."""
        if not self._stop_set:
            self.unit.set()
            self._stop_set = True
        self.unit.systemctl('stop', self.unit.name)

    def start(self, tree):
        """``systemctl start`` with SPDK_DIR set to ``tree``."""
        self.unit.set(tree)
        self.process = systemd_unit.UnitProcess(self.unit)
        self.unit.systemctl('start', self.unit.name)
        return self.process.pid

    def finish(self, tree):
        """Keep ``tree`` for the unit's next starts, or drop the drop-in."""
        if tree == self.tree:
            self.unit.remove()
        else:
            self.unit.set(tree, own_stop=True)


def _with_json(args, saved):
    """``args`` loading ``saved`` with --json (replacing any other)."""
    out = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in ('--json', '-c', '--config'):
            skip = True
            continue
        out.append(arg)
    return out + ['--json', saved]


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _gone(pid, process):
    if process is not None:
        return process.poll() is not None
    try:
        with open('/proc/%d/stat' % pid) as src:
            return src.read().rsplit(')', 1)[1].split()[0] == 'Z'
    except OSError:
        return True


def _wait_gone(pid, timeout, process=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _gone(pid, process):
            return True
        time.sleep(0.05)
    return _gone(pid, process)
