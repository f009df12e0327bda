"""A small QMP client for the emulator's qemu-storage-daemon.

The data plane drives one qemu-storage-daemon over its QMP monitor socket.
This client keeps what the data plane needs and nothing else: the greeting
and capability negotiation, synchronous commands matched by id, errors that
keep the command, its arguments and QEMU's error class and text, and a queue
of asynchronous events (block jobs and export deletion report through them).
"""

import itertools
import json
import select
import socket
import time


class QMPError(Exception):
    """A QMP command failed; keeps what was asked and what QEMU answered."""

    def __init__(self, command, arguments, error_class, desc):
        self.command = command
        self.arguments = arguments
        self.error_class = error_class
        self.desc = desc
        super().__init__('QMP %s(%s) failed: %s: %s'
                         % (command, json.dumps(arguments, sort_keys=True),
                            error_class, desc))


class QMPConnectionError(QMPError):
    """The monitor connection broke (usually: the daemon died)."""

    def __init__(self, command, arguments, desc):
        super().__init__(command, arguments, 'ConnectionError', desc)


class QMPClient(object):
    """Synchronous QMP client over a unix stream socket."""

    def __init__(self, path, timeout=30.0):
        self._path = path
        self._timeout = timeout
        self._ids = itertools.count(1)
        self._buf = b''
        self._events = []
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect(path)
            greeting = self._read_message('greeting', None)
            if 'QMP' not in greeting:
                raise QMPConnectionError('greeting', None,
                                         'not a QMP greeting: %r' % greeting)
            self.execute('qmp_capabilities')
        except BaseException:
            self._sock.close()
            raise

    def close(self):
        self._sock.close()

    def _read_message(self, command, arguments, deadline=None):
        """Return the next JSON message; wait at most until deadline."""
        if deadline is None:
            deadline = time.monotonic() + self._timeout
        while b'\n' not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError('no QMP message within timeout')
            ready, _, _ = select.select([self._sock], [], [], remaining)
            if not ready:
                continue
            try:
                chunk = self._sock.recv(65536)
            except OSError as err:
                raise QMPConnectionError(command, arguments,
                                         str(err)) from err
            if not chunk:
                raise QMPConnectionError(command, arguments,
                                         'monitor connection closed')
            self._buf += chunk
        line, self._buf = self._buf.split(b'\n', 1)
        return json.loads(line)

    def execute(self, command, **arguments):
        """Run a command and return its 'return' value; raise QMPError."""
        msg_id = 'dp-%d' % next(self._ids)
        request = {'execute': command, 'id': msg_id}
        if arguments:
            request['arguments'] = arguments
        try:
            self._sock.sendall(json.dumps(request).encode() + b'\n')
        except OSError as err:
            raise QMPConnectionError(command, arguments, str(err)) from err
        while True:
            try:
                msg = self._read_message(command, arguments)
            except TimeoutError as err:
                raise QMPConnectionError(
                    command, arguments, 'no reply within %ss'
                    % self._timeout) from err
            if 'event' in msg:
                self._events.append(msg)
                continue
            if msg.get('id') != msg_id:
                continue
            if 'error' in msg:
                raise QMPError(command, arguments,
                               msg['error'].get('class'),
                               msg['error'].get('desc'))
            return msg.get('return')

    def wait_event(self, name, match=None, timeout=60.0):
        """Return (and unqueue) the first event 'name' whose data matches.

        match is a dict of key/values the event's data must contain.
        Events that do not match stay queued for later waiters.
        """
        match = match or {}
        deadline = time.monotonic() + timeout
        while True:
            for event in self._events:
                data = event.get('data', {})
                if event['event'] == name and all(
                        data.get(k) == v for k, v in match.items()):
                    self._events.remove(event)
                    return event
            try:
                msg = self._read_message('wait_event', {'event': name},
                                         deadline)
            except TimeoutError as err:
                raise QMPConnectionError(
                    'wait_event', {'event': name, 'match': match},
                    'event not seen within %ss' % timeout) from err
            if 'event' in msg:
                self._events.append(msg)

    def drop_events(self, name):
        """Forget queued events of one kind (e.g. before a fresh wait)."""
        self._events = [e for e in self._events if e['event'] != name]
