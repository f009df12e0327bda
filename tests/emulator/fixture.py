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

from testbed import process_group
from testbed import rpc_raw

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


class EmulatorFixture(fixtures.Fixture):
    """Start an emulator in a temp dir; stop it and clean everything up."""

    def __init__(self, core_mask='0x3', reactor_numa=None,
                 use_real=True, start_timeout=30, json_config=None):
        super().__init__()
        self.core_mask = core_mask
        self.reactor_numa = reactor_numa
        self.use_real = use_real
        self.start_timeout = start_timeout
        # A saved config (spdk_tgt --json) loaded at every start.
        self.json_config = json_config
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
        self.addCleanup(self._stop)
        self.start()

    def command(self):
        cmd = [sys.executable, '-m', 'tests.emulator',
               '--socket', self.socket_path, '--vhost-dir', self.vhost_dir,
               '--state-dir', self.state_dir, '--core-mask', self.core_mask]
        if self.reactor_numa is not None:
            cmd += ['--reactor-numa',
                    ','.join(str(n) for n in self.reactor_numa)]
        if self.json_config and os.path.exists(self.json_config):
            cmd += ['--json', self.json_config]
        return cmd

    def start(self):
        """Start the emulator process on this fixture's paths; wait for it.

        The log is appended to, so it tells the whole story of a test
        that restarts the target.
        """
        with open(self.log_path, 'ab') as log:
            self.process = subprocess.Popen(
                self.command(), cwd=REPO, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_ready()

    def stop(self):
        """Stop cleanly (SIGTERM), as a service manager does."""
        self._stop()
        self._forget_socket()

    def kill(self):
        """SIGKILL the target process alone, as a crash ends it.

        Its qemu-storage-daemon dies with it (PR_SET_PDEATHSIG); the
        sockets it leaves behind stay, as a crashed spdk_tgt's do.
        """
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        self._forget_socket()

    def restart(self, crash=True):
        """SIGKILL (or stop) the target, then start it on the same paths."""
        if crash:
            self.kill()
        else:
            self.stop()
        self.start()

    def _forget_socket(self):
        # A stale RPC socket must not make _wait_ready talk to nobody.
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)

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
        process_group.stop(self.process, 20)

    def call(self, method, params=None):
        """The full JSON-RPC response dict."""
        return rpc_raw.call(self.socket_path, method, params)
