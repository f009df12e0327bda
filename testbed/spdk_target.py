"""A real SPDK target process as a test fixture, started like a service.

Each fixture is one SPDK application (``spdk_tgt``, ``vhost`` or
``nvmf_tgt``) with its own RPC socket, vhost socket directory and hugepage
files, in a temporary directory; it can be stopped, SIGKILLed and
restarted with ``--json`` of a saved config, as a service manager or a
crash would. A target that crashes fails the test that was running
(:class:`TargetDied`, when the test stops or kills it), and its core
file is kept in :data:`CORE_DIR`.

CPU on a small test machine: a polling reactor takes a whole core whether
or not it has work, and on two cores a test guest under TCG needs the
other one. So every target polls on core 0 by default (``-m 0x1``, with
the core locks off so that several targets share it), and the roles that
allow it run in interrupt mode, idle at under 1%: see
``../shared/spdk/README.md`` for the figures. A target that polls runs
at :data:`POLLING_NICE`, so that its spinning yields to the guests and
services of the test that needs it, and of the lane beside it.
"""

import grp
import os
import shutil
import signal
import subprocess
import time

import fixtures

from os_brick_connector import numa
from testbed import process_group
from testbed import rpc_raw
from testbed import spdk_build

#: Hugepage memory each target reserves at start (``-s``), in MiB.
MEM_MB = 256
#: The umask the service units start the target with (``UMask=``): with
#: the setgid socket directory, every vhost socket is born in that
#: directory's group with group read-write, after a restart too.
SERVICE_UMASK = 0o007
VHOST_APPS = ('spdk_tgt', 'vhost')
#: The nice value of a target whose reactor polls. Measured on the
#: 2-core machine with both cores kept busy by two other processes, a
#: TCG guest's 4k reads at queue depth 1 through a polling ``spdk_tgt``
#: took 0.6 ms at nice 0, 3.3 ms at 5, 5.5 ms at 10 and 19 ms at 19,
#: while deep queues kept their rate up to nice 10 (the throughput jobs
#: ended in the same time at every value). 5 gives back most of a
#: spinning core to the rest of the suite; 19 starved SPDK itself (a
#: vhost session not started after seconds, see ``spdk/README.md``).
POLLING_NICE = 5
#: Where a target run in a ``hosts.Host`` has its directory, in the host.
HOST_WORKDIR = '/var/lib/spdk'
#: Where the core file of a target that crashed is kept (it runs in its
#: own directory, which goes with the test): ``$SPDK_TEST_CORES``, else
#: ``.test-cores`` in the checkout, which a CI run keeps.
CORE_DIR = os.environ.get('SPDK_TEST_CORES') or os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    '.test-cores')


class TargetError(RuntimeError):
    pass


class TargetDied(TargetError):
    """The target crashed: it died by a signal that dumps core."""


#: The signals a crash ends a process with (SIGKILL and SIGTERM are sent:
#: by a test, the upgrade command or a service manager).
CRASH_SIGNALS = frozenset((signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS,
                           signal.SIGILL, signal.SIGFPE, signal.SIGTRAP,
                           signal.SIGSYS))


class SpdkTarget(fixtures.Fixture):
    """One SPDK target process in a temp dir; everything gone at cleanUp.

    ``lcores`` (DPDK's ``--lcores`` map, e.g. ``'0@0,1@1,2@0,3@1'``) gives
    a target more reactors than the machine has cores, each a thread on a
    real CPU: tests of reactor placement use it with a fake sysfs.

    ``socket_group`` makes the vhost socket directory as
    etc/tmpfiles.d does (mode 2770, that group; its parents stay
    private) and ``umask`` is the process's (``SERVICE_UMASK`` is the
    units'); without them the target runs as a shell would start it.

    ``auto_examine=False`` starts a storage target serving replicas of
    replicated volumes: no bdev is examined unless named with
    ``bdev_examine`` (:meth:`aio_lvstore` names its base), so its raid
    module never claims an lvol that carries a compute host's RAID
    superblock. A saved config keeps both settings for the next start.

    ``service=True`` starts it with the options the project's units add
    (``etc/systemd/``): ``--json-ignore-init-errors``, so that an entry
    of the saved config that fails (a storage node that is down) does not
    keep the whole target, and every other guest's storage, from coming
    back.

    ``host`` (a ``testbed.hosts.Host``) runs the target inside that host,
    its directory under the host's own ``/var/lib/spdk``: the command
    line names the host's paths, the fixture itself uses this machine's
    (``workdir``, ``socket_path``, ``log_path``; a ``json_config`` too).
    """

    def __init__(self, app='spdk_tgt', core_mask='0x1', lcores=None,
                 interrupt_mode=False, json_config=None, mem_mb=MEM_MB,
                 start_timeout=30, name='spdk', socket_group=None,
                 umask=None, tree=None, auto_examine=True, host=None,
                 service=False):
        super().__init__()
        if app not in spdk_build.APPS:
            raise ValueError('not an SPDK application: %r' % app)
        self.app = app
        self.core_mask = core_mask
        self.lcores = lcores
        self.interrupt_mode = interrupt_mode
        # A saved config (--json) loaded at every start when it exists.
        self.json_config = json_config
        self.mem_mb = mem_mb
        self.start_timeout = start_timeout
        self.name = name
        self.socket_group = socket_group
        self.umask = umask
        # A built SPDK tree (spdk_build.tree): default spdk_build's.
        self.tree = tree
        self.auto_examine = auto_examine
        self.host = host
        self.service = service
        self.process = None
        # The pids of crashes told already: a test fails once per crash.
        self._told = set()

    def _setUp(self):
        rootdir = self.host.path(HOST_WORKDIR) if self.host else None
        self.workdir = self.useFixture(fixtures.TempDir(rootdir)).path
        self.socket_path = os.path.join(self.workdir, 'spdk.sock')
        self.vhost_dir = os.path.join(self.workdir, 'vhost')
        os.mkdir(self.vhost_dir)
        if self.socket_group is not None:
            os.chown(self.vhost_dir, -1,
                     grp.getgrnam(self.socket_group).gr_gid)
            os.chmod(self.vhost_dir, 0o2770)
        self.log_path = os.path.join(self.workdir, '%s.log' % self.name)
        self.addCleanup(self._stop)
        self.start()

    @property
    def polls(self):
        """Whether the reactor spins (``spdk_tgt`` always does)."""
        return not self.interrupt_mode or self.app == 'spdk_tgt'

    def command(self):
        # A crash leaves a core file in the target's directory.
        cmd = ['prlimit', '--core=unlimited', '--']
        if self.polls:
            cmd += ['nice', '-n', str(POLLING_NICE)]
        cmd += [spdk_build.app_path(self.app, self.tree), '-r',
                self.seen(self.socket_path),
                '-s', str(self.mem_mb), '--disable-cpumask-locks']
        if self.lcores:
            cmd += ['--lcores', self.lcores]
        else:
            cmd += ['-m', self.core_mask]
        if self.app in VHOST_APPS:
            cmd += ['-S', self.seen(self.vhost_dir)]
        if self.interrupt_mode:
            cmd.append('--interrupt-mode')
        if self.json_config and os.path.exists(self.json_config):
            cmd += ['--json', self.seen(self.json_config)]
            if self.service:
                cmd.append('--json-ignore-init-errors')
        elif not self.auto_examine:
            # bdev_set_options is refused once the subsystems started.
            cmd.append('--wait-for-rpc')
        return cmd

    def seen(self, path):
        """``path`` as the target sees it: in its host, if it has one."""
        return self.host.inside(path) if self.host else path

    def start(self):
        """Start the target on this fixture's paths and wait for its RPCs.

        The log is appended to, so it tells the whole story of a test that
        restarts the target.
        """
        self._forget_socket()
        cmd = self.command()
        with open(self.log_path, 'ab') as log:
            log.write(('--- %s\n' % ' '.join(cmd)).encode())
            log.flush()
            self.process = subprocess.Popen(
                self.host.argv(cmd, cwd=self.seen(self.workdir))
                if self.host else cmd, cwd=self.workdir,
                stdout=log, stderr=subprocess.STDOUT,
                env=spdk_build.app_env(self.tree), start_new_session=True,
                umask=-1 if self.umask is None else self.umask)
        self._wait_ready()
        if '--wait-for-rpc' in self.process.args:
            self.rpc('bdev_set_options', {'bdev_auto_examine': False})
            self.rpc('framework_start_init')
            self.rpc('framework_wait_init')

    def stop(self):
        """Stop cleanly (SIGTERM; SIGKILL after 20 s), as systemd does."""
        self._stop()
        self._forget_socket()

    def kill(self):
        """SIGKILL the target alone, as a crash ends it.

        Its vhost sockets stay behind, as a crashed target's do.
        :class:`TargetDied` if it had crashed already.
        """
        crash = self.crash_report()
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        self._forget_socket()
        if crash:
            raise TargetDied(crash)

    def restart(self, crash=True):
        """SIGKILL (or stop) the target, then start it on the same paths."""
        if crash:
            self.kill()
        else:
            self.stop()
        self.start()

    def replaced_by(self, process, tree=None):
        """Go on with ``process``, which now serves on our paths.

        Another started it (an upgrade, from ``tree``); the process it
        replaced has ended: reaped here, and had it crashed, that fails
        the test.
        """
        crash = self.crash_report()
        self.process = process
        self.tree = tree or self.tree
        if crash:
            raise TargetDied(crash)

    @property
    def pid(self):
        return self.process.pid

    def _forget_socket(self):
        # A stale RPC socket must not make _wait_ready talk to nobody.
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)

    def _wait_ready(self):
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise TargetError('%s exited with %s: %s' % (
                    self.app, self.process.returncode, self.log()))
            if os.path.exists(self.socket_path):
                try:
                    response = self.call('spdk_get_version')
                except OSError:
                    response = None
                if response and 'result' in response:
                    return
            time.sleep(0.05)
        raise TargetError('%s did not answer within %ss: %s' % (
            self.app, self.start_timeout, self.log()))

    def log(self, tail=4000):
        with open(self.log_path, errors='replace') as src:
            return src.read()[-tail:]

    def _stop(self):
        if self.process is not None:
            crash = self.crash_report()
            process_group.stop(self.process, 20)
            if crash:
                raise TargetDied(crash)

    def crash_report(self):
        """What to say if the target crashed; None while it runs.

        Its core file, if the kernel wrote one in the target's directory
        (``core_pattern`` ``core``), is moved to :data:`CORE_DIR`.
        """
        code = self.process.poll()
        if (code is None or -code not in CRASH_SIGNALS
                or self.process.pid in self._told):
            return None
        self._told.add(self.process.pid)
        core = self._keep_core()
        return '%s %s (pid %d) died with %s during this test; %s. %s' % (
            self.app, self.name, self.process.pid,
            signal.Signals(-code).name,
            'core kept as %s' % core if core else 'no core file in its '
            'directory', self.log())

    def _keep_core(self):
        for name in ('core', 'core.%d' % self.process.pid):
            path = os.path.join(self.workdir, name)
            if os.path.exists(path):
                os.makedirs(CORE_DIR, exist_ok=True)
                kept = os.path.join(CORE_DIR, '%s-%s-%d.core' % (
                    self.name, self.app, self.process.pid))
                shutil.move(path, kept)
                return kept
        return None

    def call(self, method, params=None):
        """The whole JSON-RPC response dict, as the target sent it."""
        return rpc_raw.call(self.socket_path, method, params)

    def rpc(self, method, params=None):
        """The ``result`` of an RPC that must succeed."""
        response = self.call(method, params)
        if 'error' in response:
            raise TargetError('%s %s: %s' % (method, params,
                                             response['error']))
        return response['result']

    def aio_lvstore(self, lvs_name='lvs0', size_mib=1024, block_size=4096,
                    cluster_mib=1):
        """An lvol store on a sparse file: thin, and costs no hugepages.

        An lvstore on a malloc bdev would keep an interrupt-mode reactor
        spinning and hold its whole size in hugepages; AIO does neither.
        Returns the lvstore's UUID.
        """
        with open(self._aio_path(lvs_name), 'wb') as image:
            image.truncate(size_mib << 20)
        bdev = self._aio_base(lvs_name, block_size)
        return self.rpc('bdev_lvol_create_lvstore', {
            'bdev_name': bdev, 'lvs_name': lvs_name,
            'cluster_sz': cluster_mib << 20})

    def reopen_aio_lvstore(self, lvs_name='lvs0', block_size=4096):
        """Load an :meth:`aio_lvstore` again, after a start without config."""
        self._aio_base(lvs_name, block_size)
        self.rpc('bdev_wait_for_examine')

    def _aio_path(self, lvs_name):
        return os.path.join(self.workdir, '%s.img' % lvs_name)

    def _aio_base(self, lvs_name, block_size):
        """The aio bdev under lvstore ``lvs_name``; its name."""
        bdev = '%s_base' % lvs_name
        self.rpc('bdev_aio_create', {'name': bdev,
                                     'filename': self.seen(
                                         self._aio_path(lvs_name)),
                                     'block_size': block_size})
        if not self.auto_examine:
            # Only the lvstore's base: its lvols stay unexamined.
            self.rpc('bdev_examine', {'name': bdev})
        return bdev


def nova_reserved_huge_pages(mem_mb=MEM_MB):
    """Nova's ``reserved_huge_pages`` for a target of ``mem_mb`` on core 0.

    The compute driver refuses to start with less (its start-up check).
    """
    page_kb = numa.default_hugepage_kb()
    [(node, count)] = numa.hugepages_per_node(mem_mb, page_kb, [0]).items()
    return 'node:%d,size:%d,count:%d' % (node, page_kb, count)


def wait_nvme_enabled(client, name, timeout=30):
    """Wait until NVMe-oF controller ``name`` is connected again.

    Every path of it ``enabled`` on ``client``'s target; TimeoutError
    says the states it was left in.
    """
    deadline = time.monotonic() + timeout
    while True:
        [ctrl] = client.call('bdev_nvme_get_controllers', {'name': name})
        states = [c.get('state') for c in ctrl['ctrlrs']]
        if states == ['enabled']:
            return
        if time.monotonic() >= deadline:
            raise TimeoutError('NVMe controller %s still %s after %ss'
                               % (name, states, timeout))
        time.sleep(0.2)


def fill_lvstore(call, lvs_name, leave_mib):
    """A thick lvol ``filler`` takes the store's room but ``leave_mib``.

    ``call(method, params)``: a target's RPC (``SpdkTarget.rpc``, or a
    client's ``call``). Returns the filler's UUID.
    """
    store = call('bdev_lvol_get_lvstores', {'lvs_name': lvs_name})[0]
    free_mib = store['free_clusters'] * store['cluster_size'] // (1 << 20)
    return call('bdev_lvol_create', {
        'lvol_name': 'filler', 'size_in_mib': free_mib - leave_mib,
        'lvs_name': lvs_name, 'thin_provision': False})


def bdev_names(client):
    """The name of every bdev on ``client``'s target.

    Asked with ``bdev_get_iostat``, which reports names and counters
    only: on SPDK v26.05 a ``bdev_get_bdevs`` of every bdev can crash a
    target that is detaching an NVMe controller (it follows a namespace
    pointer the detach has freed, to report memory domains).
    """
    return [bdev['name'] for bdev in client.call('bdev_get_iostat')['bdevs']]
