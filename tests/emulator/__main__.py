"""Run the SPDK target emulator: ``python -m tests.emulator``.

Like ``spdk_tgt -r SOCKET -S VHOST_DIR -m MASK``: serves JSON-RPC until
SIGTERM/SIGINT, then stops the data plane (qemu-storage-daemon) and
removes its sockets. Malloc bdevs and their lvstores live under
--state-dir and are discarded at exit, like RAM.
"""

import argparse
import logging
import os
import shutil
import signal
import sys
import threading

from tests.emulator import dataplane
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
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format='%(asctime)s %(threadName)s %(name)s '
                               '%(levelname)s %(message)s')
    os.makedirs(args.vhost_dir, exist_ok=True)
    os.makedirs(args.state_dir, exist_ok=True)
    plane_dir = os.path.join(args.state_dir, 'dataplane')
    os.makedirs(plane_dir, exist_ok=True)
    plane = dataplane.DataPlane(plane_dir)
    tgt = target_mod.Target(plane, args.vhost_dir, args.state_dir,
                            args.core_mask, args.reactor_numa)
    rpc = server.RpcServer(args.socket, tgt.dispatch)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_a: stop.set())
    rpc.start()
    LOG.info('SPDK emulator listening on %s', args.socket)
    try:
        while not stop.wait(1):
            pass
    finally:
        LOG.info('stopping')
        rpc.stop()
        tgt.close()
        for name in os.listdir(args.state_dir):
            shutil.rmtree(os.path.join(args.state_dir, name),
                          ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
