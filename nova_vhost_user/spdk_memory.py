"""Start-up check: Nova reserves the hugepages the SPDK target holds.

The compute host's SPDK target takes its hugepage memory at start
(``-s``/``--mem-size``, MiB; the units set it with ``SPDK_MEM_MB``).
Nova places hugepage guests (which vhost-user disks need) into every
hugepage it does not know is reserved (``[DEFAULT]
reserved_huge_pages``): without the reservation, guests are placed
into pages SPDK already holds and fail to start, or SPDK, restarted,
finds none left. A target started without ``-s`` takes memory as it
needs it, which no reservation can follow.

The target is found as the peer of its RPC socket (``SO_PEERCRED``),
so the check runs where nova-compute and the target share a host, as
they must for vhost-user. Its memory comes from its command line; the
page size is the host's default one (``Hugepagesize``), the one SPDK
maps.
"""

import socket
import struct

from nova import exception
from nova.virt import hardware
from oslo_log import log as logging

from os_brick_connector import numa
from spdk_vhost_core import exception as spdk_exception

LOG = logging.getLogger(__name__)

MEM_OPTIONS = ('-s', '--mem-size')
_UNITS = {'': 0, 'K': 10, 'M': 20, 'G': 30, 'T': 40}


def mem_size_mb(argv):
    """The target's ``-s`` in MiB, as SPDK reads it; None without one.

    A bare number is MiB; with a unit (``1G``, ``512M``) a byte count,
    as ``spdk_parse_capacity`` reads it.
    """
    value = None
    for index, arg in enumerate(argv):
        if arg in MEM_OPTIONS and index + 1 < len(argv):
            value = argv[index + 1]
        elif arg.startswith('--mem-size='):
            value = arg[len('--mem-size='):]
        elif arg.startswith('-s') and len(arg) > 2:
            value = arg[2:]
    if value is None:
        return None
    number = value.rstrip('bB')
    unit = number[-1:].upper() if number[-1:].isalpha() else ''
    digits = number[:len(number) - len(unit)]
    if unit not in _UNITS or not digits.isdigit():
        raise ValueError('not an SPDK memory size: %r' % value)
    return int(digits) if not unit else (int(digits) << _UNITS[unit]) >> 20


def socket_peer_pid(path):
    """The pid of the process serving the Unix socket ``path``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(path)
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                struct.calcsize('3i'))
    return struct.unpack('3i', creds)[0]


def process_argv(pid, proc_root='/proc'):
    with open('%s/%d/cmdline' % (proc_root, pid), 'rb') as src:
        return [arg.decode(errors='replace')
                for arg in src.read().split(b'\0') if arg]


def reserved_mb(page_kb):
    """MiB of ``page_kb`` pages ``reserved_huge_pages`` reserves in all."""
    return sum(sizes.get(page_kb, 0) * page_kb // 1024
               for sizes in hardware.numa_get_reserved_huge_pages().values())


def suggestion(mem_mb, page_kb, reactor_nodes):
    """reserved_huge_pages lines holding ``mem_mb`` on the reactors' nodes."""
    return '; '.join(
        'reserved_huge_pages = node:%d,size:%d,count:%d'
        % (node, page_kb, count) for node, count in
        numa.hugepages_per_node(mem_mb, page_kb, reactor_nodes).items())


def _reactor_nodes(client, sysfs_root):
    cpu_nodes = numa.sysfs_cpu_nodes(sysfs_root)
    reactors = client.framework_get_reactors()['reactors']
    return [cpu_nodes.get(reactor['lcore'], 0) for reactor in reactors]


def check(client, socket_path, proc_root='/proc', sysfs_root='/sys',
          meminfo='/proc/meminfo'):
    """Refuse a reservation smaller than the target's memory.

    Returns (the target's MiB, MiB reserved) once checked. A target
    this process cannot find or read is only a warning: nova-compute
    must still start when the target is down.
    """
    try:
        argv = process_argv(socket_peer_pid(socket_path), proc_root)
        page_kb = numa.default_hugepage_kb(meminfo)
        mem_mb = mem_size_mb(argv)
        nodes = _reactor_nodes(client, sysfs_root)
    except (OSError, ValueError, spdk_exception.SpdkRpcError) as err:
        LOG.warning('Could not check that [DEFAULT] reserved_huge_pages '
                    'holds the SPDK target\'s hugepages: %s', err)
        return None
    reserved = reserved_mb(page_kb)
    if mem_mb is None:
        raise exception.InvalidConfiguration(
            'The SPDK target (%s) runs without -s: it takes hugepages as '
            'it needs them, which Nova cannot reserve, and guests placed '
            'into them fail to start. Start it with a fixed -s (the '
            'systemd units take SPDK_MEM_MB) and reserve as much in '
            'nova.conf.' % argv[0])
    if reserved < mem_mb:
        raise exception.InvalidConfiguration(
            'The SPDK target holds %(mem)d MiB of %(kb)d kB hugepages '
            '(-s) but [DEFAULT] reserved_huge_pages reserves %(res)d MiB '
            'of them: Nova would place hugepage guests into SPDK\'s '
            'memory. Set %(fix)s ([spdk_vhost] nova_check_spdk_memory = '
            'false skips this check).' % {
                'mem': mem_mb, 'kb': page_kb, 'res': reserved,
                'fix': suggestion(mem_mb, page_kb, nodes)})
    if reserved > mem_mb:
        LOG.warning('[DEFAULT] reserved_huge_pages reserves %(res)d MiB of '
                    '%(kb)d kB hugepages, more than the SPDK target\'s '
                    '%(mem)d MiB (-s): guests could use the rest.',
                    {'res': reserved, 'kb': page_kb, 'mem': mem_mb})
    return mem_mb, reserved
