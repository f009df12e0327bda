"""spdk-vhost-replicas: the replicated volumes attached to this host.

``spdk-vhost-replicas [list]`` prints one line per replicated volume
attached here (a RAID1 with a superblock on this host's SPDK target, see
:mod:`os_brick_connector.mirror`): its state, the members in sync, what
is missing and how far a rebuild got; and one line per remote volume
that the target could not replay at its start (its storage node was
down) and the watcher has not restored yet: its guest's disk stalls.
The exit code is for monitoring: 0 when every volume is online, 1 when
one is degraded, 2 when one is offline or waits so.

``spdk-vhost-replicas repair <volume id>`` brings lost members back
once their storage target is back. Alone it uses what SPDK still has: a
lost member's NVMe controller that reconnected (the default
``nvme_replica_ctrlr_loss_timeout_sec = -1`` keeps retrying). With
``--properties FILE`` (the volume's connection properties as JSON, the
``data`` of Nova's connection_info, or all of it) it also attaches again
a controller SPDK gave up.

``spdk-vhost-replicas watch`` does that repair by itself: every
``--interval`` seconds it adds back each lost member whose NVMe
controller has reconnected (its storage target is back) or which is new
(a copy Cinder made anew), one rebuild at a time per volume, and prints
a line whenever a volume's state changes
(``etc/systemd/spdk-vhost-replicas-watch.service`` runs it, its lines
going to the journal). A controller SPDK gave up still needs ``repair
--properties``. A member whose rebuild failed is said and held off for
a while before it is added again (:mod:`rebuild_failures`): a copy whose
lvol store has no room for it fails every time.

The watcher also brings back what a compute target restarted while a
storage node was down could not replay from its saved config (a remote
volume's NVMe-oF and vhost-blk controllers, a mirror's lost member, see
:mod:`os_brick_connector.restore`): each round it tries them again,
and prints a line when one starts waiting and when it is back; a member
back is then added to its mirror like any other.

Both rebuild only where the guest runs (:func:`mirror.guest`): at a
live migration's destination the source still writes until the switch,
and a copy rebuilt there before it would miss those writes, so the
watcher waits for the guest to start there, and ``repair`` refuses while
a migrating guest's QEMU waits for it. The watcher also leaves a volume
whose guest is shut off (no QEMU connected), which ``repair`` rebuilds.
Each repair holds the connector's lock (:mod:`host_lock`), so it never
races nova-compute attaching or detaching the same volume.

A compute host's long-running command, so it lives with Nova's side of
the project rather than in the os-brick connector; it reads the
``[spdk_vhost]`` options and ``[oslo_concurrency] lock_path`` from
nova.conf (``--config-file``).
"""

import argparse
import json
import sys
import time

from os_brick import exception as brick_exc
from oslo_concurrency import opts as lock_opts
from oslo_config import cfg

from nova_vhost_user import rebuild_failures
from os_brick_connector import host_lock
from os_brick_connector import mirror
from os_brick_connector import mirror_repair
from os_brick_connector import options
from os_brick_connector import restore
from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import properties
from spdk_vhost_core import spdk_rpc

EXIT = {mirror.ONLINE: 0, mirror.DEGRADED: 1, mirror.OFFLINE: 2}


def describe(client, volume_id, raid):
    """One volume's state, as the list prints it (and as JSON)."""
    state = mirror.status(client, volume_id, raid=raid)
    state['volume_id'] = volume_id
    state['lost'] = mirror_repair.out_of_mirror(client, volume_id, state)
    state['guest'] = mirror.guest(client, volume_id)
    return state


def _waiting(state):
    """Whether a rebuild the volume needs waits for its guest to run."""
    return bool(state['lost']) and state['guest'] != mirror.RUNNING


def _line(state):
    text = '%s %s %d/%d in sync' % (state['volume_id'], state['state'],
                                    len(state['members']),
                                    state['replicas'])
    if state['rebuilding']:
        text += '; rebuilding %(member)s %(percent)d%%' % state['rebuilding']
    if state['missing']:
        text += '; %d missing' % state['missing']
    for name, nvme_state in state['lost']:
        text += '; %s %s' % (name, nvme_state)
    for member in state.get('held', ()):
        text += '; %s held after a failed rebuild' % member
    if _waiting(state):
        text += '; rebuild waits for the guest to run here (%s)' % (
            state['guest'])
    return text


def _waiting_state(controller):
    """A saved controller the target lacks, as the list reports it."""
    return {'controller': controller, 'state': mirror.OFFLINE,
            'problem': 'not replayed at the target\'s start: waits for '
                       'its storage node'}


def list_volumes(client, out, as_json=False, saved=None):
    """Print every replicated volume; the exit code of the worst.

    Then each remote volume the target could not replay from ``saved``
    (the saved config), whose guest's disk stalls until the watcher
    restores it: offline.
    """
    states = [describe(client, name, raid)
              for name, raid in sorted(mirror.mirrors(client).items())]
    states += [_waiting_state(name)
               for name in restore.waiting(client, saved)]
    if as_json:
        json.dump(states, out, indent=2, sort_keys=True)
        out.write('\n')
    else:
        for state in states:
            out.write(('%(controller)s %(state)s; %(problem)s' % state
                       if 'controller' in state else _line(state)) + '\n')
    return max([EXIT[state['state']] for state in states] or [0])


def readd(client, volume_id, props=None, conf=None, lock_path=None,
          skip=()):
    """:func:`mirror_repair.readd` under the connector's lock."""
    with host_lock.held(lock_path):
        return mirror_repair.readd(client, volume_id, props, conf, skip)


def _load_properties(path):
    with open(path) as source:
        data = json.load(source)
    return properties.ConnectionProperties(data.get('data', data))


def repair(client, conf, volume_id, properties_file=None, out=sys.stdout,
           lock_path=None):
    """The repair subcommand; the exit code of the volume's new state."""
    props = None
    if properties_file:
        props = _load_properties(properties_file)
        if props.volume_id != volume_id:
            out.write('%s holds volume %s\n'
                      % (properties_file, props.volume_id))
            return 2
    if mirror.find(client, volume_id) is None:
        out.write('%s is not attached here\n' % volume_id)
        return 2
    if mirror.guest(client, volume_id) == mirror.INCOMING:
        out.write('%s: a live migration brings its guest here; the source '
                  'writes until the switch: repair it once the guest runs '
                  'here\n' % volume_id)
        return 1
    if props is not None:
        with host_lock.held(lock_path):
            mirror_repair.repair(client, props, conf)
    else:
        readd(client, volume_id, lock_path=lock_path)
    state = describe(client, volume_id, mirror.find(client, volume_id))
    out.write(_line(state) + '\n')
    # A rebuild under way is a repair that worked.
    if state['rebuilding'] and state['state'] == mirror.DEGRADED:
        return 0
    return EXIT[state['state']]


def _change(state):
    """What a watcher reports a change of (not each percent rebuilt)."""
    return (state['state'], tuple(state['members']), state['missing'],
            (state['rebuilding'] or {}).get('member'), tuple(state['lost']),
            _waiting(state) and state['guest'], tuple(state['held']))


def _say_failed(out, volume_id, failure):
    out.write('%(volume)s: the rebuild of %(member)s failed (%(percent)d%% '
              'done when last seen; %(count)d in a row): its storage target '
              'went away or refused the writes, as an lvol store without '
              'room for the whole copy does; the watcher adds it again in '
              '%(wait)d s, "spdk-vhost-replicas repair %(volume)s" at once\n'
              % dict(failure._asdict(), volume=volume_id))


def _round_state(client, volume_id, raid, failures, out):
    """:func:`describe`, and the members ``failures`` holds off.

    A rebuild seen before that has failed since is said, and held.
    """
    state = describe(client, volume_id, raid)
    failure = failures.observe(volume_id, state)
    if failure:
        _say_failed(out, volume_id, failure)
    state['held'] = sorted(failures.held(volume_id))
    return state


def _addable(state):
    """Whether the watcher adds a member back to the volume now."""
    return (state['state'] == mirror.DEGRADED and not state['rebuilding']
            and state['guest'] == mirror.RUNNING
            and any(nvme == 'enabled'
                    and mirror.Member(name).bdev not in state['held']
                    for name, nvme in state['lost']))


def watch_once(client, out, seen, lock_path=None, failures=None):
    """One round of the watcher; ``seen``: volume -> last change, updated.

    A volume degraded with no rebuild under way, whose guest runs here,
    gets its reconnected members added back; one SPDK refuses is tried
    again next round. A member whose rebuild failed waits as
    ``failures`` (a :class:`rebuild_failures.RebuildFailures` kept
    across rounds) holds it off.
    """
    if failures is None:
        failures = rebuild_failures.RebuildFailures()
    volumes = mirror.mirrors(client)
    for volume_id in [vid for vid in seen if vid not in volumes]:
        del seen[volume_id]
        failures.forget(volume_id)
    for volume_id, raid in sorted(volumes.items()):
        state = _round_state(client, volume_id, raid, failures, out)
        if _addable(state):
            try:
                added = readd(client, volume_id, lock_path=lock_path,
                              skip=state['held'])
            except spdk_exc.SpdkVhostError as err:
                out.write('%s: could not add a member back: %s\n'
                          % (volume_id, err))
            else:
                if added:
                    failures.started(volume_id, added.bdev)
            state = _round_state(client, volume_id,
                                 mirror.find(client, volume_id), failures,
                                 out)
        if seen.get(volume_id) != _change(state):
            seen[volume_id] = _change(state)
            out.write(_line(state) + '\n')
    out.flush()


def restore_once(client, out, waits, saved, lock_path=None):
    """Restore the saved controllers the target lacks; print changes.

    ``waits``: controller -> why it waited last round, updated; a line
    is printed when one starts waiting (or waits for another reason)
    and when it is back.
    """
    outcome = restore.restore(client, saved, lock_path)
    for name in [n for n in waits if n not in outcome]:
        del waits[name]
    for name, why in sorted(outcome.items()):
        if why is None:
            out.write('%s restored from the saved config\n' % name)
            waits.pop(name, None)
        elif waits.get(name) != why:
            out.write('%s waits: %s\n' % (name, why))
            waits[name] = why
    out.flush()


def watch(client, out, interval, rounds=None, lock_path=None, saved=None):
    """Each round of the watcher, every ``interval`` s (``rounds`` times).

    A round is :func:`restore_once` (``saved``: the saved config's path)
    and :func:`watch_once`.
    """
    seen, waits = {}, {}
    failures = rebuild_failures.RebuildFailures(
        path=rebuild_failures.holds_path(saved))
    steps = (lambda: restore_once(client, out, waits, saved, lock_path),
             lambda: watch_once(client, out, seen, lock_path, failures))
    done = 0
    while rounds is None or done < rounds:
        for step in steps:
            try:
                step()
            except spdk_exc.SpdkVhostError as err:
                # The compute target restarting: try again next round.
                out.write('spdk-vhost-replicas watch: %s\n' % err)
                out.flush()
        done += 1
        if rounds is None or done < rounds:
            time.sleep(interval)
    return 0


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog='spdk-vhost-replicas',
        description='Replicated volumes attached to this compute host.')
    parser.add_argument('--config-file', action='append', default=[],
                        help='nova.conf with the [spdk_vhost] options '
                             '(default: oslo.config\'s search for '
                             'nova.conf)')
    sub = parser.add_subparsers(dest='command')
    listing = sub.add_parser('list', help='every replicated volume, and '
                             'each remote one waiting for its storage '
                             'node; exit 1 if one is degraded, 2 if one is '
                             'offline or waits')
    listing.add_argument('--json', action='store_true')
    fix = sub.add_parser('repair', help='bring lost members back')
    fix.add_argument('volume_id')
    fix.add_argument('--properties', help='JSON connection properties of '
                     'the volume, to attach a member SPDK gave up')
    watcher = sub.add_parser('watch', help='add back reconnected members '
                             'and restore remote attachments a target '
                             'restart could not replay, by themselves; '
                             'print each change of state')
    watcher.add_argument('--interval', type=float, default=10.0,
                         help='seconds between rounds (default 10)')
    args = parser.parse_args(argv)
    args.command = args.command or 'list'
    return args


def load_conf(config_files):
    """nova.conf's ``[spdk_vhost]`` group, and its lock path (or None)."""
    conf = cfg.ConfigOpts()
    options.register_opts(conf)
    for group, opts in lock_opts.list_opts():
        conf.register_opts(opts, group=group)
    conf(args=[], project='nova', default_config_files=config_files or None)
    return conf[options.GROUP], conf.oslo_concurrency.lock_path


def main(argv=None, client=None, conf=None, out=sys.stdout, lock_path=None):
    """The command; ``conf`` given (tests) keeps ``lock_path`` as given."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if conf is None:
            conf, lock_path = load_conf(args.config_file)
        if args.command in ('watch', 'repair'):
            # Its repairs hold nova-compute's lock: refused at once if
            # there is none to hold.
            lock_path = host_lock.directory(lock_path)
        if client is None:
            client = spdk_rpc.SpdkClient.from_conf(conf)
        if args.command == 'watch':
            return watch(client, out, args.interval, lock_path=lock_path,
                         saved=conf.spdk_saved_config)
        if args.command == 'repair':
            return repair(client, conf, args.volume_id, args.properties,
                          out=out, lock_path=lock_path)
        return list_volumes(client, out, getattr(args, 'json', False),
                            saved=conf.spdk_saved_config)
    except (spdk_exc.SpdkVhostError, brick_exc.BrickException, OSError,
            ValueError, cfg.Error) as err:
        print('spdk-vhost-replicas: %s' % err, file=sys.stderr)
        return 3


if __name__ == '__main__':
    sys.exit(main())
