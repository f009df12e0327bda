"""What the chaos run counts, and the figures it prints.

Threads report here (operations from each compute host's worker, faults
and crashes from the fault thread), each event a line on ``log`` as it
happens; :meth:`Figures.report` prints the figures at the end and
tells whether the run passed: no crash it did not cause, no failed
operation, no guest I/O error or wrong read, nothing left on a target.
"""

import collections
import contextlib
import threading
import time


class Figures(object):

    def __init__(self, log=None):
        self._log = log
        self._started = time.monotonic()
        self._lock = threading.Condition()
        self.operations = collections.Counter()
        self.failures = []
        self.io_errors = 0
        self.bad_reads = 0
        self.longest_stall = (0, None)
        self.faults = collections.Counter()
        #: Faults that began while a guest was writing, by kind.
        self.under_writes = collections.Counter()
        self._writers = 0
        self.longest_outage = 0.0
        self.crashes = []
        self.leaks = {}

    def _say(self, text):
        """One event's line, when it happens (the lock held)."""
        if self._log is not None:
            self._log.write('%7.1f s  %s\n' % (
                time.monotonic() - self._started, text))
            self._log.flush()

    def operation(self, compute, result):
        with self._lock:
            self._say('%s %s volume: %s' % (
                compute, result['kind'], '; '.join(result['failed']) or
                'stall %s ms, %s I/O errors, read back %s' % (
                    result.get('stall_ms'), result.get('io_errors'),
                    'right' if result.get('data_ok') else 'WRONG')))
            self.operations[result['kind']] += 1
            for failure in result['failed']:
                self.failures.append('%s %s: %s' % (compute, result['kind'],
                                                    failure))
            self.io_errors += result.get('io_errors', 0)
            if result.get('data_ok') is False:
                self.bad_reads += 1
            stall = result.get('stall_ms', 0)
            if stall > self.longest_stall[0]:
                self.longest_stall = (stall, result['kind'])

    def failure(self, what):
        with self._lock:
            self._say(what)
            self.failures.append(what)

    @contextlib.contextmanager
    def writing(self):
        """A guest writes through the faults while this is held."""
        with self._lock:
            self._writers += 1
            self._lock.notify_all()
        try:
            yield
        finally:
            with self._lock:
                self._writers -= 1

    def wait_writing(self, stop):
        """Until a guest writes, or ``stop`` is set (polled each second)."""
        with self._lock:
            while not self._writers and not stop.is_set():
                self._lock.wait(1)

    def began(self, kind):
        """A fault of ``kind`` begins now."""
        with self._lock:
            if self._writers:
                self.under_writes[kind] += 1

    def fault(self, kind, node, seconds=None):
        """A fault of ``kind`` on ``node`` ended, after ``seconds``."""
        with self._lock:
            self._say('%s of %s%s' % (kind, node, '' if seconds is None
                                      else ': %.1f s' % seconds))
            self.faults[kind] += 1
            if kind == 'storage kill':
                self.longest_outage = max(self.longest_outage, seconds)

    def crash(self, node, what):
        with self._lock:
            self._say('CRASH of %s: %s' % (node, what))
            self.crashes.append('%s: %s' % (node, what))

    @property
    def passed(self):
        return not (self.failures or self.io_errors or self.bad_reads
                    or self.crashes or any(self.leaks.values()))

    def report(self, out, minutes, release):
        """Print the figures; whether the run passed."""
        done = sum(self.operations.values())
        lines = [
            'chaos: %.1f min on %s' % (minutes, release),
            'operations: %d done (%s), %d failed steps' % (
                done, _counts(self.operations), len(self.failures)),
            'faults: %s (under a writing guest: %s); longest storage '
            'outage %.1f s' % (_counts(self.faults),
                               _counts(self.under_writes),
                               self.longest_outage),
            'target crashes not caused by the run: %d' % len(self.crashes),
            'guest I/O errors: %d; reads that differ from the writes: %d'
            % (self.io_errors, self.bad_reads),
            'longest guest write stall: %d ms%s' % (
                self.longest_stall[0], ' (%s volume)' % self.longest_stall[1]
                if self.longest_stall[1] else ''),
            'objects left on targets: %d' % sum(
                len(v) for v in self.leaks.values()),
        ]
        for node, left in sorted(self.leaks.items()):
            lines += ['  %s: %s' % (node, item) for item in left]
        lines += ['failed: %s' % f for f in self.failures]
        lines += ['crash: %s' % c for c in self.crashes]
        lines.append('PASSED' if self.passed else 'FAILED')
        out.write('\n'.join(lines) + '\n')
        return self.passed


def _counts(counter):
    return ', '.join('%s %d' % kv for kv in sorted(counter.items())) or 'none'
