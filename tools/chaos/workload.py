"""One compute host's work in the chaos run: guests on volumes, in turn.

An operation is what a tenant's instance does with a volume: Cinder
provisions it (a local lvol, one export, or copies on two storage
nodes), Nova's connector attaches it, a TCG guest boots on it and keeps
writing while the faults happen, then reads back what it wrote, and the
volume is detached and deleted. Each step that fails is counted by its
name, and the operation is undone as far as it got.
"""

import contextlib
import hashlib
import random
import traceback
import uuid

from testbed.guest import qemu
from testbed.guest import writer
from tools.chaos import nodes

KINDS = ('local', 'remote', 'replicated')
BLOCK = 16 * 1024
BLOCKS = 64
WRITER_OFFSET = 1024 * 1024
#: How long the writer may see no write complete before the operation
#: fails: past the longest outage the run causes, within the single-copy
#: fast-fail window (70 s) the admin guide documents.
STALL_LIMIT = 120


class Failed(Exception):
    """A step of an operation failed; ``step`` names it."""

    def __init__(self, step, err):
        super().__init__('%s: %s: %s' % (step, type(err).__name__, err))
        self.step = step


def _step(name, func, *args):
    try:
        return func(*args)
    except Failed:
        raise  # named by the step inside
    except Exception as err:  # noqa: B902 - named and counted by the caller
        raise Failed(name, err) from err


class Operation(object):
    """One volume's life on one compute host; undone as far as it got."""

    def __init__(self, compute, storages, kind, rng, hold, figures):
        self.compute = compute
        self.storages = storages
        self.kind = kind
        self.rng = rng
        self.hold = hold
        self.figures = figures
        self.volume_id = str(uuid.uuid4())
        self.exports = []
        self.props = None
        self.info = None
        self.guest = None
        self.result = {'kind': kind}

    def provision(self):
        if self.kind == 'local':
            self.props = self.compute.local_props(self.volume_id)
            return
        wanted = 1 if self.kind == 'remote' else 2
        for storage in self.rng.sample(self.storages, len(self.storages)):
            export = storage.export(self.volume_id)
            if export:
                self.exports.append((storage, export))
            if len(self.exports) == wanted:
                break
        else:
            raise RuntimeError('fewer than %d storage nodes up' % wanted)
        self.props = (self.exports[0][1] if wanted == 1 else
                      nodes.replicated(self.volume_id,
                                       [e for _s, e in self.exports]))

    def attach(self):
        """Provision and connect with no node going down meanwhile.

        An attach to a node that is down fails, as it must; that is
        not what this run is after, so the faults wait (a few seconds).
        """
        with contextlib.ExitStack() as held:
            for node in sorted(self.storages, key=lambda n: n.name) + [
                    self.compute]:
                held.enter_context(node.lock)
            _step('provision', self.provision)
            conn, client = self.compute.connector()
            with client:
                self.info = conn.connect_volume(self.props)
        self.guest = qemu.Guest([qemu.VhostUserDisk(self.info['path'], 1,
                                                    reconnect=1)])
        self.guest.start()

    def write(self, stop):
        """Write while the faults happen; then read every block back.

        Each pass over the blocks writes its own pattern, so a block
        whose last acknowledged write was lost (a copy rebuilt from a
        stale one, a write replayed wrong) reads back the wrong pass.
        """
        guest = self.guest
        guest.execute(qemu.writer_start('vda', WRITER_OFFSET, BLOCK,
                                        self.volume_id, blocks=BLOCKS,
                                        passes=True))
        writer.writes_after(guest, BLOCKS, timeout=STALL_LIMIT)
        with self.figures.writing():
            stop.wait(self.hold)
            before = writer.writes(guest.execute(qemu.writer_status()))
            writer.writes_after(guest, before, timeout=STALL_LIMIT)
        stopped = guest.execute(qemu.writer_stop())
        self.result['io_errors'] = int(stopped['writer.failures'])
        self.result['stall_ms'] = int(stopped['writer.max_gap_ms'])
        wanted = writer.expected(self.volume_id, BLOCK, BLOCKS,
                                 writer.writes(stopped))
        read = guest.execute(qemu.read_back('vda', WRITER_OFFSET,
                                            BLOCK * BLOCKS))
        self.result['data_ok'] = (read['vda.read@%d' % WRITER_OFFSET]
                                  == hashlib.sha256(wanted).hexdigest())

    def detach(self):
        if self.guest is not None:
            self.guest.stop()
            self.guest.cleanup()
            self.guest = None
        if self.info is not None:
            with self.compute.lock:
                conn, client = self.compute.connector()
                with client:
                    conn.disconnect_volume(self.props, self.info)
            self.info = None

    def delete(self):
        if self.kind == 'local' and self.props is not None:
            self.compute.delete_local(self.volume_id)
            self.props = None
        while self.exports:
            storage, _export = self.exports.pop()
            storage.unexport(self.volume_id)

    def run(self, stop):
        """The whole life; the failed steps' names, in order."""
        failed = []
        try:
            _step('attach', self.attach)
            _step('write', self.write, stop)
        except Failed as err:
            failed.append(err)
            traceback.print_exc()
        for name, undo in (('detach', self.detach), ('delete', self.delete)):
            try:
                _step(name, undo)
            except Failed as err:
                failed.append(err)
                traceback.print_exc()
        self.result['failed'] = [str(err) for err in failed]
        return self.result


def run_compute(compute, storages, figures, stop, seed, hold, enough,
                kinds=KINDS):
    """Operations on ``compute`` until ``stop``, or ``enough(done)``."""
    rng = random.Random(seed)
    done = 0
    while not stop.is_set() and not enough(done):
        # In turn, from a different kind on each host: a short run has
        # every kind.
        kind = kinds[(seed + done) % len(kinds)]
        figures.operation(compute.name, Operation(
            compute, storages, kind, rng, hold, figures).run(stop))
        done += 1
