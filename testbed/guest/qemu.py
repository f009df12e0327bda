"""Boot the test guest under QEMU TCG on vhost-user-blk disks.

The guest boots the way production guests for SPDK vhost do: memory
backed by 2 MiB hugepages and shared (SPDK crashes on anything else, see
doc/source/admin/nova-driver.rst), so a test guest never passes where a
production one would crash its target. Results come back as marked lines
on the serial console (``@@RESULT key=value``, ``@@ERROR message``).

Two modes:

* ``Guest.run(script)``: boot, run the script, power off, return results.
* ``Guest.start()`` then ``Guest.execute(command)``: the guest stays up
  and runs one command at a time sent over the serial console, for tests
  that act on the storage while the guest runs.

Guest-side helpers (``gt_disk_info``, ``gt_write``...) are in lib.sh;
the functions at the bottom of this module build calls to them.
"""

import collections
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import time

import fixtures

from testbed.guest import initramfs

QEMU_ENV = 'SPDK_VHOST_TEST_QEMU'
DEFAULT_BOOT_TIMEOUT = 120
DEFAULT_TIMEOUT = 120
HUGEPAGE_KIB = 2048

_MARKED = re.compile(r'@@(?P<kind>[A-Z][A-Z-]*)(?: (?P<rest>.*))?$')
_END = re.compile(r'id=(?P<id>\d+) rc=(?P<rc>\d+)$')
MAX_COMMAND = 2000  # well under the tty's 4095-byte line limit


class GuestError(Exception):
    """The guest could not boot or run; carries the console's tail."""

    def __init__(self, message, console_tail=''):
        if console_tail:
            message = '%s\n--- guest console (tail) ---\n%s' % (
                message, console_tail)
        super().__init__(message)
        self.console_tail = console_tail


class GuestTimeout(GuestError):
    """The guest did not get there in time; QEMU was killed."""


class GuestScriptError(GuestError):
    """The guest ran but reported errors or a non-zero exit status."""

    def __init__(self, message, console_tail='', results=None):
        super().__init__(message, console_tail)
        self.results = results


class HugepagesUnavailable(GuestError):
    """The host cannot back the guest with hugepages, so we do not boot."""


VhostUserDisk = collections.namedtuple(
    'VhostUserDisk', 'socket num_queues reconnect')
VhostUserDisk.__new__.__defaults__ = (1, None)
VhostUserDisk.__doc__ = """A vhost-user-blk socket to attach.

reconnect: seconds between QEMU's reconnection attempts when the
backend goes away (None: no reconnection, QEMU stops using the disk).
"""


class Results(object):
    """What a script or command reported.

    values: ``@@RESULT key=value`` lines as a dict; errors: ``@@ERROR``
    messages; rc: the exit status; kernel_log: the guest's dmesg when it
    was dumped (on failure), else the kernel lines seen on the console.
    """

    def __init__(self, lines, rc):
        self.values = {}
        self.errors = []
        self.kernel_log = []
        self.rc = rc
        in_dmesg = False
        for line in lines:
            match = _MARKED.search(line)
            kind = match.group('kind') if match else None
            rest = (match.group('rest') or '') if match else ''
            if kind == 'DMESG-BEGIN':
                in_dmesg, self.kernel_log = True, []
            elif kind == 'DMESG-END':
                in_dmesg = False
            elif in_dmesg or kind is None:
                self.kernel_log.append(line)
            elif kind == 'RESULT':
                key, _sep, value = rest.partition('=')
                self.values[key] = value
            elif kind == 'ERROR':
                self.errors.append(rest)

    @property
    def ok(self):
        return self.rc == 0 and not self.errors

    def __getitem__(self, key):
        return self.values[key]

    def __repr__(self):
        return '<Results rc=%s values=%r errors=%r>' % (
            self.rc, self.values, self.errors)


def _meminfo(path):
    values = {}
    with open(path) as f:
        for line in f:
            key, _sep, value = line.partition(':')
            values[key] = int(value.split()[0])
    return values


def hugetlbfs_mount(mounts='/proc/mounts'):
    """First hugetlbfs mount point with 2 MiB pages, or None."""
    with open(mounts) as f:
        for line in f:
            fields = line.split()
            if fields[2] != 'hugetlbfs':
                continue
            options = fields[3].split(',')
            if 'pagesize=1024M' not in options and \
                    'pagesize=1G' not in options:
                return fields[1]
    return None


def check_hugepages(memory_mib, backend='memfd', meminfo='/proc/meminfo',
                    mounts='/proc/mounts'):
    """Refuse early, with a fix, when the guest can't get hugepages.

    Returns the hugetlbfs mount point (None when not mounted: the memfd
    backend does not need it).
    """
    hint = 'run tools/setup-hugepages.sh as root'
    if memory_mib * 1024 % HUGEPAGE_KIB:
        raise HugepagesUnavailable('guest memory %d MiB is not a multiple '
                                   'of 2 MiB hugepages' % memory_mib)
    info = _meminfo(meminfo)
    if info.get('Hugepagesize') != HUGEPAGE_KIB:
        raise HugepagesUnavailable(
            'default hugepage size is %s kB, the guest needs 2048 kB '
            '(hugepagesz=2M)' % info.get('Hugepagesize'))
    needed = memory_mib * 1024 // HUGEPAGE_KIB
    free = info.get('HugePages_Free', 0) - info.get('HugePages_Rsvd', 0)
    if free < needed:
        raise HugepagesUnavailable(
            'guest needs %d free 2 MiB hugepages, the host has %d '
            '(HugePages_Free - HugePages_Rsvd): %s' % (needed, free, hint))
    mount = hugetlbfs_mount(mounts)
    if mount is None and backend == 'file':
        raise HugepagesUnavailable('no 2 MiB hugetlbfs mounted: ' + hint)
    return mount


def find_qemu():
    qemu = os.environ.get(QEMU_ENV) or shutil.which('qemu-system-x86_64')
    if not qemu:
        raise GuestError('qemu-system-x86_64 not found (install '
                         'qemu-system-x86 or set %s)' % QEMU_ENV)
    return qemu


class Console(object):
    """Collects QEMU's serial output line by line in a reader thread."""

    def __init__(self, stream):
        self.lines = []
        self.closed = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(stream,),
                                        daemon=True)
        self._thread.start()

    def _read(self, stream):
        for raw in iter(stream.readline, b''):
            line = raw.decode('utf-8', 'replace').rstrip('\r\n')
            with self._cond:
                self.lines.append(line.replace('\r', ''))
                self._cond.notify_all()
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def wait_for(self, start, predicate, deadline):
        """Index of the first line from start matching predicate.

        None if the console closed (QEMU exited) or the deadline passed.
        """
        with self._cond:
            pos = start
            while True:
                while pos < len(self.lines):
                    if predicate(self.lines[pos]):
                        return pos
                    pos += 1
                remaining = deadline - time.monotonic()
                if self.closed or remaining <= 0:
                    return None
                self._cond.wait(remaining)

    def join(self, timeout):
        self._thread.join(timeout)

    def tail(self, count=40):
        with self._cond:
            return '\n'.join(self.lines[-count:])


def end_rc(line):
    """The exit status in a command's ``@@END id=N rc=RC`` line."""
    return int(_END.match(_MARKED.search(line).group('rest')).group('rc'))


def marker(kind, rest_pattern=None):
    def predicate(line):
        match = _MARKED.search(line)
        if not match or match.group('kind') != kind:
            return False
        return rest_pattern is None or bool(
            re.match(rest_pattern, match.group('rest') or ''))
    return predicate


class Guest(object):
    """A tiny Linux guest on vhost-user-blk disks, under QEMU TCG.

    Disks appear in the guest as vda, vdb... in the order given (each is
    put at a fixed PCI slot, 0x10 + index, reported as vdX.pci).
    """

    def __init__(self, disks, memory_mib=256, vcpus=1, workdir=None,
                 memory_backend='memfd', boot_timeout=DEFAULT_BOOT_TIMEOUT,
                 kernel=None, cmdline_extra=()):
        if memory_backend not in ('memfd', 'file'):
            raise ValueError('memory_backend must be memfd or file')
        self.disks = [d if isinstance(d, VhostUserDisk) else VhostUserDisk(d)
                      for d in disks]
        self.memory_mib = memory_mib
        self.vcpus = vcpus
        self.memory_backend = memory_backend
        self.boot_timeout = boot_timeout
        self.kernel = kernel
        self.cmdline_extra = tuple(cmdline_extra)
        self._own_workdir = workdir is None
        self.workdir = workdir or tempfile.mkdtemp(prefix='guest-')
        self.qmp_socket = os.path.join(self.workdir, 'qmp.sock')
        self.boot_seconds = None
        self._proc = None
        self._console = None
        self._next_id = 0

    # -- process -------------------------------------------------------

    def _memory_args(self, hugetlbfs):
        size = '%dM' % self.memory_mib
        if self.memory_backend == 'memfd':
            backend = ('memory-backend-memfd,id=mem,size=%s,hugetlb=on,'
                       'hugetlbsize=2M,share=on' % size)
        else:
            backend = ('memory-backend-file,id=mem,size=%s,mem-path=%s,'
                       'share=on,prealloc=on' % (size, hugetlbfs))
        return ['-m', size, '-object', backend,
                '-numa', 'node,memdev=mem']

    def _disk_args(self):
        args = []
        for index, disk in enumerate(self.disks):
            chardev = 'socket,id=vhost%d,path=%s' % (index, disk.socket)
            if disk.reconnect:
                chardev += ',reconnect=%d' % disk.reconnect
            args += ['-chardev', chardev,
                     '-device', 'vhost-user-blk-pci,chardev=vhost%d,'
                     'num-queues=%d,addr=0x%x,id=disk%d'
                     % (index, disk.num_queues, 0x10 + index, index)]
        return args

    def command_line(self, initrd, hugetlbfs=None):
        """The QEMU command line (public so failures can show it)."""
        kernel = self.kernel or initramfs.find_kernel()
        return ([find_qemu(), '-accel', 'tcg', '-nodefaults', '-nographic',
                 '-no-reboot', '-smp', str(self.vcpus)]
                + self._memory_args(hugetlbfs)
                + ['-kernel', kernel.image, '-initrd', initrd,
                   '-append', initramfs.kernel_cmdline(
                       len(self.disks), self.cmdline_extra),
                   '-chardev', 'stdio,id=console,signal=off',
                   '-serial', 'chardev:console', '-monitor', 'none',
                   '-qmp', 'unix:%s,server=on,wait=off' % self.qmp_socket]
                + self._disk_args())

    def _spawn(self, script):
        if self._proc is not None:
            raise GuestError('guest already started')
        hugetlbfs = check_hugepages(self.memory_mib, self.memory_backend)
        initrd = initramfs.make_initrd(
            os.path.join(self.workdir, 'initrd'), script, self.kernel)
        self._stderr_path = os.path.join(self.workdir, 'qemu.stderr')
        with open(self._stderr_path, 'wb') as stderr:
            self._proc = subprocess.Popen(
                self.command_line(initrd, hugetlbfs),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
        self._console = Console(self._proc.stdout)
        self._started_at = time.monotonic()

    def failure_tail(self):
        """The console's last lines and QEMU's stderr, for failures."""
        tail = self._console.tail() if self._console else ''
        try:
            with open(self._stderr_path) as f:
                stderr = f.read().strip()
        except (AttributeError, OSError):
            stderr = ''
        if stderr:
            tail += '\n--- qemu stderr ---\n' + stderr
        return tail

    def _wait(self, start, predicate, timeout, what):
        """Index of the marked line, else kill QEMU and raise.

        Killing on every failure means a stuck guest never outlives a test.
        """
        pos = self._console.wait_for(start, predicate,
                                     time.monotonic() + timeout)
        if pos is not None:
            return pos
        exited = self._console.closed
        self.kill()
        tail = self.failure_tail()
        if exited:
            raise GuestError('guest exited before %s (qemu rc=%s)'
                             % (what, self._proc.returncode), tail)
        raise GuestTimeout('guest not at %s after %d s; killed'
                           % (what, timeout), tail)

    def _wait_ready(self, kind):
        pos = self._wait(0, marker(kind), self.boot_timeout,
                         'boot (%s)' % kind)
        self.boot_seconds = time.monotonic() - self._started_at
        return pos

    def kill(self):
        """Stop QEMU now (idempotent) and reap it."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        self._proc.stdin.close()
        self._console.join(10)
        self._proc.stdout.close()

    def cleanup(self):
        self.kill()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    @property
    def running(self):
        return self._proc is not None and self._proc.poll() is None

    @property
    def console(self):
        return list(self._console.lines) if self._console else []

    # -- one-shot mode -------------------------------------------------

    def run(self, script, timeout=DEFAULT_TIMEOUT, check=True):
        """Boot, run script (sh, with the lib.sh helpers), power off.

        Raises GuestScriptError when check and the script failed.
        """
        try:
            self._spawn(script)
            ready = self._wait_ready('READY')
            done = self._wait(ready, marker('DONE'), timeout,
                              'the end of the script')
            rc = int(_MARKED.search(self._console.lines[done])
                     .group('rest').partition('=')[2])
            results = Results(self._console.lines[ready + 1:done], rc)
            try:
                self._proc.wait(30)
            except subprocess.TimeoutExpired:
                pass  # powered off but QEMU lingers: killed below
        finally:
            self.kill()
        if check and not results.ok:
            raise GuestScriptError(
                'guest script failed: rc=%d, errors=%r'
                % (results.rc, results.errors),
                '\n'.join(results.kernel_log[-40:]), results)
        return results

    # -- long-running mode ---------------------------------------------

    def start(self):
        """Boot and wait until the guest takes commands (see execute)."""
        self._spawn('gt_serve\n')
        self._serve_pos = self._wait_ready('SERVING')

    def execute(self, command, timeout=DEFAULT_TIMEOUT, check=True):
        """Run one shell command line in the running guest.

        The command must be one line (the console is line-buffered).
        """
        if '\n' in command or len(command) > MAX_COMMAND:
            raise ValueError('guest commands must be one line of at most '
                             '%d characters' % MAX_COMMAND)
        if not self.running:
            raise GuestError('guest is not running', self.failure_tail())
        self._next_id += 1
        cmd_id = self._next_id
        start = len(self._console.lines)
        self._send('%d %s' % (cmd_id, command))
        end = self._wait(start, marker('END', r'id=%d ' % cmd_id),
                         timeout, 'the end of %r' % command)
        results = Results(self._console.lines[start:end],
                          end_rc(self._console.lines[end]))
        if check and not results.ok:
            raise GuestScriptError(
                'guest command %r failed: rc=%d, errors=%r'
                % (command, results.rc, results.errors),
                self._console.tail(), results)
        return results

    def _send(self, line):
        try:
            self._proc.stdin.write(line.encode() + b'\n')
            self._proc.stdin.flush()
        except OSError as err:
            raise GuestError('guest console closed: %s' % err,
                             self.failure_tail()) from err

    def kernel_log(self):
        """The running guest's dmesg, for failure messages."""
        return self.execute('gt_dump_dmesg').kernel_log

    def stop(self, timeout=30):
        """Power the guest off cleanly, killing QEMU if it hangs."""
        if self.running:
            try:
                self._send('0 poweroff -f')
            except GuestError:
                pass  # died on its own meanwhile: nothing left to stop
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        self.kill()


class GuestFixture(fixtures.Fixture):
    """A running guest (long-running mode) for the length of a test."""

    def __init__(self, disks, **kwargs):
        super().__init__()
        self._disks = disks
        self._kwargs = kwargs

    def _setUp(self):
        workdir = self.useFixture(fixtures.TempDir()).path
        self.guest = Guest(self._disks, workdir=workdir, **self._kwargs)
        self.addCleanup(self.guest.stop)
        self.guest.start()


# -- building guest commands ----------------------------------------------

def pattern_bytes(token, length):
    """The bytes gt_write puts on disk: "token\\n" repeated, cut to length.

    The host side of the check: compare with what lands in the backend.
    """
    unit = (token + '\n').encode()
    return (unit * (length // len(unit) + 1))[:length]


def _call(*args):
    return ' '.join(shlex.quote(str(a)) for a in args)


def disk_info(dev):
    """Reports dev.size (bytes), dev.queues and dev.pci."""
    return _call('gt_disk_info', dev)


def all_disks():
    """Reports disk_info for every vdX and disks=vda,vdb,..."""
    return 'gt_disks'


def write_pattern(dev, offset, length, token):
    """Writes pattern_bytes(token, length) at offset (O_DIRECT).

    Reports dev.wrote@offset = sha256 of the data.
    """
    return _call('gt_write', dev, offset, length, token)


def read_back(dev, offset, length):
    """Reports dev.read@offset = sha256 of what is on disk (O_DIRECT)."""
    return _call('gt_read', dev, offset, length)


def time_read(dev, offset, length):
    """Reports dev.read_ms@offset: an O_DIRECT read's milliseconds.

    Timed on the guest's clock (10 ms steps) around the read alone.
    """
    return _call('gt_time_read', dev, offset, length)


def check_pattern(dev, offset, length, token):
    """Write, read back and compare in the guest: dev.verify@offset=ok."""
    return _call('gt_check', dev, offset, length, token)


def writer_start(dev, offset, length, token, blocks=1, passes=False):
    """Keep writing a pattern in the background, until writer_stop.

    For tests that restart or change the storage under a writing guest;
    one writer per disk, several disks may have one. It rewrites
    ``length`` bytes at ``offset``; with ``blocks``, the next of that
    many ``length``-byte blocks from ``offset`` each time (wrapping
    around, a failed write retried in place), so that afterwards the
    first ``writer.writes`` blocks hold every acknowledged write. With
    ``passes`` each pass over the blocks writes its own token
    (``writer.expected`` says what the blocks must then hold).
    """
    return _call('gt_writer_start', dev, offset, length, token, blocks,
                 *(('passes',) if passes else ()))


def writer_status(dev=None):
    """Reports writer.writes, writer.failures and writer.max_gap_ms.

    max_gap_ms is the longest time without a completed write since the
    writer started (the guest's monotonic clock, 10 ms steps): the I/O
    stall a restart or upgrade under it caused. dev: that disk's writer,
    else all of them (counts added up, the longest gap).
    """
    return _call('gt_writer_status', *_dev(dev))


def writer_stop(dev=None):
    """Stops the writer(s) after the current write; reports as status."""
    return _call('gt_writer_stop', *_dev(dev))


def _dev(dev):
    return (dev,) if dev else ()


def script(*commands):
    """A /run.sh that stops at the first failing command."""
    return 'set -e\n' + ''.join(c + '\n' for c in commands)
