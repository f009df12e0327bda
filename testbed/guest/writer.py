"""A guest's background writer (:func:`qemu.writer_start`), waited on.

Tests that restart, migrate or change the storage under a writing guest
prove the guest still writes by a write it completes afterwards, never
by a time they hope it wrote in.
"""

from testbed.guest import qemu
from testbed import waiting


def writes_after(guest, count=None, timeout=120, dev=None, on_timeout=None):
    """The writer's status once it passed ``count`` (None: its count now).

    ``guest``: what runs the guest's commands (a console, or a guest
    fixture's ``guest``); ``dev``: that disk's writer, else all of them.
    Fails at once if a write failed: the writer retries in place, so a
    failure is an I/O error the guest saw.
    """
    def status():
        found = guest.execute(qemu.writer_status(dev))
        if found['writer.failures'] != '0':
            raise AssertionError('the guest writer failed writes: %s'
                                 % found.values)
        return found

    if count is None:
        count = writes(status())

    def past():
        found = status()
        return found if writes(found) > count else None
    return waiting.wait_for('the guest writer to pass %d writes' % count,
                            past, timeout, on_timeout=on_timeout)


def writes(status):
    """The writes a writer status counts."""
    return int(status['writer.writes'])


def expected(token, length, blocks, count):
    """What a ``passes`` writer's blocks hold after ``count`` writes.

    Block ``i`` holds the pass that wrote it last: the current pass for
    the blocks it reached, the one before for the rest (nothing written
    there yet in the first pass: None).
    """
    done, reached = divmod(count, blocks)
    if done == 0:
        return None
    return b''.join(qemu.pattern_bytes(
        '%s.%d' % (token, done if index < reached else done - 1), length)
        for index in range(blocks))
