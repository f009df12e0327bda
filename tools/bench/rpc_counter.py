"""Count the JSON-RPC calls our drivers make, and their replies' bytes.

The driver is pointed at a relay's socket in front of the SPDK target, and
every request passing through is counted by method, with the size of the
reply it got. Counting on the wire (not in our client) makes the figure
honest for any code path, and it works the same on a real target. The
relay is the fault tests' proxy with no fault set: it already counts what
it relays. Reply bytes show the calls whose answer grows with the pool
(a listing of every bdev or controller), which cost more as a host fills.
"""

import collections
import contextlib

from testbed import fault_proxy


class Tally(collections.Counter):
    """Calls by method; ``reply_bytes``: their replies' bytes by method."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reply_bytes = collections.Counter()


class _CountingSocket(object):
    """The client's socket, adding what is sent back to it to a tally."""

    def __init__(self, sock, add):
        self._sock = sock
        self._add = add

    def sendall(self, data):
        self._add(len(data))
        return self._sock.sendall(data)


class RpcCounter(fault_proxy.FaultProxy):
    """Relay ``listen_path`` -> ``upstream_path``, counting requests."""

    def __init__(self, upstream_path, listen_path):
        self.reply_bytes = collections.Counter()
        super().__init__(upstream_path, listen_path)

    def _relay(self, rule, request, client, upstream):
        method = (request.get('method', '?') if isinstance(request, dict)
                  else '?')

        def add(size):
            with self._lock:
                self.reply_bytes[method] += size
        return super()._relay(rule, request, _CountingSocket(client, add),
                              upstream)

    def counts(self):
        """Requests and reply bytes so far, by method (a copy)."""
        with self._lock:
            tally = Tally(self.calls)
            tally.reply_bytes.update(self.reply_bytes)
        return tally

    @contextlib.contextmanager
    def measure(self):
        """Yields a Tally filled, on exit, with the calls made inside."""
        before = self.counts()
        delta = Tally()
        try:
            yield delta
        finally:
            after = self.counts()
            delta.update(after - before)
            delta.reply_bytes.update(after.reply_bytes - before.reply_bytes)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
