"""A second libvirt "host" on this machine, as a live migration target.

libvirt refuses to migrate a domain to the daemon it runs on, and a test
machine has one libvirtd. This fixture starts another ``libvirtd`` (with
its own ``virtlogd``) in a private mount namespace, held open by a
``sleep`` process, where its own directories are bind-mounted over
``/run/libvirt``, ``/var/lib/libvirt``, ``/var/cache/libvirt``,
``/var/log/libvirt`` and ``/etc/libvirt`` (a copy of this machine's, with
another ``host_uuid``: libvirt refuses a destination with the source's
UUID). Everything else (``/tmp``, the vhost sockets, hugepages) is shared,
as on one machine. Recipe and limits: ``../shared/spdk/PROBES.md``.

Its URI is ``qemu+unix:///system?socket=<run dir>/libvirt-sock``: the
first daemon reaches it there for a peer-to-peer migration. The other way
round, ``qemu:///system`` would be this daemon itself (its namespace
hides the first one's ``/run/libvirt``), so the first daemon is also
bind-mounted inside, at :attr:`LibvirtHost.first_uri`.

With ``hostname``, the daemon also gets its own UTS namespace and that
host name: Nova names a compute node (and its placement resource
provider) after libvirt's host name, so two nova-compute services on one
machine need daemons that report different ones.

With ``host`` (a :class:`testbed.hosts.Host` made with
:data:`HOST_DIRS` among its ``extra_dirs``), the daemons run inside that
host instead: its namespaces, its name, its own directories, and nothing
of this machine's libvirtd in reach. ``listen_tcp`` then also opens
libvirt's TCP port on the host's address, without authentication, for
the other hosts' daemons to migrate to it (``qemu+tcp://ADDRESS/system``):
a test network only, as a cloud would use TLS there.
"""

import os
import pwd
import shutil
import signal
import subprocess
import time
import uuid

import fixtures

try:
    import libvirt
except ImportError:  # the caller's setUp says what to install
    libvirt = None

MOUNTS = ('/run/libvirt', '/var/lib/libvirt', '/var/cache/libvirt',
          '/var/log/libvirt', '/etc/libvirt')
#: What a ``hosts.Host`` must have of its own for libvirtd, beyond the
#: ``/run`` and ``/var/log`` every host has.
HOST_DIRS = ('/var/lib/libvirt', '/var/cache/libvirt', '/etc/libvirt')
QEMU_USER = 'libvirt-qemu'


def _daemons(listen=False):
    """The shell lines starting virtlogd and libvirtd (``--listen``)."""
    return ['virtlogd -d -p /run/libvirt/virtlogd.pid',
            'libvirtd %s-d -p /run/libvirt/libvirtd.pid'
            % ('--listen ' if listen else '')]


class LibvirtHostError(RuntimeError):
    pass


def _namespace(pid):
    return os.readlink('/proc/%d/ns/mnt' % pid)


def _stop_pid(path, timeout=20):
    """SIGTERM the daemon whose pid file is ``path``; SIGKILL if it stays."""
    try:
        with open(path) as src:
            pid = int(src.read().strip())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not os.path.exists('/proc/%d' % pid):
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


class LibvirtHost(fixtures.Fixture):
    """libvirtd and virtlogd of a second "host"; ``uri`` reaches it."""

    def __init__(self, start_timeout=30, hostname=None, host=None,
                 listen_tcp=False):
        super().__init__()
        self.start_timeout = start_timeout
        self.hostname = hostname
        self.host = host
        self.listen_tcp = listen_tcp

    def _setUp(self):
        if os.getuid() != 0:
            raise LibvirtHostError('a second libvirtd needs root')
        if self.host is not None:
            self.dirs = {mount: self.host.path(mount) for mount in MOUNTS}
        else:
            self.workdir = self.useFixture(fixtures.TempDir()).path
            self.dirs = {mount: os.path.join(
                self.workdir, os.path.basename(mount) + (
                    '-etc' if mount == '/etc/libvirt' else ''))
                for mount in MOUNTS}
        shutil.copytree('/etc/libvirt', self.dirs['/etc/libvirt'],
                        symlinks=True, dirs_exist_ok=True)
        self.host_uuid = str(uuid.uuid4())
        with open(os.path.join(self.dirs['/etc/libvirt'], 'libvirtd.conf'),
                  'a') as conf:
            conf.write('\nhost_uuid = "%s"\n' % self.host_uuid)
            if self.listen_tcp:
                conf.write('listen_tls = 0\nlisten_tcp = 1\n'
                           'listen_addr = "%s"\nauth_tcp = "none"\n'
                           % self.host.address)
        for mount, path in self.dirs.items():
            os.makedirs(path, exist_ok=True)
            os.chmod(path, 0o755)
        qemu_dir = os.path.join(self.dirs['/var/lib/libvirt'], 'qemu')
        os.mkdir(qemu_dir, 0o750)
        user = pwd.getpwnam(QEMU_USER)
        os.chown(qemu_dir, user.pw_uid, user.pw_gid)
        self.run_dir = self.dirs['/run/libvirt']
        self.log_dir = self.dirs['/var/log/libvirt']
        self.uri = 'qemu+unix:///system?socket=%s' % os.path.join(
            self.run_dir, 'libvirt-sock')
        if self.host is not None:
            self.addCleanup(self._stop_daemons)
            self.host.run(['sh', '-c', '\n'.join(_daemons(self.listen_tcp))],
                          check=True, timeout=60)
            self._wait_ready()
            return
        # Where this daemon reaches the machine's own (a migration back).
        self.first_run_dir = os.path.join(self.workdir, 'first-run')
        os.mkdir(self.first_run_dir)
        self.first_uri = 'qemu+unix:///system?socket=%s' % os.path.join(
            self.first_run_dir, 'libvirt-sock')
        self._start()

    def _start(self):
        namespaces = ['--mount'] + (['--uts'] if self.hostname else [])
        self.holder = subprocess.Popen(
            ['unshare'] + namespaces + ['--propagation', 'private', 'sleep',
                                        'infinity'], start_new_session=True)
        self.addCleanup(self._stop_holder)
        deadline = time.monotonic() + 10
        while _namespace(self.holder.pid) == _namespace(os.getpid()):
            if time.monotonic() > deadline:
                raise LibvirtHostError('unshare made no mount namespace')
            time.sleep(0.02)
        script = ['set -e',
                  'mount --bind /run/libvirt %s' % self.first_run_dir]
        script += ['mount --bind %s %s' % (path, mount)
                   for mount, path in self.dirs.items()]
        enter = ['--mount=/proc/%d/ns/mnt' % self.holder.pid]
        if self.hostname:
            script.append('hostname %s' % self.hostname)
            enter.append('--uts=/proc/%d/ns/uts' % self.holder.pid)
        script += _daemons()
        self.addCleanup(self._stop_daemons)
        subprocess.run(['nsenter'] + enter + ['--', 'sh', '-c',
                                              '\n'.join(script)],
                       check=True, timeout=60)
        self._wait_ready()

    def _wait_ready(self):
        deadline = time.monotonic() + self.start_timeout
        while True:
            try:
                libvirt.open(self.uri).close()
                return
            except libvirt.libvirtError as err:
                if time.monotonic() > deadline:
                    raise LibvirtHostError('second libvirtd not answering '
                                           'at %s: %s' % (self.uri, err))
            time.sleep(0.2)

    def qemu_log(self, name):
        """The QEMU log of domain ``name`` on this host ('' if none)."""
        try:
            with open(os.path.join(self.log_dir, 'qemu', name + '.log'),
                      errors='replace') as src:
                return src.read()[-4000:]
        except OSError:
            return ''

    def _stop_daemons(self):
        """Domains still running go first: QEMU would outlive libvirtd."""
        try:
            conn = libvirt.open(self.uri)
        except libvirt.libvirtError:
            conn = None
        if conn is not None:
            for dom in conn.listAllDomains():
                if dom.isActive():
                    dom.destroy()
            conn.close()
        _stop_pid(os.path.join(self.run_dir, 'libvirtd.pid'))
        _stop_pid(os.path.join(self.run_dir, 'virtlogd.pid'))

    def _stop_holder(self):
        self.holder.kill()
        self.holder.wait(10)
