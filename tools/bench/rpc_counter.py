"""Count the JSON-RPC calls our drivers make, on the wire.

The driver is pointed at a relay's socket in front of the SPDK target, and
every request passing through is counted by method. Counting on the wire
(not in our client) makes the figure honest for any code path, and it
works the same on a real target. The relay is the fault tests' proxy
with no fault set: it already counts what it relays.
"""

import collections
import contextlib

from testbed import fault_proxy


class RpcCounter(fault_proxy.FaultProxy):
    """Relay ``listen_path`` -> ``upstream_path``, counting requests."""

    def counts(self):
        """Requests so far, by method (a copy)."""
        with self._lock:
            return collections.Counter(self.calls)

    @contextlib.contextmanager
    def measure(self):
        """Yields a Counter filled, on exit, with the calls made inside."""
        before = self.counts()
        delta = collections.Counter()
        try:
            yield delta
        finally:
            delta.update(self.counts() - before)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
