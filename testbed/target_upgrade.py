"""``spdk-vhost-upgrade`` run on a target's own host, as an operator does.

The command runs inside the target's host (its network and mount
namespaces, so it reads that host's saved config and record of connected
hosts, and the target it starts listens on that host's address), with
``--pid`` of the target a :class:`~testbed.spdk_target.SpdkTarget`
fixture started. The fixture then adopts the target the command left
running: stopping, killing and restarting it, and a crash of it, work as
before.
"""

import os
import subprocess
import sys

from testbed import process_group
from testbed import spdk_build


class UpgradeFailed(AssertionError):
    """The command failed: its output says why."""


def upgrade(target, saved_config, tree=None, timeout=180):
    """Replace ``target`` by its host's ``spdk-vhost-upgrade``; its lines.

    ``saved_config``: the saved config on the target's host, as the host
    sees it (``spdk_saved_config`` of whoever saves it there); ``tree``:
    the SPDK tree to upgrade to, the target's own by default.
    """
    tree = tree or target.tree or spdk_build.spdk_dir()
    script = os.path.join(os.path.dirname(sys.executable),
                          'spdk-vhost-upgrade')
    cmd = ['prlimit', '--core=unlimited', '--', script,
           '--new-spdk-dir', tree,
           '--rpc-socket', target.seen(target.socket_path),
           '--saved-config', saved_config,
           '--pid', str(target.pid),
           '--log', target.seen(target.log_path)]
    before = process_group.children()
    with process_group.adopting_orphans():
        done = subprocess.run(
            target.host.argv(cmd, cwd=target.seen(target.workdir)),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            timeout=timeout)
    # The target the command started (or, rolled back, started again).
    started = [pid for pid in process_group.children() - before
               if _runs(pid, target.app)]
    if len(started) == 1:
        target.replaced_by(process_group.Orphan(started[0]), tree)
    if done.returncode or len(started) != 1:
        raise UpgradeFailed(
            'spdk-vhost-upgrade exited with %d, leaving %s %s:\n%s'
            % (done.returncode, target.app, started, done.stdout))
    return done.stdout.splitlines()


def _runs(pid, app):
    try:
        return os.path.basename(os.readlink('/proc/%d/exe' % pid)) == app
    except OSError:
        return False
