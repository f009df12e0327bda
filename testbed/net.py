"""Loopback ports for tests that bind listeners."""

import socket


def free_port(host='127.0.0.1'):
    """A TCP port nothing listens on right now.

    Tests run in parallel workers, each with its own SPDK targets, so a fixed
    port (NVMe-oF's 4420) would make two tests' listeners collide.
    """
    family = socket.AF_INET6 if ':' in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]
