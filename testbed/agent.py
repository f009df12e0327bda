"""A storage node's ``spdk-vhost-agent`` in front of a test target.

The agent runs as its unit runs it (``spdk-vhost-agent --config-file``),
on the target's host when the target has one (:mod:`testbed.hosts`),
with a certificate from the test cloud's :class:`testbed.tls.Authority`.
Its saved config, key files and log are in the target's work directory
(on that host), where nothing on another host can read them.
"""

import contextlib
import os
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import time

import fixtures

from testbed import net
from testbed import process_group

USER = 'cinder'


class AgentError(RuntimeError):
    pass


class Agent(fixtures.Fixture):
    """The agent of ``target`` (a :class:`spdk_target.SpdkTarget`)."""

    def __init__(self, target, authority, start_timeout=30):
        super().__init__()
        self.target = target
        self.authority = authority
        self.start_timeout = start_timeout
        self.password = secrets.token_urlsafe(24)
        self.process = None

    @property
    def address(self):
        host = self.target.host
        return host.address if host is not None else '127.0.0.1'

    @property
    def url(self):
        return 'https://%s:%d' % (self.address, self.port)

    def _setUp(self):
        target = self.target
        self.port = net.free_port(self.address) if target.host is None \
            else 5261
        # Where it saves the target's config: as this host sees it, and
        # as the node does.
        self.saved_config_file = os.path.join(target.workdir,
                                              'agent-saved.json')
        self.saved_config = self._seen('agent-saved.json')
        self.key_dir = self._seen('agent-keys')
        cert, key = self.authority.issue(
            'agent-%s' % target.name, [self.address], target.workdir)
        self.conf_path = os.path.join(target.workdir, 'agent.conf')
        with open(self.conf_path, 'w') as out:
            os.fchmod(out.fileno(), 0o600)
            out.write(self._conf(self._seen(os.path.basename(cert)),
                                 self._seen(os.path.basename(key))))
        self.log_path = os.path.join(target.workdir, 'agent.log')
        self.addCleanup(self._stop)
        self.start()

    def _seen(self, name):
        """A file of the target's directory, as the agent sees it."""
        return self.target.seen(os.path.join(self.target.workdir, name))

    def _conf(self, cert, key):
        return '\n'.join([
            '[DEFAULT]', 'debug = true',
            'log_file = %s' % self._seen('agent.log'),
            '[agent]',
            'listen_address = %s' % self.address,
            'listen_port = %d' % self.port,
            'cert_file = %s' % cert, 'key_file = %s' % key,
            'user = %s' % USER, 'password = %s' % self.password,
            'spdk_rpc_socket = %s' % self._seen('spdk.sock'),
            'saved_config = %s' % self.saved_config,
            'key_dir = %s' % self.key_dir, ''])

    def start(self):
        argv = [sys.executable, '-m', 'spdk_vhost_agent.cmd',
                '--config-file', self._seen('agent.conf')]
        if self.target.host is not None:
            argv = self.target.host.argv(argv)
        self.process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True,
            env=dict(os.environ, PYTHONPATH=_repo()))
        self._wait_ready()

    def stop(self):
        self._stop()

    def kill(self):
        """SIGKILL the agent, as a crash (or its host's death) ends it."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    @contextlib.contextmanager
    def paused(self):
        """The agent stopped (SIGSTOP) meanwhile: calls to it hang.

        Connections queue in the kernel and are served once it goes on,
        as with a node that stalls; the caller's timeout decides.
        """
        os.killpg(self.process.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            if self.process.poll() is None:  # not killed meanwhile
                os.killpg(self.process.pid, signal.SIGCONT)

    def unread(self):
        """How many connections to it hold a request it has not read.

        Calls in flight while it is paused: the kernel's count of each
        connection's unread bytes (``ss``), seen from the agent's host.
        """
        argv = ['ss', '-tnH', 'state', 'established',
                '( sport = :%d )' % self.port]
        if self.target.host is not None:
            argv = self.target.host.argv(argv)
        listed = subprocess.run(argv, check=True, capture_output=True,
                                text=True).stdout
        return sum(1 for line in listed.splitlines()
                   if int(line.split()[0]) > 0)

    def _stop(self):
        if self.process is not None:
            process_group.stop(self.process, 10)

    def _wait_ready(self):
        """Until the agent completes a TLS handshake (any answer will do)."""
        context = ssl.create_default_context(
            cafile=self.authority.ca_file)
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self.process.poll() is not None:
                raise AgentError('spdk-vhost-agent exited with %s: %s'
                                 % (self.process.returncode, self.log()))
            try:
                with socket.create_connection((self.address, self.port),
                                              1) as sock:
                    context.wrap_socket(sock, server_hostname=self.address
                                        ).close()
                return
            except OSError:
                if time.monotonic() >= deadline:
                    raise AgentError('spdk-vhost-agent did not answer in '
                                     '%ss: %s' % (self.start_timeout,
                                                  self.log()))
            time.sleep(0.05)

    def log(self, tail=4000):
        try:
            with open(self.log_path, errors='replace') as src:
                return src.read()[-tail:]
        except FileNotFoundError:
            return '(no log)'

    def section(self):
        """The cinder.conf options that reach the target through us."""
        return {'spdk_agent_url': self.url, 'spdk_agent_user': USER,
                'spdk_agent_password': self.password,
                'spdk_agent_ca_file': self.authority.ca_file,
                'spdk_saved_config': ''}


def _repo():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
