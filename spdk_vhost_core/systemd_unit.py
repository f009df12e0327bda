"""Upgrade a target that a systemd unit runs (``--systemd-unit``).

The project's units (``etc/systemd``) start ``${SPDK_DIR}/build/bin/<app>``
with ``--json`` the saved config, and their ExecStop saves the config
under the lock the upgrade command holds from its own save to the end.
So the command changes the unit with a drop-in,
``<unit>.d/spdk-vhost-upgrade.conf``: ``SPDK_DIR`` the tree to run,
ExecStop cleared (the command saved the config already, and a failed
target's config must not replace it), the stop and the start bounded by
``--timeout`` (TimeoutStopSec, TimeoutStartSec: the upgrade window stays
what :mod:`reconnect` says), then ``systemctl daemon-reload`` and
``stop``/``start``. Once the new target lists every
object the drop-in keeps only ``SPDK_DIR`` (the unit's ExecStop is back
and the next restart runs the new tree too); after a rollback it is
removed.
"""

import os
import subprocess
import tempfile

from spdk_vhost_core import exception

DROP_IN = 'spdk-vhost-upgrade.conf'
UNIT_DIR = '/etc/systemd/system'


class UnitError(exception.UpgradeError):
    """systemctl failed, or the unit does not run what was expected."""


class UnitProcess(object):
    """The unit's main process, as much of a Popen as the command uses."""

    def __init__(self, unit):
        self.unit = unit
        self.returncode = None

    @property
    def pid(self):
        return int(self.unit.systemctl('show', '-p', 'MainPID', '--value',
                                       self.unit.name) or 0)

    def poll(self):
        """None while the unit runs (or starts), else 1."""
        state = self.unit.systemctl('is-active', self.unit.name,
                                    check=False)
        self.returncode = None if state in ('active', 'activating') else 1
        return self.returncode


class Unit(object):
    """``systemctl`` on one unit, and the command's drop-in for it."""

    def __init__(self, name, unit_dir=UNIT_DIR, timeout=10):
        self.name = name
        self.drop_in = os.path.join(unit_dir, name + '.d', DROP_IN)
        self.timeout = timeout

    def systemctl(self, *args, check=True):
        """Run ``systemctl args``; its output, stripped."""
        try:
            done = subprocess.run(
                ('systemctl',) + args, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True,
                timeout=self.timeout + 120)
        except (OSError, subprocess.SubprocessError) as err:
            raise UnitError('systemctl %s: %s' % (' '.join(args), err))
        if check and done.returncode != 0:
            raise UnitError('systemctl %s failed (%d): %s' % (
                ' '.join(args), done.returncode, done.stdout.strip()[-300:]))
        return done.stdout.strip()

    def set(self, tree=None, own_stop=False):
        """Write the drop-in (``tree``: SPDK_DIR) and reload systemd.

        ``own_stop`` keeps the unit's ExecStop and stop timeout.
        """
        lines = ['# Written by spdk-vhost-upgrade.', '[Service]']
        if tree:
            lines.append('Environment=SPDK_DIR=%s' % tree)
        if not own_stop:
            seconds = max(1, int(self.timeout))
            lines += ['ExecStop=', 'TimeoutStopSec=%d' % seconds,
                      'TimeoutStartSec=%d' % seconds]
        directory = os.path.dirname(self.drop_in)
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix='.' + DROP_IN)
        with os.fdopen(fd, 'w') as out:
            os.fchmod(out.fileno(), 0o644)
            out.write('\n'.join(lines) + '\n')
        os.replace(tmp, self.drop_in)
        self.systemctl('daemon-reload')

    def remove(self):
        """Remove the drop-in: the unit runs as its own file says."""
        try:
            os.unlink(self.drop_in)
        except FileNotFoundError:
            pass
        self.systemctl('daemon-reload')
