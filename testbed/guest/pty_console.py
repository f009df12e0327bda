"""Talk to the test guest's shell through its serial console pty.

A guest that Nova or libvirt started (not :class:`qemu.Guest`) has its
serial port on a pseudo-terminal whose path is in the domain's live XML
(``<serial type='pty'><source path=...>``); root on the host may open
it, as ``virsh console`` does. The guest's ``/init`` runs ``gt_serve``
(see ``lib.sh``): one ``ID COMMAND`` line in, the command's ``@@`` lines
and ``@@END id=ID rc=N`` out, parsed by :class:`qemu.Results`.
"""

import os
import termios
import time
import tty
from xml.etree import ElementTree

from testbed.guest import qemu


def pty_path(domain_xml):
    """The serial console's pty of a running domain (None if it has none)."""
    for serial in ElementTree.fromstring(domain_xml).iter('serial'):
        if serial.get('type') == 'pty':
            source = serial.find('source')
            if source is not None and source.get('path'):
                return source.get('path')
    return None


class _PtyStream(object):
    """A raw pty as the line source of :class:`qemu.Console`.

    A pty whose other end went away (the domain stopped) reads EIO: that
    is the end of the stream, not an error.
    """

    def __init__(self, fd):
        self.fd = fd
        self._pending = b''

    def readline(self):
        while b'\n' not in self._pending:
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:
                chunk = b''
            if not chunk:
                line, self._pending = self._pending, b''
                return line
            self._pending += chunk
        line, _sep, self._pending = self._pending.partition(b'\n')
        return line + b'\n'


class PtyConsole(object):
    """Commands to a running guest shell over its console pty."""

    def __init__(self, path):
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
        tty.setraw(self.fd, termios.TCSANOW)
        self._console = qemu.Console(_PtyStream(self.fd))
        self._next_id = 0

    def wait_serving(self, timeout=qemu.DEFAULT_TIMEOUT):
        """Wait for a booting guest's shell: a command sent earlier is lost.

        Only for a console opened before the guest reached ``gt_serve``.
        """
        deadline = time.monotonic() + timeout
        if self._console.wait_for(0, qemu.marker('SERVING'),
                                  deadline) is None:
            raise qemu.GuestTimeout('guest not serving after %ss' % timeout,
                                    self._console.tail())

    def execute(self, command, timeout=qemu.DEFAULT_TIMEOUT, check=True):
        """Run one shell command line in the guest; its Results."""
        if '\n' in command or len(command) > qemu.MAX_COMMAND:
            raise ValueError('guest commands must be one line')
        self._next_id += 1
        cmd_id = self._next_id
        start = len(self._console.lines)
        os.write(self.fd, ('%d %s\n' % (cmd_id, command)).encode())
        deadline = time.monotonic() + timeout
        end = self._console.wait_for(
            start, qemu.marker('END', r'id=%d ' % cmd_id), deadline)
        if end is None:
            raise qemu.GuestTimeout('no end of %r after %ss' % (
                command, timeout), self._console.tail())
        results = qemu.Results(self._console.lines[start:end],
                               qemu.end_rc(self._console.lines[end]))
        if check and not results.ok:
            raise qemu.GuestScriptError(
                'guest command %r failed: rc=%d, errors=%r'
                % (command, results.rc, results.errors),
                self._console.tail(), results)
        return results

    def tail(self, count=40):
        return self._console.tail(count)

    def close(self):
        os.close(self.fd)
        self._console.join(5)
