"""Loopback ports for tests that bind listeners."""

import random
import socket

#: Ports below the kernel's ephemeral range start here.
LOWEST = 10000
PORT_RANGE = '/proc/sys/net/ipv4/ip_local_port_range'


def ephemeral_range(path=PORT_RANGE):
    """(first, last) of the ports the kernel gives outgoing connections."""
    with open(path) as src:
        first, last = src.read().split()
    return int(first), int(last)


def free_port(host='127.0.0.1'):
    """A TCP port nothing listens on right now, for a listener made later.

    Tests run in parallel workers, each with its own SPDK targets, so a fixed
    port (NVMe-oF's 4420) would make two tests' listeners collide. The port
    is below the ephemeral range: a test may start its listener long after
    it took the port, and meanwhile any outgoing connection (an NVMe/TCP
    initiator's, say) could be given an ephemeral one and keep the
    listener out.
    """
    family = socket.AF_INET6 if ':' in host else socket.AF_INET
    first, _last = ephemeral_range()
    for port in random.sample(range(LOWEST, first), 100):
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((host, port))
            except OSError:
                continue
            return port
    raise OSError('no free port on %s between %d and %d'
                  % (host, LOWEST, first - 1))
