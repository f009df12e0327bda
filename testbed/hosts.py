"""Hosts that share nothing but the network, on one machine.

A cloud's storage nodes, compute nodes and controllers each write their
own files (keys, saved configs, vhost sockets, hugepage files) and reach
each other only over the network. Tests that run every role in one
namespace cannot tell a file written on the right host from one written
on the wrong one, nor a listener on an address from one on loopback. So
here each :class:`Host` is a network, a mount and a UTS namespace: an
address on a :class:`Network` bridge, its own ``/var/lib/spdk``,
``/etc/cinder``, ``/run``, ``/tmp`` and the rest of :data:`PRIVATE_DIRS`,
its own hugetlbfs on ``/dev/hugepages``, and its name as hostname.
Everything else (``/usr``, the repository, the SPDK build) is the
machine's, as an image every host was installed from.

The network they share is :mod:`testbed.bridge`; :class:`Lab` makes
one with hosts on it.
"""

import os
import re
import secrets
import shlex
import shutil
import subprocess
import time

import fixtures

from testbed import bridge

#: What each host has its own of, bind-mounted over the machine's.
PRIVATE_DIRS = ('/var/lib/spdk', '/etc/cinder', '/etc/nova',
                '/etc/spdk-vhost', '/run', '/tmp', '/var/tmp', '/var/log',
                '/dev/shm')
_STICKY_DIRS = ('/tmp', '/var/tmp', '/dev/shm', '/run/lock')
HUGEPAGES = '/dev/hugepages'
_NAME = re.compile(r'^[a-z][a-z0-9-]{0,30}$')


def _mangle(path):
    """A directory name per private path (``/var/lib/spdk``: var+lib+spdk)."""
    return path.strip('/').replace('/', '+')


def _ns(pid, kind):
    return os.readlink('/proc/%d/ns/%s' % (pid, kind))


def _comm(pid):
    with open('/proc/%d/comm' % pid) as comm:
        return comm.read().strip()


class Host(fixtures.Fixture):
    """A machine of its own on ``network``: its address, files, hostname.

    ``argv(cmd)`` (and ``run``, ``popen``) runs a command inside it;
    ``path(p)`` is where this machine sees the host's private path ``p``.
    ``extra_dirs``: more directories of its own than :data:`PRIVATE_DIRS`
    (a compute host's libvirt and Nova directories). ``shared_dirs``:
    mount point -> a directory of :meth:`bridge.Network.shared_dir`,
    the same on every host that mounts it, as an NFS export would be.
    """

    def __init__(self, network, name, start_timeout=10, extra_dirs=(),
                 shared_dirs=None):
        super().__init__()
        if not _NAME.match(name):
            raise ValueError('not a host name: %r' % name)
        self.network = network
        self.name = name
        self.start_timeout = start_timeout
        self.private_dirs = PRIVATE_DIRS + tuple(extra_dirs)
        self.shared_dirs = dict(shared_dirs or {})
        self.holder = None

    def _setUp(self):
        self.address = self.network.allocate()
        self.root = os.path.join(self.network.workdir, self.name)
        os.mkdir(self.root, 0o755)  # a second host of that name fails here
        self.addCleanup(shutil.rmtree, self.root, ignore_errors=True)
        self._make_dirs()
        self.netns = '%s%d-%s-%s' % (bridge.NETNS_PREFIX, os.getpid(),
                                     self.name, secrets.token_hex(3))
        bridge.ip('netns', 'add', self.netns)
        self.addCleanup(bridge.ip, 'netns', 'del', self.netns, check=False)
        self._link()
        self.addCleanup(self._stop_processes)
        self._start_holder()
        self._mount()

    def _make_dirs(self):
        """The private directories, and overlays for missing mount points.

        ``/etc/cinder`` is made inside the host, on an overlay of ``/etc``
        (writes go to this host's directory): the machine's own ``/etc``
        and ``/var/lib`` stay untouched.
        """
        self.dirs, self.overlays = {}, {}
        for mount in self.private_dirs:
            self.dirs[mount] = os.path.join(self.root, _mangle(mount))
            os.mkdir(self.dirs[mount], 0o755)
            parent = mount
            while not os.path.isdir(parent):
                parent = os.path.dirname(parent)
            if parent != mount:
                if parent == '/':
                    raise bridge.HostError('no overlay on / for %s' % mount)
                self.overlays[parent] = os.path.join(
                    self.root, '.overlay', _mangle(parent))
        self.dirs.update(self.shared_dirs)
        for upper in self.overlays.values():
            for part in ('upper', 'work'):
                os.makedirs(os.path.join(upper, part))
        os.mkdir(os.path.join(self.dirs['/run'], 'lock'))
        for sticky in _STICKY_DIRS:
            os.chmod(self.path(sticky), 0o1777)

    def _link(self):
        """A veth pair: one end on the bridge, ``eth0`` in the host."""
        self.veth = bridge.VETH_PREFIX + secrets.token_hex(4)
        inner = self.veth + 'h'
        bridge.ip('link', 'add', self.veth, 'type', 'veth', 'peer', 'name',
                  inner, 'netns', self.netns)
        self.addCleanup(bridge.ip, 'link', 'del', self.veth, check=False)
        bridge.ip('link', 'set', 'dev', self.veth, 'alias',
                  bridge.ALIAS_PREFIX + str(os.getpid()))
        bridge.ip('link', 'set', self.veth, 'master', self.network.bridge,
                  'up')
        inside = ('-n', self.netns)
        bridge.ip(*inside, 'link', 'set', inner, 'name', 'eth0')
        bridge.ip(*inside, 'addr', 'add', '%s/%d' % (
            self.address, self.network.subnet.prefixlen), 'dev', 'eth0')
        bridge.ip(*inside, 'link', 'set', 'eth0', 'up')
        bridge.ip(*inside, 'link', 'set', 'lo', 'up')

    def _start_holder(self):
        """A process holding the host's mount and UTS namespaces open.

        Ready once it runs ``sleep``: ``unshare`` has then made every
        mount private, so what the host mounts stays in the host (a bind
        over ``/tmp`` before that would reach this machine's ``/tmp``).
        """
        self.holder = subprocess.Popen(
            ['nsenter', '--net=/run/netns/' + self.netns, '--', 'unshare',
             '--mount', '--uts', '--propagation', 'private', 'sleep',
             'infinity'], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        me = os.getpid()
        deadline = time.monotonic() + self.start_timeout
        while True:
            try:
                if _comm(self.holder.pid) == 'sleep' and all(
                        _ns(self.holder.pid, kind) != _ns(me, kind)
                        for kind in ('net', 'mnt', 'uts')):
                    return
            except FileNotFoundError:
                pass  # the holder just ended: poll() says so
            if self.holder.poll() is not None or \
                    time.monotonic() > deadline:
                raise bridge.HostError(
                    'no namespaces for host %s (holder %s)'
                    % (self.name, self.holder.returncode))
            time.sleep(0.02)

    def _mount_script(self):
        """The shell lines that make the host's private view.

        ``/tmp`` is bound last: every source is under
        :data:`bridge.ROOT`, which the host's own ``/tmp`` hides. Parents
        before children (sorted).
        """
        quote = shlex.quote
        lines = ['set -e']
        for parent in sorted(self.overlays):
            upper = self.overlays[parent]
            lines.append('mount -t overlay overlay -o %s %s' % (quote(
                'lowerdir=%s,upperdir=%s/upper,workdir=%s/work'
                % (parent, upper, upper)), quote(parent)))
        for mount in sorted(self.dirs, key=lambda m: (
                bridge.ROOT.startswith(m + '/'), m)):
            lines.append('mkdir -p %s' % quote(mount))
            lines.append('mount --bind %s %s' % (quote(self.dirs[mount]),
                                                 quote(mount)))
        lines.append('mount -t hugetlbfs -o pagesize=2M nodev %s'
                     % HUGEPAGES)
        lines.append('hostname %s' % quote(self.name))
        return '\n'.join(lines)

    def _mount(self):
        if not os.path.isdir(HUGEPAGES):
            raise bridge.HostError(
                '%s is missing: run tools/setup-hugepages.sh' % HUGEPAGES)
        done = self.run(['sh', '-c', self._mount_script()],
                        capture_output=True, text=True, timeout=60)
        if done.returncode:
            raise bridge.HostError('host %s: mounts failed: %s'
                                   % (self.name, done.stderr))

    def _stop_processes(self):
        """Every process of the host goes, the holder last among them."""
        bridge.empty_netns(self.netns)
        if self.holder is not None:
            self.holder.kill()
            self.holder.wait(10)

    def argv(self, cmd, cwd=None):
        """``cmd`` as run inside the host (in ``cwd``, a path in it).

        ``nsenter`` with the holder's namespaces: ``ip netns exec`` would
        make a mount namespace of its own, without the private dirs.
        """
        self._check_visible(cmd[0])
        ns = '/proc/%d/ns/' % self.holder.pid
        prefix = ['nsenter', '--net=%snet' % ns, '--mount=%smnt' % ns,
                  '--uts=%suts' % ns, '--']
        if cwd is not None:
            # Entering a mount namespace sets the directory to its root.
            prefix += ['env', '--chdir=%s' % cwd]
        return prefix + list(cmd)

    def _check_visible(self, program):
        """Refuse a program of this machine that the host's mounts hide.

        A build or checkout under ``/tmp`` (``SPDK_CACHE`` there, say)
        is not in the host, whose ``/tmp`` is its own: said here, not as
        ``nsenter``'s "No such file or directory".
        """
        if not os.path.isabs(program) or not os.path.exists(program):
            return
        try:
            seen = self.path(program)
        except ValueError:
            return  # not under a private directory: the machine's
        if not os.path.exists(seen):
            raise bridge.HostError(
                '%s is under a directory each test host has its own of '
                '(%s): host %s cannot run it; keep builds and the checkout '
                'elsewhere (SPDK_CACHE, XDG_CACHE_HOME)'
                % (program, ', '.join(PRIVATE_DIRS), self.name))

    def run(self, cmd, cwd=None, **kwargs):
        """``subprocess.run`` of ``cmd`` inside the host."""
        return subprocess.run(self.argv(cmd, cwd), **kwargs)

    def popen(self, cmd, cwd=None, **kwargs):
        """``subprocess.Popen`` of ``cmd`` inside the host."""
        return subprocess.Popen(self.argv(cmd, cwd), **kwargs)

    def path(self, path):
        """Where this machine sees ``path`` of the host (a private one)."""
        path = os.path.normpath(path)
        for mount in sorted(self.dirs, key=len, reverse=True):
            if path == mount or path.startswith(mount + '/'):
                return self.dirs[mount] + path[len(mount):]
        raise ValueError('%s is not private to host %s' % (path, self.name))

    def inside(self, real):
        """The host's path for this machine's ``real`` path.

        The inverse of :meth:`path`; a path outside the host's private
        directories is the same path in the host (``/usr``, the repo).
        """
        real = os.path.normpath(real)
        for mount, source in self.dirs.items():
            if real == source or real.startswith(source + '/'):
                return mount + real[len(source):]
        return real

    def exists(self, path):
        """Whether ``path`` exists as the host's own processes see it."""
        done = self.run(['sh', '-c', 'if test -e "$1"; then echo yes; '
                         'else echo no; fi', 'sh', path],
                        capture_output=True, text=True, timeout=30)
        if done.stdout.strip() not in ('yes', 'no'):
            raise bridge.HostError('host %s: test -e %s: %s'
                                   % (self.name, path, done.stderr))
        return done.stdout.strip() == 'yes'


class Lab(fixtures.Fixture):
    """A network and hosts of the given names on it (``hosts``, in order)."""

    def __init__(self, names):
        super().__init__()
        self.names = names

    def _setUp(self):
        self.network = self.useFixture(bridge.Network())
        self.hosts = [self.useFixture(Host(self.network, name))
                      for name in self.names]
