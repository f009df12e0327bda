"""Run the SPDK target emulator: ``python -m tests.emulator``.

Like ``spdk_tgt -r SOCKET -S VHOST_DIR -m MASK [--json FILE]``: replays
a saved config (``--json``), then serves JSON-RPC until SIGTERM/SIGINT,
then stops the data plane (qemu-storage-daemon) and removes its sockets.
Malloc bdevs and their lvstores live under --state-dir and are discarded
at exit and at start (after a SIGKILL), like RAM.
"""

import argparse
import json
import logging
import os
import shutil
import signal
import sys
import threading

from tests.emulator import dataplane
from tests.emulator import errors
from tests.emulator import server
from tests.emulator import target as target_mod

LOG = logging.getLogger('tests.emulator')


def parse_args(argv):
    parser = argparse.ArgumentParser(prog='python -m tests.emulator')
    parser.add_argument('--socket', required=True)
    parser.add_argument('--vhost-dir', required=True)
    parser.add_argument('--state-dir', required=True)
    parser.add_argument('--core-mask', default='0x3',
                        type=lambda s: int(s, 16))
    parser.add_argument('--reactor-numa', default='',
                        type=lambda s: [int(n) for n in s.split(',') if n])
    parser.add_argument('--json', dest='json_config',
                        help='saved config (save_config) to load at start')
    parser.add_argument('--json-ignore-init-errors', action='store_true',
                        help='log a failing entry of --json and go on')
    return parser.parse_args(argv)


class ConfigLoadError(Exception):
    """An entry of the --json config failed: spdk_tgt does not start."""


def load_config(tgt, path, ignore_errors=False):
    """Run a saved config's calls in order, as spdk_tgt --json does.

    Subsystems in file order, each one's entries in order. A failing
    entry stops the load (ConfigLoadError) unless ignore_errors.
    """
    with open(path) as src:
        doc = json.load(src)
    for item in doc.get('subsystems', []):
        for entry in item.get('config') or ():
            method = entry.get('method')
            try:
                tgt.dispatch(method, entry.get('params'))
            except errors.RpcError as err:
                message = ('%s: subsystem %s, method %s: %s' % (
                    path, item.get('subsystem'), method, err.to_json()))
                if not ignore_errors:
                    raise ConfigLoadError(message) from err
                LOG.warning('ignoring a failed config entry: %s', message)


def _wipe(directory):
    for name in os.listdir(directory):
        shutil.rmtree(os.path.join(directory, name), ignore_errors=True)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format='%(asctime)s %(threadName)s %(name)s '
                               '%(levelname)s %(message)s')
    os.makedirs(args.vhost_dir, exist_ok=True)
    os.makedirs(args.state_dir, exist_ok=True)
    _wipe(args.state_dir)
    plane_dir = os.path.join(args.state_dir, 'dataplane')
    os.makedirs(plane_dir, exist_ok=True)
    plane = dataplane.DataPlane(plane_dir)
    tgt = target_mod.Target(plane, args.vhost_dir, args.state_dir,
                            args.core_mask, args.reactor_numa)
    rpc = server.RpcServer(args.socket, tgt.dispatch)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_a: stop.set())
    try:
        if args.json_config:
            try:
                load_config(tgt, args.json_config,
                            args.json_ignore_init_errors)
            except (ConfigLoadError, OSError, ValueError) as err:
                LOG.error('failed to load the config: %s', err)
                return 1
            LOG.info('loaded %s', args.json_config)
        rpc.start()
        LOG.info('SPDK emulator listening on %s', args.socket)
        while not stop.wait(1):
            pass
    finally:
        LOG.info('stopping')
        rpc.stop()
        tgt.close()
        _wipe(args.state_dir)
    return 0


if __name__ == '__main__':
    sys.exit(main())
