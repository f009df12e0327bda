"""The emulator's qemu-storage-daemon process: start, talk to, stop.

One daemon serves every vhost-user-blk and NBD export of an emulated SPDK
target.  It must die with the emulator (a dead SPDK target takes its vhost
sockets with it), so the child asks the kernel for SIGKILL when its parent
dies (PR_SET_PDEATHSIG).  That signal follows the *thread* that forked, so
the daemon is forked from a thread that lives exactly as long as the daemon,
never from a short-lived RPC handler thread.
"""

import ctypes
import errno
import os
import signal
import subprocess
import threading
import time

from tests.emulator import images
from tests.emulator import qmp

QSD = os.environ.get('QEMU_STORAGE_DAEMON', 'qemu-storage-daemon')
PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid):
    def preexec():
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:
            # The parent died before prctl took effect.
            os.kill(os.getpid(), signal.SIGKILL)
    return preexec


def _socket_inodes(pid):
    inodes = set()
    fd_dir = '/proc/%d/fd' % pid
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue  # closed since listdir
        if target.startswith('socket:['):
            inodes.add(int(target[8:-1]))
    return inodes


class StorageDaemon(object):
    """A running qemu-storage-daemon with a QMP client connected to it."""

    def __init__(self, work_dir, start_timeout=20.0):
        self.qmp_path = os.path.join(work_dir, 'qsd-qmp.sock')
        self.log_path = os.path.join(work_dir, 'qsd.log')
        self.proc = None
        self.client = None
        os.makedirs(work_dir, exist_ok=True)
        self._spawn()
        try:
            self.client = self._connect(start_timeout)
        except BaseException:
            self.stop()
            raise

    def _spawn(self):
        chardev = 'socket,id=qmp0,server=on,wait=off,path=%s' % (
            self.qmp_path.replace(',', ',,'))
        args = [QSD, '--chardev', chardev, '--monitor', 'chardev=qmp0']
        started = threading.Event()
        outcome = {}

        def parent_thread():
            try:
                with open(self.log_path, 'ab') as log:
                    outcome['proc'] = subprocess.Popen(
                        args, stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL, stderr=log,
                        preexec_fn=_die_with_parent(os.getpid()))
            except OSError as err:
                outcome['error'] = err
                return
            finally:
                started.set()
            outcome['proc'].wait()

        threading.Thread(target=parent_thread, name='qsd-parent',
                         daemon=True).start()
        started.wait()
        if 'error' in outcome:
            err = outcome['error']
            raise images.DataPlaneError(
                err.errno, 'cannot start %s: %s' % (QSD, err)) from err
        self.proc = outcome['proc']

    def _connect(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise images.DataPlaneError(
                    errno.EIO, 'qemu-storage-daemon exited with %s: %s'
                    % (self.proc.returncode, self.log_tail()))
            try:
                return qmp.QMPClient(self.qmp_path)
            except (FileNotFoundError, ConnectionRefusedError):
                if time.monotonic() > deadline:
                    raise images.DataPlaneError(
                        errno.ETIMEDOUT, 'no QMP monitor at %s: %s'
                        % (self.qmp_path, self.log_tail())) from None
                time.sleep(0.05)

    def log_tail(self, size=2000):
        try:
            with open(self.log_path, 'rb') as log:
                log.seek(0, os.SEEK_END)
                log.seek(max(0, log.tell() - size))
                return log.read().decode(errors='replace').strip()
        except OSError as err:
            return '(no log: %s)' % err

    def accepted_connections(self, socket_path):
        """Connections to socket_path that the daemon has accepted.

        /proc/net/unix lists every unix socket; the server-side end of an
        accepted connection carries the listener's path and is connected
        (state 03).  Connections still waiting in the backlog look the same,
        so only sockets the daemon holds an fd for are counted.
        """
        inodes = _socket_inodes(self.proc.pid)
        count = 0
        with open('/proc/net/unix') as table:
            next(table)
            for line in table:
                fields = line.split()
                if (len(fields) >= 8 and fields[7] == socket_path and
                        fields[5] == '03' and int(fields[6]) in inodes):
                    count += 1
        return count

    def stop(self, timeout=10.0):
        """Quit the daemon (kill it if it won't) and remove its socket."""
        if self.client is not None:
            try:
                self.client.execute('quit')
            except qmp.QMPError:
                pass  # already going away; the wait below decides
            self.client.close()
            self.client = None
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if os.path.exists(self.qmp_path):
            os.unlink(self.qmp_path)
