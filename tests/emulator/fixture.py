"""A fixture running one SPDK target emulator subprocess for a test.

When ``SPDK_RPC_SOCKET`` is set the fixture uses that real target instead
(and ``SPDK_VHOST_DIR`` for its vhost socket directory), so the same tests
run against a real ``spdk_tgt``.
"""

import os
import signal
import subprocess
import sys
import time

import fixtures

from tests import rpc_raw

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


class EmulatorFixture(fixtures.Fixture):
    """Start an emulator in a temp dir; stop it and clean everything up."""

    def __init__(self, core_mask='0x3', reactor_numa=None,
                 use_real=True, start_timeout=30):
        super().__init__()
        self.core_mask = core_mask
        self.reactor_numa = reactor_numa
        self.use_real = use_real
        self.start_timeout = start_timeout
        self.process = None

    @property
    def is_real(self):
        return bool(self.use_real and os.environ.get('SPDK_RPC_SOCKET'))

    def _setUp(self):
        if self.is_real:
            self.socket_path = os.environ['SPDK_RPC_SOCKET']
            self.vhost_dir = os.environ.get('SPDK_VHOST_DIR', '/var/tmp')
            self.state_dir = None
            return
        base = self.useFixture(fixtures.TempDir()).path
        self.socket_path = os.path.join(base, 'spdk.sock')
        self.vhost_dir = os.path.join(base, 'vhost')
        self.state_dir = os.path.join(base, 'state')
        self.log_path = os.path.join(base, 'emulator.log')
        cmd = [sys.executable, '-m', 'tests.emulator',
               '--socket', self.socket_path, '--vhost-dir', self.vhost_dir,
               '--state-dir', self.state_dir, '--core-mask', self.core_mask]
        if self.reactor_numa is not None:
            cmd += ['--reactor-numa',
                    ','.join(str(n) for n in self.reactor_numa)]
        log = open(self.log_path, 'wb')
        self.addCleanup(log.close)
        self.process = subprocess.Popen(cmd, cwd=REPO, stdout=log,
                                        stderr=subprocess.STDOUT,
                                        start_new_session=True)
        self.addCleanup(self._stop)
        self._wait_ready()

    def _wait_ready(self):
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError('emulator exited: %s' % self.log())
            if os.path.exists(self.socket_path):
                try:
                    self.call('spdk_get_version')
                    return
                except OSError:
                    pass
            time.sleep(0.05)
        raise RuntimeError('emulator did not start: %s' % self.log())

    def log(self):
        with open(self.log_path, errors='replace') as src:
            return src.read()[-4000:]

    def _stop(self):
        """SIGTERM (clean stop), then SIGKILL the whole process group."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def call(self, method, params=None):
        """The full JSON-RPC response dict."""
        return rpc_raw.call(self.socket_path, method, params)
