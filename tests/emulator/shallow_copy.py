"""Background shallow copies (bdev_lvol_start/check_shallow_copy).

SPDK copies, cluster by cluster, only the clusters the source lvol owns
(not its parents') onto another bdev, in the background, and
reports progress until the final state has been read once, then forgets
the operation.
"""

import logging
import threading

LOG = logging.getLogger(__name__)


class _Operation(object):
    def __init__(self):
        self.state = 'in progress'
        self.copied = 0
        self.total = 0
        self.error = None

    def to_json(self):
        info = {'copied_clusters': self.copied,
                'total_clusters': self.total, 'state': self.state}
        if self.error is not None:
            info['error'] = self.error
        return info


class ShallowCopies(object):
    """The target's table of shallow copy operations."""

    def __init__(self, dataplane):
        self._dataplane = dataplane
        self._ops = {}
        self._threads = []
        self._next_id = 1
        self._lock = threading.Lock()

    def start(self, src_path, dst_path, cluster_size, size, refused=None):
        """Register an operation; ``refused`` is an error text to fail it.

        SPDK accepts the call and fails the operation asynchronously when
        the source is writable, so a refusal is still an operation id.
        """
        op = _Operation()
        with self._lock:
            op_id = self._next_id
            self._next_id += 1
            self._ops[op_id] = op
        if refused is not None:
            op.state, op.error = 'error', refused
            return op_id
        thread = threading.Thread(
            target=self._run, name='shallow-copy-%d' % op_id, daemon=True,
            args=(op, src_path, dst_path, cluster_size, size))
        self._threads.append(thread)
        thread.start()
        return op_id

    def _run(self, op, src_path, dst_path, cluster_size, size):
        try:
            clusters = set()
            for offset, length in self._dataplane.allocated_extents(
                    src_path):
                if length > 0:
                    clusters.update(range(
                        offset // cluster_size,
                        (offset + length - 1) // cluster_size + 1))
            clusters = sorted(c for c in clusters
                              if c * cluster_size < size)
            op.total = len(clusters)
            for cluster in clusters:
                start = cluster * cluster_size
                length = min(cluster_size, size - start)
                self._dataplane.copy_extents(src_path, [(start, length)],
                                             dst_path)
                op.copied += 1
            op.state = 'complete'
        except Exception as err:
            LOG.exception('shallow copy of %s failed', src_path)
            op.error = str(err)
            op.state = 'error'

    def check(self, op_id):
        """The operation's JSON, or None if unknown or already reported."""
        with self._lock:
            op = self._ops.get(op_id)
            if op is None:
                return None
            info = op.to_json()
            if op.state != 'in progress':
                del self._ops[op_id]
        return info

    def wait(self, timeout=None):
        for thread in self._threads:
            thread.join(timeout)
