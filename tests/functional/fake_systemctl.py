"""A stand-in ``systemctl`` for the upgrade command's unit tests.

Just what ``spdk-vhost-upgrade --systemd-unit`` uses, on units described
in ``$FAKE_SYSTEMD/<unit>.json`` (``exec``: the command line, with
``${SPDK_DIR}``; ``env``: its Environment; ``socket``: the RPC socket
ExecStartPost waits for), with drop-ins read from
``$FAKE_SYSTEMD/<unit>.d/*.conf`` at ``daemon-reload``. Each call is
appended to ``$FAKE_SYSTEMD/calls.log``, stop with whether the unit's
ExecStop (the config save) would have run.
"""

import glob
import json
import os
import signal
import subprocess
import sys
import time

ROOT = os.environ['FAKE_SYSTEMD']


def _path(unit, suffix):
    return os.path.join(ROOT, unit + suffix)


def _log(*words):
    with open(os.path.join(ROOT, 'calls.log'), 'a') as out:
        out.write(' '.join(words) + '\n')


def _loaded(unit):
    """The unit as of the last daemon-reload: its drop-ins applied."""
    with open(_path(unit, '.loaded.json')) as src:
        return json.load(src)


def daemon_reload(unit_names):
    for path in glob.glob(os.path.join(ROOT, '*.json')):
        if path.endswith('.loaded.json'):
            continue
        with open(path) as src:
            unit = json.load(src)
        unit.setdefault('exec_stop', True)
        unit.setdefault('timeout_stop', 90)
        name = os.path.basename(path)[:-len('.json')]
        for conf in sorted(glob.glob(_path(name, '.d/*.conf'))):
            with open(conf) as src:
                for line in src.read().splitlines():
                    key, _sep, value = line.partition('=')
                    if key == 'Environment':
                        env_key, _sep, env_value = value.partition('=')
                        unit['env'][env_key] = env_value
                    elif key == 'ExecStop':
                        unit['exec_stop'] = bool(value)
                    elif key == 'TimeoutStopSec':
                        unit['timeout_stop'] = int(value)
        with open(_path(name, '.loaded.json'), 'w') as out:
            json.dump(unit, out)


def _pid(unit):
    try:
        with open(_path(unit, '.pid')) as src:
            pid = int(src.read())
    except (OSError, ValueError):
        return 0
    try:
        with open('/proc/%d/stat' % pid) as src:
            state = src.read().rsplit(')', 1)[1].split()[0]
    except OSError:
        return 0
    return 0 if state == 'Z' else pid


def start(unit):
    loaded = _loaded(unit)
    tree = loaded['env']['SPDK_DIR']
    cmd = [arg.replace('${SPDK_DIR}', tree) for arg in loaded['exec']]
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(tree, 'build',
                                                        'lib'))
    if os.path.exists(loaded['socket']):
        os.unlink(loaded['socket'])
    with open(loaded['log'], 'ab') as log:
        process = subprocess.Popen(cmd, stdout=log, stderr=log, env=env,
                                   stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    with open(_path(unit, '.pid'), 'w') as out:
        out.write(str(process.pid))
    _log('start', unit, tree)
    deadline = time.monotonic() + 30
    while not os.path.exists(loaded['socket']):
        if process.poll() is not None or time.monotonic() > deadline:
            print('Job for %s failed.' % unit)
            return 1
        time.sleep(0.05)
    return 0


def stop(unit):
    loaded = _loaded(unit)
    _log('stop', unit, 'ExecStop' if loaded['exec_stop'] else 'no ExecStop',
         'TimeoutStopSec=%d' % loaded['timeout_stop'])
    pid = _pid(unit)
    if pid:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + loaded['timeout_stop']
        while _pid(unit) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _pid(unit):
            os.kill(pid, signal.SIGKILL)
    return 0


def main(argv):
    if argv[0] == 'daemon-reload':
        _log('daemon-reload')
        daemon_reload(argv[1:])
        return 0
    if argv[0] == 'start':
        return start(argv[1])
    if argv[0] == 'stop':
        return stop(argv[1])
    if argv[0] == 'is-active':
        active = bool(_pid(argv[1]))
        print('active' if active else 'inactive')
        return 0 if active else 3
    if argv[:4] == ['show', '-p', 'MainPID', '--value']:
        print(_pid(argv[4]))
        return 0
    print('fake systemctl: %s not handled' % ' '.join(argv))
    return 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
