"""Stopping the helper processes tests start (SPDK targets, services)."""

import os
import signal
import subprocess


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
