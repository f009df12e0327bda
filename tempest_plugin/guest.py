"""What the scenario tests see of a guest's disks: over SSH or its console.

Both views answer the same questions about a volume attached to a
server: which disk it became (found by its serial, the volume id as
virtio-blk reports it), its size, whether data written to it reads
back, and whether it went away on detach. ``[spdk_vhost] guest_access``
picks one:

- ``ssh``: any Linux image with sudo; tempest logs in and runs commands.
- ``console``: no guest network needed. The image runs the project's
  test guest in report mode, which prints a line per disk event on its
  serial console (``gt_report`` in ``testbed/guest/lib.sh``); tempest
  reads them through Nova's console-output API.

On attach both views read the disk's first MiB ("before"), then write a
pattern made of the serial there and read it back: the pattern follows
from the volume id alone, so a volume attached again shows whether its
data survived.
"""

import collections
import hashlib
import shlex

from tempest.lib.common.utils import test_utils
from tempest.lib import exceptions as lib_exc

# VIRTIO_BLK_ID_BYTES: the serial a guest sees is the id cut to this.
SERIAL_BYTES = 20
PATTERN_BYTES = 1024 * 1024
# The console report's lines start with this marker (gt_mark).
MARKER = '@@'

Disk = collections.namedtuple('Disk', 'name serial size before verified')


def serial_of(volume_id):
    return volume_id[:SERIAL_BYTES]


def pattern_sha256(serial):
    """sha256 of the pattern written on attach: ``serial\\n`` repeated."""
    line = (serial + '\n').encode()
    data = (line * (PATTERN_BYTES // len(line) + 1))[:PATTERN_BYTES]
    return hashlib.sha256(data).hexdigest()


ZEROS_SHA256 = hashlib.sha256(bytes(PATTERN_BYTES)).hexdigest()


class GuestTimeout(lib_exc.TimeoutException):
    message = 'Guest did not show %(what)s within %(timeout)s s'


def _wait(predicate, what, timeout):
    if not test_utils.call_until_true(predicate, timeout, 2):
        raise GuestTimeout(what=what, timeout=timeout)


class SshGuest(object):
    """Disks seen by commands run over SSH (a tempest RemoteClient)."""

    def __init__(self, ssh, timeout):
        self.ssh = ssh
        self.timeout = timeout

    def _run(self, command):
        return self.ssh.exec_command(command).strip()

    def _disk_with_serial(self, serial):
        out = self._run('for d in /sys/block/vd*; do '
                        'echo "${d##*/} $(cat $d/serial 2>/dev/null)"; done')
        for line in out.splitlines():
            name, _sep, found = line.partition(' ')
            if found.strip() == serial:
                return name
        return None

    def _sha256(self, name):
        return self._run('sudo dd if=/dev/%s bs=64k count=%d iflag=direct '
                         '2>/dev/null | sha256sum'
                         % (name, PATTERN_BYTES // 65536)).split()[0]

    def size(self, name):
        return int(self._run('cat /sys/block/%s/size' % name)) * 512

    def wait_attached(self, volume_id):
        serial = serial_of(volume_id)
        found = []

        def appeared():
            found[:] = [self._disk_with_serial(serial)]
            return found[0] is not None

        _wait(appeared, 'a disk with serial %s' % serial, self.timeout)
        name = found[0]
        before = self._sha256(name)
        self._run('yes %s | head -c %d | sudo dd of=/dev/%s bs=64k '
                  'oflag=direct conv=fsync 2>/dev/null'
                  % (shlex.quote(serial), PATTERN_BYTES, name))
        verified = self._sha256(name) == pattern_sha256(serial)
        return Disk(name, serial, self.size(name), before, verified)

    def wait_size(self, disk, size):
        _wait(lambda: self.size(disk.name) == size,
              '%s at %d bytes' % (disk.name, size), self.timeout)

    def wait_detached(self, disk):
        _wait(lambda: self._disk_with_serial(disk.serial) is None,
              '%s gone' % disk.name, self.timeout)


def parse_report(text):
    """The report's events in order: (kind, disk name, {key: value}).

    Lines without the marker (kernel messages) are skipped, and a line
    repeated right after itself counts once: Nova may append what it
    read from the console's pty to a log that already holds it.
    """
    events = []
    last = None
    for line in text.splitlines():
        start = line.find(MARKER)
        if start < 0:
            continue
        line = line[start + len(MARKER):].strip()
        if line == last:
            continue
        last = line
        words = line.split()
        if not words:
            continue
        fields = dict(w.split('=', 1) for w in words[2:] if '=' in w)
        events.append((words[0], words[1] if len(words) > 1 else None,
                       fields))
    return events


class ConsoleGuest(object):
    """Disks seen in the test guest's console report, via Nova's API.

    Every wait looks only at events after the ones already consumed, so
    a disk attached twice under one name is seen twice.
    """

    def __init__(self, servers_client, server_id, timeout):
        self.servers_client = servers_client
        self.server_id = server_id
        self.timeout = timeout
        self.seen = 0
        self._next('REPORTING', lambda name, fields: True,
                   'the test guest reporting (an image in report mode?)')

    def _events(self):
        output = self.servers_client.get_console_output(
            self.server_id)['output']
        return parse_report(output or '')

    def _next(self, kind, match, what):
        """The first new event of ``kind`` that ``match``es; consume it."""
        found = []

        def arrived():
            events = self._events()
            for index in range(self.seen, len(events)):
                event_kind, name, fields = events[index]
                if event_kind == kind and match(name, fields):
                    self.seen = index + 1
                    found[:] = [(name, fields)]
                    return True
            return False

        _wait(arrived, what, self.timeout)
        return found[0]

    def wait_attached(self, volume_id):
        serial = serial_of(volume_id)
        name, fields = self._next(
            'ATTACHED', lambda name, fields: fields.get('serial') == serial,
            'a disk with serial %s' % serial)
        return Disk(name, serial, int(fields['size']), fields['before'],
                    fields['verify'] == 'ok')

    def wait_size(self, disk, size):
        self._next('RESIZED',
                   lambda name, fields: (name == disk.name and
                                         int(fields['size']) == size),
                   '%s at %d bytes' % (disk.name, size))

    def wait_detached(self, disk):
        self._next('DETACHED', lambda name, fields: name == disk.name,
                   '%s gone' % disk.name)
