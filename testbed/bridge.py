"""The network hosts share on one machine: a bridge and its /24.

Nothing leaves the machine: the bridge has no uplink, the hosts have no
default route, nothing is NATed. The cloud's loopback-only database and
message bus are served to the hosts by :meth:`Network.relay`.

A crashed test process leaves namespaces, links and directories behind:
each is named after, or labelled with, the PID of the process that made
it, and every new :class:`Network` removes those whose maker is dead.
Hosts themselves are :mod:`testbed.hosts`.
"""

import ipaddress
import itertools
import json
import os
import random
import re
import select
import shutil
import signal
import subprocess
import sys
import time

import fixtures

from testbed import process_group

#: The hosts' private directories live here, under ``/tmp``: every host
#: has a ``/tmp`` of its own, so no host sees any host's directories.
ROOT = '/tmp/spdk-vhost-hosts'
NETNS_PREFIX = 'spdkhost-'
BRIDGE_PREFIX = 'sphb-'
VETH_PREFIX = 'sphv'
#: The label (``ip link ... alias``) of every link a Network or Host made.
ALIAS_PREFIX = 'spdk-vhost-hosts pid='
#: The subnets are /24s of 10.200.0.0/16 to 10.250.0.0/16.
SECOND_OCTETS = range(200, 251)
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class HostError(RuntimeError):
    pass


def ip(*args, check=True):
    done = subprocess.run(('ip',) + args, capture_output=True, text=True)
    if check and done.returncode:
        raise HostError('ip %s: %s' % (' '.join(args), done.stderr.strip()))
    return done


def _maker(text, prefix):
    """The PID that ``text`` (a name or label) says made it, or None."""
    match = re.match(re.escape(prefix) + r'(\d+)(-|$)', text or '')
    return int(match.group(1)) if match else None


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _dead(text, prefix):
    pid = _maker(text, prefix)
    return pid is not None and not _alive(pid)


def empty_netns(netns, timeout=10):
    """SIGKILL every process in ``netns`` until none is left.

    Killed processes may have started others meanwhile: ask again.
    """
    deadline = time.monotonic() + timeout
    while True:
        done = ip('netns', 'pids', netns, check=False)
        pids = [int(pid) for pid in done.stdout.split()]
        if not pids:
            return
        if time.monotonic() > deadline:
            raise HostError('processes %s stay in %s' % (pids, netns))
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def remove_stale():
    """Remove the namespaces, links and directories of dead makers.

    Another test process's (alive) are left alone, and so is everything
    this module did not name.
    """
    for line in ip('netns', 'list').stdout.splitlines():
        netns = (line.split() or [''])[0]
        if _dead(netns, NETNS_PREFIX):
            try:
                empty_netns(netns)
            except HostError:
                continue  # a process that ignores SIGKILL: next time
            ip('netns', 'del', netns, check=False)
    for link in json.loads(ip('-j', 'link', 'show').stdout or '[]'):
        if _dead(link.get('ifalias'), ALIAS_PREFIX):
            ip('link', 'del', link['ifname'], check=False)
    if os.path.isdir(ROOT):
        for entry in os.listdir(ROOT):
            if _dead(entry, ''):
                shutil.rmtree(os.path.join(ROOT, entry), ignore_errors=True)


def _used_networks():
    """Every IPv4 network this machine has an address or a route in."""
    used = []
    for ifc in json.loads(ip('-j', '-4', 'addr', 'show').stdout or '[]'):
        for addr in ifc.get('addr_info', ()):
            used.append(ipaddress.ip_network(
                '%s/%s' % (addr['local'], addr['prefixlen']), strict=False))
    routes = ip('-j', '-4', 'route', 'show', 'table', 'all').stdout
    for route in json.loads(routes or '[]'):
        if route.get('dst') not in (None, 'default'):
            used.append(ipaddress.ip_network(route['dst'], strict=False))
    return used


def _claim_bridge():
    """A free /24 and a new bridge named after it: ``(subnet, name)``.

    Creating the bridge is the claim: a test process racing for the same
    subnet gets "File exists" and tries the next one.
    """
    used = _used_networks()
    subnets = ['10.%d.%d.0/24' % (second, third)
               for second in SECOND_OCTETS for third in range(256)]
    start = random.randrange(len(subnets))
    for text in subnets[start:] + subnets[:start]:
        subnet = ipaddress.ip_network(text)
        if any(subnet.overlaps(other) for other in used):
            continue
        name = BRIDGE_PREFIX + '%d-%d' % tuple(subnet.network_address
                                               .packed[1:3])
        done = ip('link', 'add', 'name', name, 'type', 'bridge',
                  check=False)
        if done.returncode == 0:
            ip('link', 'set', 'dev', name, 'alias',
                ALIAS_PREFIX + str(os.getpid()))
            return subnet, name
        if 'File exists' not in done.stderr:
            raise HostError('ip link add %s: %s' % (name, done.stderr))
    raise HostError('no free /24 in 10.%d-%d.0.0/16' % (
        SECOND_OCTETS[0], SECOND_OCTETS[-1]))


def _read_line(process, timeout):
    """The first line ``process`` prints, or '' if it ends or stays mute."""
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    return process.stdout.readline().decode() if ready else ''


class Network(fixtures.Fixture):
    """A bridge and its private /24: all that the hosts on it share.

    ``gateway`` (``.1``) is the bridge's address on this machine;
    :meth:`relay` serves a loopback service there.
    """

    def _setUp(self):
        if os.getuid() != 0:
            raise HostError('namespaces and bridges need root')
        remove_stale()
        self.subnet, self.bridge = _claim_bridge()
        self.addCleanup(ip, 'link', 'del', self.bridge, check=False)
        self.gateway = str(self.subnet.network_address + 1)
        ip('addr', 'add', '%s/%d' % (self.gateway, self.subnet.prefixlen),
            'dev', self.bridge)
        ip('link', 'set', self.bridge, 'up')
        os.makedirs(ROOT, mode=0o755, exist_ok=True)
        self.workdir = os.path.join(ROOT, '%d-%s' % (os.getpid(),
                                                     self.bridge))
        os.mkdir(self.workdir, 0o755)
        self.addCleanup(shutil.rmtree, self.workdir, ignore_errors=True)
        self._numbers = itertools.count(2)
        self._relays = {}

    def shared_dir(self, name):
        """A directory hosts may mount (``hosts.Host(shared_dirs=...)``)."""
        path = os.path.join(self.workdir, 'shared-' + name)
        os.makedirs(path, mode=0o755, exist_ok=True)
        return path

    def allocate(self):
        """The next free host address of the subnet."""
        address = self.subnet.network_address + next(self._numbers)
        if address >= self.subnet.broadcast_address:
            raise HostError('no address left in %s' % self.subnet)
        return str(address)

    def relay(self, port, timeout=30):
        """Serve ``127.0.0.1:port`` at ``gateway:port``; ``(addr, port)``.

        One relay per port, until this network's clean-up.
        """
        if port not in self._relays:
            self._relays[port] = self._start_relay(port, timeout)
        return self.gateway, port

    def _start_relay(self, port, timeout):
        log_path = os.path.join(self.workdir, 'relay-%d.log' % port)
        with open(log_path, 'ab') as log:
            process = subprocess.Popen(
                [sys.executable, '-m', 'testbed.tcp_relay', self.gateway,
                 str(port), '127.0.0.1', str(port), '--device', self.bridge],
                stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                cwd=_REPO, start_new_session=True)
        self.addCleanup(process.stdout.close)
        self.addCleanup(process_group.stop, process, 10)
        if not _read_line(process, timeout).startswith('listening'):
            with open(log_path, errors='replace') as log:
                raise HostError('relay to port %d did not start: %s'
                                % (port, log.read()[-2000:]))
        return process
