"""Host CPU time from /proc: CPU per I/O, and what an idle target costs.

Clock ticks of utime + stime of whole processes (all threads) or of
named threads, read before and after a fio job.
"""

import os
import time

TICK = os.sysconf('SC_CLK_TCK')


def _ticks(stat_text):
    # The comm field may hold spaces and parentheses: split after the last.
    fields = stat_text.rsplit(')', 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime


def process_seconds(pid, proc='/proc'):
    """CPU seconds used so far by a process (all its threads); 0 if gone."""
    try:
        with open(os.path.join(proc, str(pid), 'stat')) as f:
            return _ticks(f.read()) / TICK
    except FileNotFoundError:
        return 0.0


def thread_seconds(pid, prefix, proc='/proc'):
    """CPU seconds of a process's threads whose name starts with prefix."""
    total = 0
    task_dir = os.path.join(proc, str(pid), 'task')
    try:
        tids = os.listdir(task_dir)
    except FileNotFoundError:
        return 0.0
    for tid in tids:
        try:
            with open(os.path.join(task_dir, tid, 'comm')) as f:
                if not f.read().startswith(prefix):
                    continue
            with open(os.path.join(task_dir, tid, 'stat')) as f:
                total += _ticks(f.read())
        except FileNotFoundError:
            continue  # the thread ended meanwhile
    return total / TICK


def children(pid, proc='/proc'):
    """PIDs of a process's direct children (from /proc/*/stat)."""
    found = []
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc, entry, 'stat')) as f:
                ppid = int(f.read().rsplit(')', 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError):
            continue
        if ppid == pid:
            found.append(int(entry))
    return found


class CpuMeter(object):
    """CPU seconds spent by a set of sources between start() and stop().

    sources: name -> zero-argument callable returning CPU seconds so far.
    """

    def __init__(self, sources):
        self.sources = sources
        self._start = {}

    def start(self):
        self._start = {name: read() for name, read in self.sources.items()}

    def stop(self):
        return {name: read() - self._start[name]
                for name, read in self.sources.items()}


def share(pid, seconds):
    """The share of one core a process used over ``seconds`` from now.

    0.01 is 1% of a core; a polling SPDK reactor shows about 1.0 per core.
    """
    start_cpu, start = process_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (process_seconds(pid) - start_cpu) / (time.monotonic() - start)
