"""A JSON-RPC relay that breaks chosen calls on the wire, for fault tests.

Clients are pointed at :attr:`FaultProxy.path`; each request is relayed to
the real target's socket unless a rule for its method says otherwise:

``cut_before``
    close the client's connection without forwarding: the call never ran.
``cut_after``
    forward, let the target run it, then close without the reply: the
    caller cannot know that it ran (the nastiest case for rollback).
``delay``
    forward, and hold the reply back ``seconds`` (a client timeout).
``corrupt``
    forward, and answer with bytes that are not JSON-RPC.
``vanish``
    like ``cut_before``, and the listening socket disappears for
    ``seconds`` (a target restarting between two steps).

Faults are injected on the real socket path, so the client's own
reconnect, timeout and error handling are what is tested. Works the same
in front of a real ``spdk_tgt``.
"""

import collections
import contextlib
import json
import os
import socket
import threading
import time

import fixtures

_CHUNK = 65536
ACTIONS = ('cut_before', 'cut_after', 'delay', 'corrupt', 'vanish')


class _Rule(object):
    def __init__(self, action, occurrence, seconds):
        if action not in ACTIONS:
            raise ValueError('unknown fault %r' % action)
        self.action = action
        self.occurrence = occurrence
        self.seconds = seconds
        self.seen = 0


def _read_json(sock, buffered):
    """One JSON document from ``sock``; returns (doc, rest) or (None, '')."""
    decoder = json.JSONDecoder()
    text = buffered
    while True:
        stripped = text.lstrip()
        if stripped:
            try:
                doc, end = decoder.raw_decode(stripped)
                return doc, stripped[end:]
            except ValueError:
                pass
        try:
            data = sock.recv(_CHUNK)
        except OSError:
            data = b''
        if not data:
            return None, ''
        text += data.decode('utf-8', 'replace')


class FaultProxy(object):
    """Relay ``listen_path`` -> ``upstream_path``, breaking chosen calls."""

    def __init__(self, upstream_path, listen_path):
        self.upstream_path = upstream_path
        self.path = listen_path
        self.calls = collections.Counter()
        self.fired = []
        self._rules = {}
        self._lock = threading.Lock()
        self._conns = set()
        self._threads = []
        self._closed = False
        self._server = None
        self._listen()

    # -- rules -------------------------------------------------------------

    def fail(self, method, action, occurrence=1, seconds=0.0):
        """Break the ``occurrence``-th call of ``method`` from now on."""
        with self._lock:
            self._rules[method] = _Rule(action, occurrence, seconds)

    def clear(self):
        with self._lock:
            self._rules.clear()

    def _rule_for(self, method):
        with self._lock:
            self.calls[method] += 1
            rule = self._rules.get(method)
            if rule is None:
                return None
            rule.seen += 1
            if rule.seen != rule.occurrence:
                return None
            del self._rules[method]
            self.fired.append((method, rule.action))
            return rule

    # -- sockets -----------------------------------------------------------

    def _listen(self):
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(self.path)
        server.listen(16)
        self._server = server
        self._start(self._accept, server)

    def _start(self, target, *args):
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _vanish(self, seconds):
        """Take the socket away; bring it back after ``seconds``."""
        server, self._server = self._server, None
        self._close_server(server)

        def back():
            time.sleep(seconds)
            with self._lock:
                if not self._closed:
                    self._listen()
        self._start(back)

    def _close_server(self, server):
        if server is None:
            return
        with contextlib.suppress(OSError):
            server.shutdown(socket.SHUT_RDWR)
        server.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def _accept(self, server):
        # accept() is not woken by closing the socket: poll instead.
        server.settimeout(0.1)
        while not self._closed and server is self._server:
            try:
                client, _addr = server.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            client.settimeout(None)
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                upstream.connect(self.upstream_path)
            except OSError:
                client.close()
                upstream.close()
                continue
            with self._lock:
                self._conns.update((client, upstream))
            self._start(self._serve, client, upstream)

    def _serve(self, client, upstream):
        pending = ''
        try:
            while True:
                request, pending = _read_json(client, pending)
                if request is None:
                    return
                method = (request.get('method', '?')
                          if isinstance(request, dict) else '?')
                if not self._relay(self._rule_for(method), request, client,
                                   upstream):
                    return
        finally:
            self._drop(client, upstream)

    def _relay(self, rule, request, client, upstream):
        """One exchange; False when the connection is to be cut."""
        action = rule.action if rule else None
        if action == 'vanish':
            self._vanish(rule.seconds)
        if action in ('cut_before', 'vanish'):
            return False
        upstream.sendall(json.dumps(request).encode())
        reply, _rest = _read_json(upstream, '')
        if reply is None or action == 'cut_after':
            return False
        if action == 'delay':
            time.sleep(rule.seconds)
        data = (b'<html>garbage</html>' if action == 'corrupt'
                else json.dumps(reply).encode())
        try:
            client.sendall(data)
        except OSError:
            return False
        return action != 'corrupt'

    def _drop(self, *socks):
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
            with self._lock:
                self._conns.discard(sock)

    def close(self):
        with self._lock:
            if self._closed:
                return
            self._closed = True
            conns = list(self._conns)
        self._close_server(self._server)
        for sock in conns:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(10)


class FaultProxyFixture(fixtures.Fixture):
    """A :class:`FaultProxy` in front of ``upstream_path`` for one test."""

    def __init__(self, upstream_path):
        super().__init__()
        self.upstream_path = upstream_path

    def _setUp(self):
        directory = self.useFixture(fixtures.TempDir()).path
        self.proxy = FaultProxy(self.upstream_path,
                                os.path.join(directory, 'fault.sock'))
        self.addCleanup(self.proxy.close)
