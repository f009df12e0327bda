"""Count the JSON-RPC calls our drivers make, on the wire.

A Unix-socket relay between a driver and the SPDK target: the driver is
pointed at the relay's socket, every request passing through is counted
by method. Counting on the wire (not in our client) makes the figure
honest for any code path, and it works the same on a real target.
"""

import collections
import contextlib
import json
import os
import socket
import threading

_CHUNK = 65536


class RpcCounter(object):
    """Relay ``listen_path`` -> ``upstream_path``, counting requests."""

    def __init__(self, upstream_path, listen_path):
        self.upstream_path = upstream_path
        self.path = listen_path
        self._counts = collections.Counter()
        self._lock = threading.Lock()
        self._conns = []
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(listen_path)
        self._server.listen(16)
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def counts(self):
        """Requests so far, by method (a copy)."""
        with self._lock:
            return collections.Counter(self._counts)

    @contextlib.contextmanager
    def measure(self):
        """Yields a Counter filled, on exit, with the calls made inside."""
        before = self.counts()
        delta = collections.Counter()
        try:
            yield delta
        finally:
            delta.update(self.counts() - before)

    def _accept(self):
        while True:
            try:
                client, _addr = self._server.accept()
            except OSError:
                return  # closed
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                upstream.connect(self.upstream_path)
            except OSError:
                client.close()
                upstream.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True),
                             daemon=True).start()
            threading.Thread(target=self._pump,
                             args=(upstream, client, False),
                             daemon=True).start()

    def _pump(self, src, dst, count):
        decoder = json.JSONDecoder()
        pending = ''
        while True:
            try:
                data = src.recv(_CHUNK)
            except OSError:
                data = b''
            if not data:
                break
            if count:
                pending = self._count(decoder, pending + data.decode(
                    'utf-8', 'replace'))
            try:
                dst.sendall(data)
            except OSError:
                break
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _count(self, decoder, text):
        """Count the complete requests in text; return the unparsed rest."""
        while True:
            text = text.lstrip()
            if not text:
                return ''
            try:
                request, end = decoder.raw_decode(text)
            except ValueError:
                return text  # incomplete: wait for more bytes
            if isinstance(request, dict):
                with self._lock:
                    self._counts[request.get('method', '?')] += 1
            text = text[end:]

    def close(self):
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        self._thread.join(5)
        with self._lock:
            conns, self._conns = self._conns, []
        for sock in conns:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
