"""One OpenStack service process with its log file, as a fixture."""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

import fixtures

from testbed import process_group

# The real temporary directory, read before any test changes it.
_TMP_ROOT = tempfile.gettempdir()
REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def console_script(name):
    """A console script of this Python's environment (else on PATH)."""
    path = os.path.join(os.path.dirname(sys.executable), name)
    if os.access(path, os.X_OK):
        return path
    found = shutil.which(name)
    if found is None:
        raise RuntimeError('%s is not installed next to %s nor on PATH'
                           % (name, sys.executable))
    return found


def service_env(extra=None):
    """The environment of a service: it must import this repository."""
    env = dict(os.environ, **(extra or {}))
    env['PYTHONPATH'] = os.pathsep.join(
        p for p in (REPO, env.get('PYTHONPATH')) if p)
    return env


def tail(path, limit=6000):
    """The last ``limit`` characters of a log (all of it for None)."""
    try:
        with open(path, errors='replace') as src:
            text = src.read()
    except FileNotFoundError:
        return '(no log %s)' % path
    return text if limit is None else text[-limit:]


class ServiceProcess(fixtures.Fixture):
    """Run ``argv`` in its own session, output to ``log_path``.

    Cleanup sends SIGTERM (services stop their workers on it), then
    SIGKILLs the whole process group so no worker outlives the test.
    """

    def __init__(self, name, argv, log_path, stop_timeout=20, env=None):
        super().__init__()
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.stop_timeout = stop_timeout
        self.env = env

    def _setUp(self):
        self.start()
        self.addCleanup(self._stop)

    def start(self):
        """Start the service (again, after :meth:`kill`)."""
        with open(self.log_path, 'ab') as log:
            self.process = subprocess.Popen(
                self.argv, cwd=REPO, env=service_env(self.env), stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)

    def kill(self):
        """SIGKILL the service and its workers, as its host's death does."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def running(self):
        return self.process.poll() is None

    def log(self, limit=6000):
        return tail(self.log_path, limit)

    def listening(self, port, host='127.0.0.1'):
        """True once ``port`` accepts connections; raises if we died."""
        if not self.running():
            raise RuntimeError('%s exited:\n%s' % (self.name, self.log()))
        try:
            with socket.create_connection((host, port), 1):
                return True
        except OSError:
            return False

    def _stop(self):
        process_group.stop(self.process, self.stop_timeout)


@contextlib.contextmanager
def process_tempdir():
    """Temporary files made meanwhile outlive the test that makes them.

    oslotest points tempfile at a per-test directory, private to root and
    removed when the test ends; the shared services outlive that test,
    and QEMU (libvirt-qemu) reads some of their files.
    """
    per_test, tempfile.tempdir = tempfile.tempdir, _TMP_ROOT
    try:
        yield
    finally:
        tempfile.tempdir = per_test


def privsep(conf_path, context):
    """A privsep section starting its daemon directly, not through sudo.

    Services run as root here, like the tests; a deployment starts the
    daemon through rootwrap instead.
    """
    return {'helper_command': ' '.join([
        os.path.join(os.path.dirname(sys.executable), 'privsep-helper'),
        '--config-file', conf_path, '--privsep_context', context])}


def wsgi_argv(module, port, preload=(), host='127.0.0.1'):
    """The command serving ``module``'s WSGI application at ``host:port``."""
    argv = [sys.executable, '-m', 'tests.deployment.wsgi_server',
            '--app', module, '--host', host, '--port', str(port)]
    for name in preload:
        argv += ['--preload', name]
    return argv


def run_once(argv, log_path, timeout, env=None):
    """Run a one-shot command (db sync); fail with its log."""
    with open(log_path, 'ab') as log:
        result = subprocess.run(argv, cwd=REPO, env=service_env(env),
                                stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, timeout=timeout)
    if result.returncode:
        raise RuntimeError('%s failed (%d):\n%s' % (
            ' '.join(argv), result.returncode, tail(log_path)))
