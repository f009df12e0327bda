"""Build the test guest's initramfs: busybox, virtio modules and /init.

The archive is built in Python (no root, no mount, no cpio binary) as a
gzip'd newc cpio and cached, keyed by a hash of everything that goes in,
so a test run builds it once. Each run's script is a second small archive
appended to the cached one: the kernel unpacks concatenated archives in
order, so the cache never changes per run. The result is plain
kernel + initrd + cmdline, usable by QEMU directly or by a libvirt domain.
"""

import collections
import glob
import gzip
import hashlib
import io
import lzma
import os
import pwd
import re
import shutil
import stat
import struct
import subprocess
import tempfile

CACHE_ENV = 'SPDK_VHOST_TEST_CACHE'
KERNEL_ENV = 'SPDK_VHOST_TEST_KERNEL'
BUSYBOX_ENV = 'SPDK_VHOST_TEST_BUSYBOX'
# Space-separated host programs (e.g. "fio") to add, with their libraries.
EXTRAS_ENV = 'SPDK_VHOST_TEST_EXTRAS'

# Bump when the archive layout changes, so old cache entries are unused.
FORMAT_VERSION = 1

# Module name -> kconfig symbol: what virtio-blk over virtio-pci needs.
WANTED_MODULES = (
    ('virtio_pci', 'CONFIG_VIRTIO_PCI'),
    ('virtio_blk', 'CONFIG_VIRTIO_BLK'),
)

_HERE = os.path.dirname(os.path.abspath(__file__))
INIT_SCRIPT = os.path.join(_HERE, 'init.sh')
GUEST_LIB = os.path.join(_HERE, 'lib.sh')

_DIRS = ('bin', 'dev', 'etc', 'lib', 'lib/modules', 'proc', 'root', 'sys',
         'tmp')
_MODULE_SUFFIX = re.compile(r'\.ko(\.xz|\.gz|\.zst)?$')
_NEWC_MAGIC = b'070701'
_TRAILER = 'TRAILER!!!'


class InitramfsError(Exception):
    """The host lacks something the guest needs (kernel, busybox...)."""


Kernel = collections.namedtuple('Kernel',
                                'version image modules_dir config')


def _version_key(version):
    return [int(p) if p.isdigit() else p
            for p in re.split(r'(\d+)', version)]


def find_kernel(image=None):
    """The guest kernel: $SPDK_VHOST_TEST_KERNEL or the newest in /boot.

    Not the running kernel: CI hosts often run a kernel whose image and
    modules are not on disk, while linux-image-amd64 puts one in /boot.
    """
    image = image or os.environ.get(KERNEL_ENV)
    if not image:
        images = glob.glob('/boot/vmlinuz-*')
        if not images:
            raise InitramfsError(
                'no kernel in /boot (install linux-image-amd64) and %s '
                'not set' % KERNEL_ENV)
        image = max(images, key=lambda p: _version_key(p.split('-', 1)[1]))
    name = os.path.basename(image)
    if not name.startswith('vmlinuz-'):
        raise InitramfsError('cannot tell the version of kernel %s: expected '
                             'a vmlinuz-<version> file name' % image)
    version = name[len('vmlinuz-'):]
    modules_dir = os.path.join('/lib/modules', version)
    if not os.path.isfile(os.path.join(modules_dir, 'modules.dep')):
        raise InitramfsError('kernel %s has no %s/modules.dep'
                             % (version, modules_dir))
    config = os.path.join(os.path.dirname(image), 'config-' + version)
    return Kernel(version, image, modules_dir,
                  config if os.path.isfile(config) else None)


def _has_interpreter(data):
    """True if an ELF64 little-endian binary asks for a dynamic loader."""
    if data[:4] != b'\x7fELF' or data[4:6] != b'\x02\x01':
        return False
    phoff, = struct.unpack_from('<Q', data, 0x20)
    phentsize, phnum = struct.unpack_from('<HH', data, 0x36)
    for i in range(phnum):
        p_type, = struct.unpack_from('<I', data, phoff + i * phentsize)
        if p_type == 3:  # PT_INTERP
            return True
    return False


def find_busybox(path=None):
    """Path of a static busybox, since the initramfs has no libc."""
    path = path or os.environ.get(BUSYBOX_ENV) or shutil.which('busybox')
    if not path:
        raise InitramfsError('busybox not found (install busybox-static '
                             'or set %s)' % BUSYBOX_ENV)
    with open(path, 'rb') as f:
        if _has_interpreter(f.read()):
            raise InitramfsError('%s is dynamically linked; the guest needs '
                                 'busybox-static' % path)
    return path


def _kernel_config(kernel):
    """kconfig symbol -> 'y' / 'm' for the kernel, {} if unknown."""
    if not kernel.config:
        return {}
    values = {}
    with open(kernel.config) as f:
        for line in f:
            key, sep, value = line.strip().partition('=')
            if sep and key.startswith('CONFIG_'):
                values[key] = value
    return values


def module_name(path):
    """Kernel module name of a .ko path (modprobe treats - and _ alike)."""
    return _MODULE_SUFFIX.sub('', os.path.basename(path)).replace('-', '_')


def _modules_dep(kernel):
    deps = {}
    with open(os.path.join(kernel.modules_dir, 'modules.dep')) as f:
        for line in f:
            path, sep, rest = line.partition(':')
            if sep:
                deps[module_name(path)] = (path, rest.split())
    return deps


def _builtin(kernel):
    path = os.path.join(kernel.modules_dir, 'modules.builtin')
    if not os.path.exists(path):
        return set()
    with open(path) as f:
        return {module_name(line.strip()) for line in f if line.strip()}


def module_load_order(kernel, wanted=WANTED_MODULES):
    """Module files to load, dependencies first; built-in ones left out.

    The kconfig says whether a piece is built in (y), a module (m) or
    missing; modules.builtin answers when the config file is not shipped.
    """
    config = _kernel_config(kernel)
    builtin = _builtin(kernel)
    deps = _modules_dep(kernel)
    order = []

    def visit(path):
        if path in order:
            return
        for dep in deps[module_name(path)][1]:
            visit(dep)
        order.append(path)

    for name, symbol in wanted:
        state = config.get(symbol)
        if state == 'y' or (state is None and name in builtin):
            continue
        if name not in deps:
            raise InitramfsError('kernel %s has no %s (%s is %s)'
                                 % (kernel.version, name, symbol,
                                    state or 'not set'))
        visit(deps[name][0])
    return order


def read_module(path):
    """A module's bytes, decompressed: busybox insmod wants a plain .ko."""
    with open(path, 'rb') as f:
        data = f.read()
    if path.endswith('.xz'):
        return lzma.decompress(data)
    if path.endswith('.gz'):
        return gzip.decompress(data)
    if path.endswith('.zst'):
        try:
            import zstd
        except ImportError as err:
            raise InitramfsError('%s is zstd-compressed and the zstd '
                                 'module is not installed' % path) from err
        return zstd.decompress(data)
    return data


class CpioWriter(object):
    """Minimal newc ("070701") cpio writer; fixed owner and mtime 0.

    Fixed metadata makes the archive reproducible for identical inputs.
    """

    def __init__(self):
        self._out = io.BytesIO()
        self._ino = 0

    def _entry(self, name, mode, data=b'', rdev=(0, 0)):
        self._ino += 1
        name_bytes = name.encode() + b'\0'
        fields = (self._ino, mode, 0, 0, 1, 0, len(data), 0, 0,
                  rdev[0], rdev[1], len(name_bytes), 0)
        header = _NEWC_MAGIC + b''.join(b'%08X' % v for v in fields)
        self._write_padded(header + name_bytes)
        self._write_padded(data)

    def _write_padded(self, data):
        self._out.write(data)
        self._out.write(b'\0' * (-len(data) % 4))

    def add_dir(self, name, mode=0o755):
        self._entry(name, stat.S_IFDIR | mode)

    def add_file(self, name, data, mode=0o644):
        self._entry(name, stat.S_IFREG | mode, data)

    def add_symlink(self, name, target):
        self._entry(name, stat.S_IFLNK | 0o777, target.encode())

    def add_char_device(self, name, major, minor, mode=0o600):
        self._entry(name, stat.S_IFCHR | mode, rdev=(major, minor))

    def finish(self):
        """Archive bytes, with the trailer, padded to 512 like cpio(1)."""
        self._entry(_TRAILER, 0)
        self._out.write(b'\0' * (-self._out.tell() % 512))
        return self._out.getvalue()


CpioEntry = collections.namedtuple('CpioEntry', 'name mode data rdev')


def read_cpio(data):
    """Entries of a (possibly gzip'd, possibly concatenated) newc archive.

    Reads archives one after the other the way the kernel does, so the
    tests can check what the guest will really see.
    """
    if data[:2] == b'\x1f\x8b':
        data = gzip.decompress(data)  # handles concatenated members
    entries = []
    pos = 0
    while pos < len(data):
        if data[pos:pos + 4] == b'\0\0\0\0':
            pos += 4  # padding between archives
            continue
        if data[pos:pos + 6] != _NEWC_MAGIC:
            raise InitramfsError('bad cpio header at offset %d' % pos)
        fields = [int(data[pos + 6 + 8 * i:pos + 14 + 8 * i], 16)
                  for i in range(13)]
        mode, size, namesize = fields[1], fields[6], fields[11]
        pos += 110
        name = data[pos:pos + namesize - 1].decode()
        pos += namesize + (-(110 + namesize) % 4)
        body = data[pos:pos + size]
        pos += size + (-size % 4)
        if name != _TRAILER:
            entries.append(CpioEntry(name, mode, body,
                                     (fields[9], fields[10])))
    return entries


def _read(path):
    with open(path, 'rb') as f:
        return f.read()


def _inputs(kernel, busybox):
    """What goes into the base archive, as (archive name, bytes) lists."""
    modules = module_load_order(kernel)
    files = [('bin/busybox', _read(busybox), 0o755),
             ('init', _read(INIT_SCRIPT), 0o755),
             ('lib/guest.sh', _read(GUEST_LIB), 0o644)]
    names = []
    for rel in modules:
        name = module_name(rel)
        names.append(name)
        files.append(('lib/modules/%s.ko' % name,
                      read_module(os.path.join(kernel.modules_dir, rel)),
                      0o644))
    files.append(('etc/modules', ''.join(n + '\n' for n in names).encode(),
                  0o644))
    return files


def _cache_key(kernel, files):
    digest = hashlib.sha256(b'format %d\nkernel %s\n'
                            % (FORMAT_VERSION, kernel.version.encode()))
    for name, data, mode in files:
        digest.update(b'%s %o %s\n' % (name.encode(), mode,
                                       hashlib.sha256(data).digest().hex()
                                       .encode()))
    return digest.hexdigest()


def cache_dir():
    """$SPDK_VHOST_TEST_CACHE, else the user's cache directory.

    The home directory comes from the password database, not $HOME:
    oslotest points $HOME at a per-test temp dir, which would defeat the
    cache.
    """
    if os.environ.get(CACHE_ENV):
        return os.environ[CACHE_ENV]
    base = os.environ.get('XDG_CACHE_HOME') or os.path.join(
        pwd.getpwuid(os.getuid()).pw_dir, '.cache')
    return os.path.join(base, 'spdk-vhost-tests')


def _atomic_write(path, data):
    """Write via a temp file and rename, so no reader sees half a file.

    Concurrent builders of one key write identical bytes; the last wins.
    """
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix='.tmp-')
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(data)
        # Readable by all: libvirt's QEMU runs as another user.
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def build(kernel=None, busybox=None):
    """Path of the cached base initramfs, building it if needed."""
    kernel = kernel or find_kernel()
    busybox = find_busybox(busybox)
    files = _inputs(kernel, busybox)
    path = os.path.join(cache_dir(), 'initramfs-%s-%s.cpio.gz'
                        % (kernel.version, _cache_key(kernel, files)[:16]))
    if os.path.exists(path):
        return path
    cpio = CpioWriter()
    for name in _DIRS:
        cpio.add_dir(name)
    # The kernel opens /dev/console for /init before devtmpfs is mounted.
    cpio.add_char_device('dev/console', 5, 1)
    cpio.add_symlink('bin/sh', 'busybox')
    for name, data, mode in files:
        cpio.add_file(name, data, mode)
    _atomic_write(path, gzip.compress(cpio.finish(), mtime=0))
    return path


def _ldd(program):
    """Absolute paths of the shared libraries (and loader) program needs."""
    try:
        out = subprocess.run(['ldd', program], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        raise InitramfsError('cannot list the libraries of %s: %s'
                             % (program, err)) from err
    paths = []
    for line in out.splitlines():
        words = line.split()
        if '=>' in words and len(words) > words.index('=>') + 1:
            path = words[words.index('=>') + 1]
        else:
            path = words[0] if words else ''
        if path.startswith('/'):
            paths.append(path)
    return paths


def extra_files(programs):
    """(archive name, bytes, mode) of programs (in bin/) and their libs.

    Libraries keep the path ldd found them at (the loader's search
    path), dynamic programs thus run as on the host.
    """
    files = []
    for name in programs:
        program = shutil.which(name)
        if not program:
            raise InitramfsError('%s not found on the host (an extra for '
                                 'the test guest)' % name)
        files.append(('bin/' + name, _read(program), 0o755))
        files += [(path.lstrip('/'), _read(path), 0o755)
                  for path in _ldd(program)]
    unique = dict((f[0], f) for f in files)
    return [unique[key] for key in sorted(unique)]


def build_extras(programs, kernel=None):
    """Path of the cached archive holding extra programs, built if needed.

    A separate archive appended after the base one, so the default
    initramfs (and its build time) is unchanged when none is asked for.
    """
    kernel = kernel or find_kernel()
    files = extra_files(programs)
    path = os.path.join(cache_dir(), 'extras-%s-%s.cpio.gz'
                        % ('-'.join(sorted(programs)),
                           _cache_key(kernel, files)[:16]))
    if os.path.exists(path):
        return path
    cpio = CpioWriter()
    dirs = sorted({os.path.dirname(name) for name, _d, _m in files})
    for name in sorted({'/'.join(d.split('/')[:i + 1]) for d in dirs
                        for i in range(d.count('/') + 1)} - set(_DIRS)):
        cpio.add_dir(name)
    for name, data, mode in files:
        cpio.add_file(name, data, mode)
    # Level 1: tens of MiB of libraries; speed matters more than size.
    _atomic_write(path, gzip.compress(cpio.finish(), compresslevel=1,
                                      mtime=0))
    return path


def script_archive(script):
    """A gzip'd archive holding only /run.sh, to append to the base."""
    cpio = CpioWriter()
    cpio.add_file('run.sh', script.encode(), 0o755)
    return gzip.compress(cpio.finish(), mtime=0)


def make_initrd(dest, script, kernel=None, busybox=None, extras=None):
    """Write base archive [+ extras] + /run.sh archive to dest.

    extras: host programs to add (see build_extras); default from
    $SPDK_VHOST_TEST_EXTRAS, so callers that boot guests indirectly
    (e.g. a benchmark wanting fio) need no new parameter. Returns dest.
    """
    if extras is None:
        extras = os.environ.get(EXTRAS_ENV, '').split()
    parts = [build(kernel, busybox)]
    if extras:
        parts.append(build_extras(extras, kernel))
    with open(dest, 'wb') as out:
        for part in parts:
            with open(part, 'rb') as src:
                shutil.copyfileobj(src, out)
        out.write(script_archive(script))
    return dest


def kernel_cmdline(disks=0, extra=()):
    """Command line: serial console, panic exits QEMU, disks to wait for.

    loglevel=4 keeps routine boot chatter off the (slow, under TCG)
    serial console while errors still show; the full log is dumped by
    /init on failure.
    """
    args = ['console=ttyS0', 'loglevel=4', 'panic=-1',
            'gt.disks=%d' % disks]
    return ' '.join(args + list(extra))
