"""A TCP relay: the machine's loopback services, on the hosts' network.

The cloud's MariaDB and RabbitMQ listen on 127.0.0.1 only (RabbitMQ
admits ``guest`` from loopback only), but a test host (``hosts.Host``)
has a loopback of its own. A real cloud's database and bus are reached
over the network, so ``bridge.Network.relay`` runs this relay on the
bridge's gateway address; the services see each connection come from
127.0.0.1, as before.

``--device`` binds the listener to the bridge (``SO_BINDTODEVICE``): the
relay answers the hosts on that bridge (and this machine's own
connections to the gateway address), never a packet that reaches the
gateway address through another interface, another bridge or ``eth0``.

Usage: ``python -m testbed.tcp_relay LISTEN_ADDR LISTEN_PORT TARGET_ADDR
TARGET_PORT [--device IFNAME]``. It prints one ``listening`` line when it
accepts connections, and ends with the process that started it.
"""

import argparse
import asyncio
import ctypes
import os
import signal
import socket
import sys

_PR_SET_PDEATHSIG = 1
_CHUNK = 65536


def _end_with_parent():
    """SIGTERM this relay when its starter dies, even by SIGKILL.

    A relay left listening on a bridge a crashed test's successor
    deleted would serve nobody and hold its port forever.
    """
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the starter died before prctl
        sys.exit(0)


async def _pipe(reader, writer):
    """Copy one direction; pass the peer's end of data on (half-close)."""
    try:
        while True:
            data = await reader.read(_CHUNK)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        # A reset on one side resets the other: nobody waits forever.
        writer.transport.abort()


async def _relay(target, client_reader, client_writer):
    try:
        up_reader, up_writer = await asyncio.open_connection(*target)
    except OSError:
        client_writer.transport.abort()
        return
    await asyncio.gather(_pipe(client_reader, up_writer),
                         _pipe(up_reader, client_writer))
    up_writer.close()
    client_writer.close()


def _listener(address, port, device):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if device:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE,
                        device.encode())
    sock.bind((address, port))
    sock.listen(128)
    return sock


async def _serve(args):
    target = (args.target_addr, args.target_port)
    server = await asyncio.start_server(
        lambda r, w: _relay(target, r, w),
        sock=_listener(args.listen_addr, args.listen_port, args.device))
    print('listening %s:%d' % (args.listen_addr, args.listen_port),
          flush=True)
    async with server:
        await server.serve_forever()


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m testbed.tcp_relay')
    parser.add_argument('listen_addr')
    parser.add_argument('listen_port', type=int)
    parser.add_argument('target_addr')
    parser.add_argument('target_port', type=int)
    parser.add_argument('--device', help='serve this interface only')
    args = parser.parse_args(argv)
    _end_with_parent()
    asyncio.run(_serve(args))


if __name__ == '__main__':
    main()
