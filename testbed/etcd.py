"""A real etcd as a test fixture: the lock service of a cinder-volume cluster.

An active-active cinder-volume cluster serialises its driver's work through
``cinder.coordination`` (tooz); in a cloud its ``[coordination]
backend_url`` is ``etcd3+http://HOST:2379?api_version=v3``, tooz's etcd3gw
driver speaking to etcd's v3 gRPC gateway. The tests run that same etcd
(Debian 12's ``etcd-server``, etcd 3.4) as a one-member cluster in a temp
dir: :attr:`Etcd.url` is what the cinder-volume processes are given.

With ``host`` (an object with ``argv(cmd)`` and ``address``, as a
network-namespace host of ``testbed.hosts``) etcd runs inside that host
and listens on its address, as on a controller of its own.
"""

import os
import platform
import shutil
import subprocess
import time
import urllib.error
import urllib.request

import fixtures

from testbed import net
from testbed import process_group

#: Where Debian's etcd-server installs the server.
DEBIAN_ETCD = '/usr/bin/etcd'
#: etcd 3.4 refuses to start on an architecture it does not support
#: (anything but amd64 and ppc64le) unless this names Go's name for it.
GOARCH = {'x86_64': 'amd64', 'aarch64': 'arm64', 'armv7l': 'arm',
          'i686': '386'}


class EtcdError(RuntimeError):
    pass


def binary():
    """The etcd server: Debian's, else the first on PATH."""
    if os.access(DEBIAN_ETCD, os.X_OK):
        return DEBIAN_ETCD
    found = shutil.which('etcd')
    if found is None:
        raise EtcdError('no etcd server: install etcd-server (bindep.txt)')
    return found


class Etcd(fixtures.Fixture):
    """One etcd member, its data in a temp dir; stopped at cleanUp.

    On loopback the client and peer ports are free ones (tests run in
    parallel workers); inside a ``host`` its own network namespace has
    etcd's usual 2379 and 2380 to itself.
    """

    def __init__(self, host=None, start_timeout=30, name='etcd'):
        super().__init__()
        self.host = host
        self.start_timeout = start_timeout
        self.name = name
        self.process = None

    def _setUp(self):
        self.workdir = self.useFixture(fixtures.TempDir()).path
        self.log_path = os.path.join(self.workdir, 'etcd.log')
        if self.host is None:
            self.address = '127.0.0.1'
            self.port, self.peer_port = net.free_port(), net.free_port()
        else:
            self.address, self.port, self.peer_port = (self.host.address,
                                                       2379, 2380)
        self.client_url = 'http://%s:%d' % (self.address, self.port)
        #: ``[coordination] backend_url`` for this etcd.
        self.url = 'etcd3+%s?api_version=v3' % self.client_url
        self.addCleanup(self._stop)
        self._start()

    def command(self):
        peer_url = 'http://%s:%d' % (self.address, self.peer_port)
        cmd = [binary(), '--name', self.name,
               '--data-dir', os.path.join(self.workdir, 'data'),
               '--listen-client-urls', self.client_url,
               '--advertise-client-urls', self.client_url,
               '--listen-peer-urls', peer_url,
               '--initial-advertise-peer-urls', peer_url,
               '--initial-cluster', '%s=%s' % (self.name, peer_url),
               '--initial-cluster-state', 'new',
               '--logger', 'zap', '--log-outputs', 'stderr']
        return self.host.argv(cmd) if self.host is not None else cmd

    def _start(self):
        env = dict(os.environ)
        machine = platform.machine()
        env.setdefault('ETCD_UNSUPPORTED_ARCH', GOARCH.get(machine, machine))
        with open(self.log_path, 'ab') as log:
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        self._wait_healthy()

    def _wait_healthy(self):
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise EtcdError('etcd exited with %s: %s'
                                % (self.process.returncode, self.log()))
            if self.healthy():
                return
            time.sleep(0.05)
        raise EtcdError('etcd did not answer within %ss: %s'
                        % (self.start_timeout, self.log()))

    def healthy(self):
        """Whether etcd answers ``/health`` with a leader elected."""
        try:
            with urllib.request.urlopen(self.client_url + '/health',
                                        timeout=2) as reply:
                return b'"true"' in reply.read()
        except (OSError, urllib.error.URLError):
            return False

    def requests(self, method):
        """How many ``method`` requests etcd has started (``'Txn'``...).

        Read from its ``/metrics``: what its clients really asked of it.
        """
        prefix = 'grpc_server_started_total{grpc_method="%s",' % method
        with urllib.request.urlopen(self.client_url + '/metrics',
                                    timeout=10) as reply:
            lines = reply.read().decode().splitlines()
        return sum(int(float(line.rsplit(' ', 1)[1])) for line in lines
                   if line.startswith(prefix))

    def _stop(self):
        process_group.stop(self.process, 20)

    @property
    def pid(self):
        return self.process.pid

    def log(self):
        with open(self.log_path, errors='replace') as src:
            return src.read()[-4000:]
