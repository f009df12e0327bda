"""spdk-vhost-save-config: the SPDK service units' save before a stop.

``spdk-vhost-save-config [--rpc-socket SOCKET] FILE`` writes the
target's whole live config to ``FILE`` as the drivers do (atomically,
under their lock, in replay order), keeping what the target could not
replay at its start (:mod:`spdk_vhost_core.unreplayed`): SPDK's own
``save_config`` would drop a remote volume whose storage node is down,
and the next start would lose it for good. The units' ``ExecStop`` runs
it, for changes made by hand since the drivers' last save.
"""

import argparse
import sys

from spdk_vhost_core import exception as exc
from spdk_vhost_core import saved_config
from spdk_vhost_core import spdk_rpc


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog='spdk-vhost-save-config',
        description='Save the SPDK target\'s live config where it starts '
                    'from, keeping what it could not replay.')
    parser.add_argument('--rpc-socket', default=spdk_rpc.DEFAULT_SOCKET)
    parser.add_argument('saved_config',
                        help='the file the target starts with (--json)')
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        with spdk_rpc.SpdkClient(args.rpc_socket, timeout=30.0) as client:
            saved_config.ConfigSaver(client, args.saved_config).save()
    except exc.SpdkVhostError as err:
        print('spdk-vhost-save-config: %s' % err, file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
