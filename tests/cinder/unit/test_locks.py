"""locks.locked: cinder.coordination's locks, in order, always released.

A fake coordinator records what the driver asks of its locks; the last
tests use Cinder's real coordinator, started on a file backend by the
test base or never started at all.
"""

import os

from cinder import coordination
from cinder import exception
import fixtures
import testtools
from tooz import coordination as tooz_coordination

from cinder_spdk_vhost import locks
from tests.cinder import base


class FakeLock(object):

    def __init__(self, coordinator, name):
        self.coordinator = coordinator
        self.name = name

    def acquire(self, blocking=True):
        self.coordinator.calls.append(('acquire', self.name, blocking))
        outcome = self.coordinator.acquire.get(self.name, True)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def release(self):
        self.coordinator.calls.append(('release', self.name))
        outcome = self.coordinator.release.get(self.name, True)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


class FakeCoordinator(object):
    """Hands out FakeLocks; ``acquire``/``release`` map names to outcomes."""

    def __init__(self):
        self.calls = []
        self.acquire = {}
        self.release = {}

    def get_lock(self, name):
        return FakeLock(self, name)


class LockedTest(base.CinderTestCase):

    def setUp(self):
        super().setUp()
        self.coordinator = FakeCoordinator()
        self.useFixture(fixtures.MockPatchObject(
            coordination, 'COORDINATOR', self.coordinator))
        self.logger = self.useFixture(fixtures.FakeLogger(
            name=locks.__name__))
        self.names = [locks.vlock('v1'), locks.slock('s1'),
                      locks.block('b1')]
        self.full = ['spdk-vhost-volume-v1', 'spdk-vhost-snapshot-s1',
                     'spdk-vhost-image-base-b1']

    def acquired(self, *names):
        return [('acquire', name, True) for name in names]

    def released(self, *names):
        return [('release', name) for name in names]

    def test_acquired_in_order_released_in_reverse(self):
        with locks.locked(*self.names):
            self.assertEqual(self.acquired(*self.full),
                             self.coordinator.calls)
        self.assertEqual(self.acquired(*self.full) +
                         self.released(*reversed(self.full)),
                         self.coordinator.calls)

    def test_failed_acquire_releases_those_taken(self):
        self.coordinator.acquire[self.full[1]] = (
            tooz_coordination.ToozConnectionError('etcd is gone'))
        body = []
        with testtools.ExpectedException(
                tooz_coordination.ToozConnectionError):
            with locks.locked(*self.names):
                body.append('ran')
        self.assertEqual([], body)
        self.assertEqual(self.acquired(*self.full[:2]) +
                         self.released(self.full[0]),
                         self.coordinator.calls)

    def test_refused_acquire_raises(self):
        self.coordinator.acquire[self.full[2]] = False
        with testtools.ExpectedException(
                tooz_coordination.LockAcquireFailed):
            with locks.locked(*self.names):
                self.fail('ran without its locks')
        self.assertEqual(self.acquired(*self.full) +
                         self.released(self.full[1], self.full[0]),
                         self.coordinator.calls)

    def test_error_in_body_releases_and_propagates(self):
        with testtools.ExpectedException(ValueError):
            with locks.locked(*self.names):
                raise ValueError('the operation failed')
        self.assertEqual(self.released(*reversed(self.full)),
                         self.coordinator.calls[3:])

    def test_failed_release_hides_nothing(self):
        """The other locks still go; the operation's error is the one."""
        self.coordinator.release[self.full[1]] = (
            tooz_coordination.ToozConnectionError('etcd is gone'))
        self.coordinator.release[self.full[2]] = False
        with testtools.ExpectedException(ValueError):
            with locks.locked(*self.names):
                raise ValueError('the operation failed')
        self.assertEqual(self.released(*reversed(self.full)),
                         self.coordinator.calls[3:])
        self.assertIn('Failed to release lock snapshot-s1',
                      self.logger.output)
        self.assertIn('image-base-b1 was no longer held', self.logger.output)

    def test_no_names_no_locks(self):
        with locks.locked():
            pass
        self.assertEqual([], self.coordinator.calls)


class RealCoordinatorTest(base.CinderTestCase):

    def test_names_under_cinder_prefix(self):
        """The test base started Cinder's coordinator, as cinder-volume."""
        self.assertTrue(coordination.COORDINATOR.started)
        lock = coordination.COORDINATOR.get_lock(
            locks.LOCK_PREFIX + locks.vlock('v1'))
        # A file lock: a file of that name in the backend's directory.
        self.assertEqual(os.path.join(
            base.CONF.coordination.backend_url[len('file://'):],
            'cinder-spdk-vhost-volume-v1'), lock.name)
        with locks.locked(locks.vlock('v1'), locks.slock('s1')):
            pass

    def test_never_started_coordinator_refuses(self):
        """No coordinator, no operation: never one run unlocked."""
        self.useFixture(fixtures.MockPatchObject(
            coordination, 'COORDINATOR',
            coordination.Coordinator(prefix='cinder-')))
        with testtools.ExpectedException(exception.LockCreationFailed):
            with locks.locked(locks.vlock('v1')):
                self.fail('ran without its lock')
