"""Stopping the processes tests start, and adopting those a command left.

The processes: SPDK targets, services, and what an upgrade command
started in a target's place.
"""

import contextlib
import ctypes
import os
import signal
import subprocess
import time


def stop(process, timeout):
    """SIGTERM (a clean stop), then SIGKILL the process's whole group.

    The process must lead its own group (``start_new_session=True``), so
    what it started (workers, child processes) goes with it.
    """
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


_PR_SET_CHILD_SUBREAPER = 36


def _subreaper(on):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, 'prctl(PR_SET_CHILD_SUBREAPER): %s'
                      % os.strerror(err))


@contextlib.contextmanager
def adopting_orphans():
    """Processes orphaned meanwhile become this process's children.

    A command that starts a long-lived process and exits (the upgrade
    command and the target it starts) leaves it to the nearest
    subreaper: this process, while inside. Only for that while: libvirtd
    daemonizes each QEMU, and would take one that exited for one still
    running if its exit waited for this process to reap it.
    """
    _subreaper(True)
    try:
        yield
    finally:
        _subreaper(False)


def children():
    """Pids of this process's children (those adopted included)."""
    me, found = os.getpid(), set()
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open('/proc/%s/stat' % pid) as src:
                # After the command's name, which may hold anything.
                fields = src.read().rsplit(')', 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[1]) == me:
            found.add(int(pid))
    return found


class Orphan(object):
    """A child this process adopted, as a ``subprocess.Popen`` to stop.

    What :func:`stop` and a target's crash check use of one: its exit
    status, as the kernel reports it to its parent.
    """

    def __init__(self, pid):
        self.pid = pid
        with open('/proc/%d/cmdline' % pid, 'rb') as src:
            self.args = [arg.decode() for arg in src.read().split(b'\0')
                         if arg]
        self.returncode = None

    def poll(self):
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout):
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.05)
        return self.returncode

    def send_signal(self, sig):
        if self.poll() is None:
            os.kill(self.pid, sig)
