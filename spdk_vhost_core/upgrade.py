"""spdk-vhost-upgrade: replace a running SPDK target by another build.

Compute targets (``vhost``, ``spdk_tgt``) and storage targets
(``nvmf_tgt``) alike, with guests running::

    spdk-vhost-upgrade --new-spdk-dir /opt/spdk-v26.05 \\
        [--rpc-socket /var/tmp/spdk.sock] \\
        [--saved-config /var/lib/spdk/spdk_tgt.json] [--pid PID] [--force]

In order, stopping at the first failure:

1. the new build's application (the running one's name, from
   ``--new-spdk-dir``) must report a supported SPDK release
   (:mod:`spdk_version`), not older than the running one (an older SPDK
   cannot load a newer one's saved config); nothing has stopped yet;
2. under the lock the drivers save the config with
   (:func:`saved_config.file_lock`, held to the end so that no driver
   changes the target meanwhile), a storage target refuses, without
   ``--force``, when a connected NVMe-oF host's reconnect settings, as
   Cinder recorded them (:mod:`host_settings`), are unknown or would not
   ride out :func:`reconnect.window` (60 s with the default
   ``--timeout``); the refusal names each such host. Hosts mirroring a
   replicated volume's copy are not refused, but counted: their mirrors
   degrade for the upgrade and need a rebuild after it;
3. the live config is saved to ``--saved-config`` and its objects are
   listed (:mod:`target_inventory`);
4. the running target gets SIGTERM (SIGKILL after ``--timeout``);
5. the new binary starts with the same arguments, ``--json`` the saved
   config, on the same sockets; QEMU and the NVMe-oF hosts reconnect;
6. it must answer and list every object of step 3 within ``--timeout``.

If 5 or 6 fails, the new process is stopped and the previous binary
started again the same way (rollback), and the command exits 1 saying
what failed; 2 if the rollback failed too. The target runs detached, its
output appended to ``--log``; with ``--systemd-unit`` the unit runs it
instead, through a drop-in that sets its ``SPDK_DIR`` (see
:mod:`systemd_unit`).
"""

import argparse
import sys
import time

from spdk_vhost_core import exception as exc
from spdk_vhost_core import host_settings
from spdk_vhost_core import reconnect
from spdk_vhost_core import saved_config
from spdk_vhost_core import spdk_rpc
from spdk_vhost_core import spdk_version
from spdk_vhost_core import systemd_unit
from spdk_vhost_core import target_inventory
from spdk_vhost_core import target_process

STORAGE_APPS = ('nvmf_tgt', 'spdk_tgt')


class Upgrade(object):
    """One upgrade of the target on ``rpc_socket``; see the module doc."""

    def __init__(self, rpc_socket, saved, new_tree, pid=None,
                 timeout=reconnect.UPGRADE_TIMEOUT, force=False,
                 log_path=None, say=print, unit=None):
        self.rpc_socket = rpc_socket
        self.saved = saved
        self.new_tree = new_tree
        self.timeout = timeout
        self.force = force
        self.say = say
        pid = pid or target_process.socket_owner(rpc_socket)
        if not pid:
            raise exc.UpgradeError('no process listens on %s' % rpc_socket)
        if unit is not None:
            self.target = target_process.UnitTarget(pid, saved, unit)
        else:
            self.target = target_process.Target(
                pid, saved, log_path or saved + '.log')
        self.client = spdk_rpc.SpdkClient(rpc_socket, timeout=10.0,
                                          connect_retries=0)
        self.stall = None

    def run(self):
        answer = self.client.spdk_get_version()
        old = spdk_version.describe(answer)
        new = target_process.binary_version(self.target.app, self.new_tree)
        if not spdk_version.is_supported(new):
            raise exc.UpgradeError(
                '%s of %s is SPDK v%s, not a supported release (%s); '
                'nothing was stopped' % (
                    self.target.app, self.new_tree, spdk_version.label(new),
                    spdk_version.supported_text()))
        running = spdk_version.parse(answer)
        if running is not None and new[:2] < running[:2]:
            # Found with v26.05 -> v26.01: the older target exits at
            # start on the newer saved config (its bdev_nvme_set_options
            # has parameters the older one does not decode).
            raise exc.UpgradeError(
                'SPDK v%s is older than the running %s: an older SPDK '
                'cannot load a newer one\'s saved config, so a downgrade '
                'is refused; nothing was stopped' % (
                    spdk_version.label(new), old))
        with saved_config.file_lock(self.saved):
            self._check_hosts()
            saved_config.ConfigSaver(self.client,
                                     self.saved).save_locked()
            before = target_inventory.take(self.client)
            self.say('%s: %s -> SPDK v%s; %s' % (
                self.target.app, old, spdk_version.label(new),
                _count(before)))
            self.client.close()
            stopped = time.monotonic()
            self.target.stop(self.timeout)
            problem = self._bring_up(self.new_tree, before)
            if problem is None:
                self.stall = time.monotonic() - stopped
                self.target.finish(self.new_tree)
                self.say('upgraded: every object back, target answering '
                         '%.2f s after the stop' % self.stall)
                return self.target.process.pid
            self.say('the new target failed: %s; starting %s again'
                     % (problem, self.target.tree))
            self.target.stop(self.timeout)
            again = self._bring_up(self.target.tree, before)
            self.target.finish(self.target.tree)
            if again is not None:
                raise exc.RollbackFailed(
                    'upgrade failed (%s) and so did the rollback (%s): '
                    '%s, see %s' % (problem, again, self._state(),
                                    self.target.log_path))
            raise exc.RolledBack('upgrade failed: %s; rolled back, the '
                                 'previous binary runs again' % problem)

    def _check_hosts(self):
        """Refuse connected hosts that may not ride out the window.

        Called under the saved config's lock, so no host is admitted
        (and recorded) meanwhile.
        """
        if self.target.app not in STORAGE_APPS or self.force:
            return
        connected = target_inventory.connected_hosts(self.client)
        recorded = host_settings.read(self.saved)
        copies = mirrored_copies(connected, recorded)
        if copies:
            self.say('%d copies of replicated volumes here are mirrored by '
                     '%d hosts: they fail out of those mirrors for the '
                     'upgrade (the guests go on, degraded) and are rebuilt '
                     'after it by spdk-vhost-replicas repair or its watcher; '
                     'upgrade one failure domain at a time' % (
                         len(copies), len({host for host, _s in copies})))
        problems = host_problems(connected, recorded, self.window())
        if not problems:
            if connected:
                self.say('every connected NVMe-oF host rides out %d s'
                         % self.window())
            return
        raise exc.UpgradeError(
            'NVMe-oF hosts connected whose reconnect settings would not '
            'ride out the %d s this upgrade may keep the target away '
            '(--timeout %g): %s. Their guests would see I/O errors. Set '
            'nvme_fast_io_fail_timeout_sec and nvme_ctrlr_loss_timeout_sec '
            'on those hosts and attach their volumes again, or run with a '
            'smaller --timeout, or with --force; nothing was stopped' % (
                self.window(), self.timeout, '; '.join(problems)))

    def _state(self):
        """What runs after a failed rollback, for the operator."""
        process = self.target.process
        if process is not None and process.poll() is None:
            # A target whose config takes longer to load than --timeout.
            return ('the previous binary still runs (pid %d) but did not '
                    'list every object in time: it may still be loading '
                    'its config, check it before anything else'
                    % process.pid)
        return 'the target is down'

    def window(self):
        """Longest time the target may be away, rollback included."""
        return reconnect.window(self.timeout)

    def _bring_up(self, tree, before):
        """Start ``tree``; None once it lists ``before``, else why not."""
        # From before the start: a unit's start may block until then.
        deadline = time.monotonic() + self.timeout
        try:
            self.target.start(tree)
        except (OSError, systemd_unit.UnitError) as err:
            return 'cannot start: %s' % err
        problems = ['it never answered']
        while time.monotonic() < deadline:
            if self.target.process.poll() is not None:
                return 'exited with %s (see %s)' % (
                    self.target.process.returncode, self.target.log_path)
            try:
                after = target_inventory.take(self.client)
            except exc.SpdkRpcError as err:
                problems = ['not answering: %s' % err]
            else:
                problems = target_inventory.differences(before, after)
                if not problems:
                    return None
            self.client.close()
            time.sleep(0.1)
        return 'not all back after %s s: %s' % (self.timeout,
                                                '; '.join(problems))


def host_problems(connected, recorded, window):
    """Each connected host that may not ride out ``window``, in words.

    ``connected`` is ``{subsystem: [host NQN]}`` (who is connected now),
    ``recorded`` what :func:`host_settings.read` returns.
    """
    problems = {}
    for subsystem, hosts in sorted(connected.items()):
        for host in hosts:
            if host_settings.mirrored(recorded, host, subsystem):
                continue
            settings = host_settings.settings_of(recorded, host, subsystem)
            if settings is None:
                why = 'settings unknown'
            else:
                why = reconnect.shortfall(settings, window)
            if why:
                problems.setdefault(host, []).append(
                    '%s on %s' % (why, subsystem))
    return ['%s (%s)' % (host, ', '.join(whys))
            for host, whys in sorted(problems.items())]


def mirrored_copies(connected, recorded):
    """(host, subsystem) of each connection to a replicated volume's copy.

    Such a host fails the copy out of its mirror rather than ride out
    the upgrade: no problem, but a rebuild to come.
    """
    return [(host, subsystem)
            for subsystem, hosts in sorted(connected.items())
            for host in hosts
            if host_settings.mirrored(recorded, host, subsystem)]


def _count(inventory):
    return ', '.join('%d %s' % (len(v), k) for k, v in inventory.items())


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog='spdk-vhost-upgrade',
        description='Replace the running SPDK target by the build in '
                    '--new-spdk-dir, keeping every controller, '
                    'subsystem, key and QoS limit; roll back on failure.')
    parser.add_argument('--new-spdk-dir', required=True,
                        help='SPDK tree built by tools/build-spdk.sh')
    parser.add_argument('--rpc-socket', default=spdk_rpc.DEFAULT_SOCKET)
    parser.add_argument('--saved-config',
                        default='/var/lib/spdk/spdk_tgt.json',
                        help='the drivers\' spdk_saved_config')
    parser.add_argument('--pid', type=int,
                        help='the target (default: who listens on '
                             '--rpc-socket)')
    parser.add_argument('--timeout', type=float,
                        default=reconnect.UPGRADE_TIMEOUT,
                        help='seconds for the stop and for the new target '
                             'to list every object (default %%(default)s); '
                             'a failed upgrade keeps a storage target away '
                             'up to 4 * TIMEOUT + %d s, which connected '
                             'hosts must ride out' % (2 * reconnect.KILL_WAIT))
    parser.add_argument('--log', help='output of the new target '
                                      '(default: <saved config>.log)')
    parser.add_argument('--systemd-unit', metavar='NAME',
                        help='the target is this systemd unit\'s (e.g. '
                             'spdk-nvmf.service): replace it through the '
                             'unit, with a drop-in setting SPDK_DIR')
    parser.add_argument('--systemd-dir', default=systemd_unit.UNIT_DIR,
                        help='where the drop-in goes (default '
                             '%(default)s)')
    parser.add_argument('--force', action='store_true',
                        help='upgrade a storage target even with hosts '
                             'connected whose reconnect settings are '
                             'unknown or too short')
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    unit = None
    if args.systemd_unit:
        unit = systemd_unit.Unit(args.systemd_unit, args.systemd_dir,
                                 args.timeout)
    try:
        Upgrade(args.rpc_socket, args.saved_config, args.new_spdk_dir,
                pid=args.pid, timeout=args.timeout, force=args.force,
                log_path=args.log, unit=unit).run()
    except exc.RollbackFailed as err:
        print('spdk-vhost-upgrade: %s' % err, file=sys.stderr)
        return 2
    except (exc.UpgradeError, exc.SpdkRpcError, OSError,
            systemd_unit.UnitError) as err:
        print('spdk-vhost-upgrade: %s' % err, file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
