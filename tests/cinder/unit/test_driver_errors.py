"""Every SPDK client error at every step becomes the documented outcome.

Table-driven: for each driver method, each RPC step it makes and each
class of spdk_vhost_core.exception, a fresh FakeSpdk is prepared, the
error is injected into that step, and the outcome is checked: the Cinder
exception of the method's docstring (by default errors.translated's
VolumeBackendAPIException, with the SPDK error as its cause) or success
where the error means "already done", and the target left as it was
before the call when the method rolls back.
"""

import logging

from cinder import exception
import fixtures

from spdk_vhost_core import exception as rpc_exc
from tests.cinder.unit import driver_base as dbase
from tests.cinder.unit import fake_spdk

VBAE = exception.VolumeBackendAPIException
OK = 'success'
TRANSPORT = (rpc_exc.Timeout, rpc_exc.TargetUnreachable,
             rpc_exc.ProtocolError)
GONE = (rpc_exc.NotFound, rpc_exc.InvalidParams)
QOS = {'total_iops_sec': '2000'}
QOS_PER_GB = {'total_iops_sec_per_gb': '1000'}
REMOTE = dbase.REMOTE
# The volume's vhost controller, looked up by name before an lvol goes:
# not found is the usual answer.
NO_CONTROLLER = {('vhost_get_controllers', rpc_exc.NotFound): OK}


def _step(spec):
    """'method' or 'method#n' (the n-th later call) -> (method, n)."""
    method, _sep, skip = spec.partition('#')
    return method, int(skip or 0)


def _caused_by(err, cls):
    while err is not None:
        if isinstance(err, cls):
            return True
        err = err.__cause__ or err.__context__
    return False


class ErrorTableTestCase(dbase.ImageTestCase):

    def setUp(self):
        super().setUp()
        # Hundreds of expected rollback warnings: keep them off stdout.
        self.useFixture(fixtures.FakeLogger(level=logging.INFO))

    def check(self, prepare, action, steps, expect=None, rolls_back=True):
        """Run the table; report every mismatch at once.

        ``prepare()`` builds the objects on the fresh target and returns
        the arguments of driver method ``action`` (a name: each run has
        its own driver). ``expect`` maps an error class, or
        ``(step, class)``, to an exception class or OK; the default is
        VolumeBackendAPIException.
        """
        expect = expect or {}
        problems = []
        for spec in steps:
            for cls in fake_spdk.ALL_ERRORS:
                wanted = expect.get((spec, cls), expect.get(cls, VBAE))
                problem = self._one(prepare, action, spec, cls, wanted,
                                    rolls_back)
                if problem:
                    problems.append('%s %s: %s' % (spec, cls.__name__,
                                                   problem))
        self.assertEqual([], problems)

    def _one(self, prepare, action, spec, cls, wanted, rolls_back):
        self.reset()
        args = prepare()
        before = self.fake.state()
        method, skip = _step(spec)
        self.fake.fail(method, cls, skip)
        try:
            getattr(self.driver, action)(*args)
        except Exception as err:
            got = err
        else:
            got = None
        if self.fake.pending_faults():
            return 'step never reached'
        if wanted == OK:
            return None if got is None else 'raised %r' % (got,)
        if not isinstance(got, wanted):
            return 'wanted %s, got %r' % (wanted.__name__, got)
        if cls is not rpc_exc.NotFound and not _caused_by(got, cls):
            return '%r does not chain the SPDK error' % (got,)
        if rolls_back and self.fake.state() != before:
            return 'target changed: %s -> %s' % (before, self.fake.state())
        return None


class SetupErrorsTest(ErrorTableTestCase):

    def test_check_for_setup_error(self):
        expect = {('rpc_get_methods', cls): exception.VolumeDriverException
                  for cls in fake_spdk.ALL_ERRORS}
        expect.update({('spdk_get_version', cls):
                       exception.VolumeDriverException
                       for cls in fake_spdk.ALL_ERRORS})
        expect[('bdev_lvol_get_lvstores', rpc_exc.NotFound)] = (
            exception.VolumeDriverException)
        expect[('nvmf_create_transport', rpc_exc.AlreadyExists)] = OK
        self.check(lambda: (), 'check_for_setup_error',
                   ['rpc_get_methods', 'spdk_get_version',
                    'bdev_lvol_get_lvstores',
                    'nvmf_create_transport', 'bdev_lvol_get_lvols',
                    'bdev_get_bdevs'], expect)

    def test_get_volume_stats(self):
        self.check(lambda: (True,), 'get_volume_stats',
                   ['bdev_get_bdevs', 'bdev_lvol_get_lvstores'])


class VolumeErrorsTest(ErrorTableTestCase):

    def test_create_volume(self):
        vtype = self.make_type(QOS)
        self.check(
            lambda: (self.make_volume(vtype=vtype),),
            'create_volume',
            ['bdev_lvol_create', 'bdev_get_bdevs', 'bdev_get_bdevs#1',
             'bdev_set_qos_limit', 'bdev_get_bdevs#2'],
            # An idle lvol's QoS is then changed through an I/O channel.
            {('bdev_set_qos_limit', rpc_exc.TryAgain): OK})

    def test_delete_volume(self):
        self.check(
            lambda: (self.volume(),),
            'delete_volume',
            ['bdev_get_bdevs', 'vhost_get_controllers', 'bdev_lvol_delete'],
            # No lvol is success; a busy one is VolumeIsBusy.
            {**NO_CONTROLLER,
             ('bdev_get_bdevs', rpc_exc.NotFound): OK,
             ('bdev_lvol_delete', rpc_exc.NotFound): OK,
             ('bdev_lvol_delete', rpc_exc.Busy): exception.VolumeIsBusy})

    def test_extend_volume(self):
        vtype = self.make_type(QOS_PER_GB)
        self.check(
            lambda: (self.volume(vtype=vtype), 2),
            'extend_volume',
            # Up to the read-back after the new limit is in force: the old
            # limit is restored along with the old size.
            ['bdev_get_bdevs', 'bdev_lvol_resize', 'bdev_get_bdevs#1',
             'bdev_get_bdevs#2', 'bdev_get_bdevs#3', 'nvmf_create_subsystem',
             'nvmf_subsystem_add_ns', 'bdev_set_qos_limit#1',
             'bdev_get_bdevs#4'])

    def test_manage_existing_get_size(self):
        def prepare():
            self.fake.bdev_lvol_create('legacy', 100, lvs_name=dbase.LVS)
            return (self.make_volume(), {'source-name': 'lvs0/legacy'})
        self.check(prepare, 'manage_existing_get_size',
                   ['bdev_get_bdevs'],
                   {rpc_exc.NotFound:
                    exception.ManageExistingInvalidReference})

    def test_manage_existing(self):
        vtype = self.make_type(QOS)

        def prepare():
            self.fake.bdev_lvol_create('legacy', 1024, lvs_name=dbase.LVS)
            return (self.make_volume(vtype=vtype),
                    {'source-name': 'lvs0/legacy'})
        self.check(prepare, 'manage_existing',
                   ['bdev_get_bdevs', 'bdev_lvol_rename',
                    'bdev_get_bdevs#1', 'bdev_set_qos_limit'],
                   {('bdev_get_bdevs', rpc_exc.NotFound):
                    exception.ManageExistingInvalidReference,
                    ('bdev_set_qos_limit', rpc_exc.TryAgain): OK})

    def test_unmanage(self):
        self.check(lambda: (self.volume(),), 'unmanage',
                   ['bdev_get_bdevs', 'bdev_lvol_rename'],
                   {('bdev_get_bdevs', rpc_exc.NotFound): OK})

    def test_retype(self):
        old, new = self.make_type(QOS), self.make_type(QOS_PER_GB)
        self.check(
            lambda: (self.ctxt, self.volume(size=3, vtype=old), new, {},
                     {'host': dbase.base.HOST + '#' + dbase.LVS}),
            'retype',
            ['bdev_get_bdevs', 'bdev_get_bdevs#1', 'bdev_get_bdevs#2',
             'nvmf_create_subsystem', 'nvmf_subsystem_add_ns',
             'bdev_set_qos_limit#1', 'bdev_get_bdevs#3'])


class MigrationErrorsTest(ErrorTableTestCase):

    lvstores = (dbase.LVS, 'lvs1')

    def test_migrate_volume(self):
        vtype = self.make_type(QOS)
        # Deletes: a stale copy, the scratch lvols of an interrupted try,
        # the old lvol, then the temporary snapshot (a failure there is
        # logged; the next start sweeps it).
        expect = {('bdev_lvol_delete#4', cls): OK
                  for cls in fake_spdk.ALL_ERRORS}
        expect.update(NO_CONTROLLER)
        expect.update({('bdev_lvol_delete', rpc_exc.NotFound): OK,
                       ('bdev_set_qos_limit', rpc_exc.TryAgain): OK})
        self.check(
            lambda: (self.ctxt, self.volume(vtype=vtype),
                     {'host': dbase.base.HOST + '#lvs1'}),
            'migrate_volume',
            ['bdev_get_bdevs', 'vhost_get_controllers',
             'bdev_lvol_delete', 'bdev_lvol_create',
             'bdev_lvol_snapshot', 'bdev_lvol_start_shallow_copy',
             'bdev_lvol_check_shallow_copy', 'bdev_lvol_rename',
             'bdev_set_qos_limit', 'bdev_lvol_delete#3',
             'bdev_lvol_delete#4'], expect)


class SnapshotErrorsTest(ErrorTableTestCase):

    def test_create_snapshot(self):
        self.check(lambda: (self.make_snapshot(self.volume()),),
                   'create_snapshot',
                   ['bdev_get_bdevs', 'bdev_lvol_snapshot'])

    def test_delete_snapshot(self):
        self.check(
            lambda: (self.snapshot(self.volume()),),
            'delete_snapshot',
            ['bdev_get_bdevs', 'bdev_lvol_delete'],
            # No snapshot lvol is success; one SPDK refuses for its
            # clones is hidden instead; an open one is busy.
            {('bdev_get_bdevs', rpc_exc.NotFound): OK,
             ('bdev_lvol_delete', rpc_exc.NotFound): OK,
             ('bdev_lvol_delete', rpc_exc.NotPermitted): OK,
             ('bdev_lvol_delete', rpc_exc.Busy): exception.SnapshotIsBusy})

    def test_delete_snapshot_with_clones(self):
        def prepare():
            return (self.snapshot_with_clones()[1],)
        self.check(prepare, 'delete_snapshot',
                   ['bdev_get_bdevs', 'bdev_lvol_create'],
                   {('bdev_get_bdevs', rpc_exc.NotFound): OK,
                    ('bdev_lvol_create', rpc_exc.AlreadyExists): OK})

    def test_create_volume_from_snapshot(self):
        vtype = self.make_type(QOS)
        self.check(
            lambda: (self.make_volume(size=2, vtype=vtype),
                     self.snapshot(self.volume())),
            'create_volume_from_snapshot',
            ['bdev_get_bdevs', 'bdev_lvol_clone', 'bdev_get_bdevs#1',
             'bdev_lvol_resize', 'bdev_set_qos_limit'],
            {('bdev_set_qos_limit', rpc_exc.TryAgain): OK})

    def test_create_cloned_volume(self):
        vtype = self.make_type(QOS)
        self.check(
            lambda: (self.make_volume(size=2, vtype=vtype), self.volume()),
            'create_cloned_volume',
            ['bdev_get_bdevs', 'bdev_lvol_snapshot', 'bdev_lvol_clone',
             'bdev_lvol_resize', 'bdev_set_qos_limit'],
            {('bdev_set_qos_limit', rpc_exc.TryAgain): OK})

    def test_revert_to_snapshot(self):
        vtype = self.make_type(QOS)

        def prepare():
            volume = self.volume(vtype=vtype)
            return (self.ctxt, volume, self.snapshot(volume))
        self.check(
            prepare, 'revert_to_snapshot',
            ['bdev_get_bdevs', 'vhost_get_controllers',
             'bdev_get_bdevs#1', 'bdev_lvol_clone',
             'bdev_lvol_rename', 'bdev_lvol_rename#1', 'bdev_set_qos_limit',
             'bdev_lvol_delete'],
            {**NO_CONTROLLER, ('bdev_set_qos_limit', rpc_exc.TryAgain): OK})


class ConnectionErrorsTest(ErrorTableTestCase):

    def test_initialize_connection(self):
        expect = {('nvmf_get_subsystems', cls): OK for cls in GONE}
        self.check(
            lambda: (self.volume(), REMOTE),
            'initialize_connection',
            ['bdev_get_bdevs', 'nvmf_get_subsystems',
             'nvmf_create_subsystem', 'nvmf_subsystem_add_ns',
             'nvmf_subsystem_add_listener', 'nvmf_subsystem_add_host'],
            expect)

    def test_terminate_connection(self):
        def prepare():
            volume = self.volume()
            self.driver.initialize_connection(volume, REMOTE)
            return volume, REMOTE
        # A subsystem already gone (NotFound or -32602) is success. No
        # rollback: a detach goes as far as it can.
        expect = {(step, cls): OK for cls in GONE
                  for step in ('nvmf_get_subsystems',
                               'nvmf_delete_subsystem')}
        self.check(prepare, 'terminate_connection',
                   ['nvmf_get_subsystems', 'nvmf_subsystem_remove_host',
                    'nvmf_delete_subsystem'], expect, rolls_back=False)


class ImageErrorsTest(ErrorTableTestCase):

    def test_copy_image_to_volume(self):
        vtype = self.make_type(QOS)

        def prepare():
            return (self.ctxt, self.volume(vtype=vtype), self.glance,
                    self.image()['id'])
        # Removing leftovers of an earlier attempt: gone is fine.
        expect = {('bdev_lvol_delete', rpc_exc.NotFound): OK,
                  # A scratch export left by an earlier attempt.
                  ('nvmf_delete_subsystem', rpc_exc.NotFound): OK,
                  ('nvmf_delete_subsystem', rpc_exc.InvalidParams): OK,
                  ('nvmf_get_subsystems', rpc_exc.NotFound): OK,
                  ('nvmf_get_subsystems', rpc_exc.InvalidParams): OK,
                  ('bdev_set_qos_limit', rpc_exc.TryAgain): OK}
        expect.update(NO_CONTROLLER)
        self.check(prepare, 'copy_image_to_volume',
                   ['bdev_get_bdevs', 'vhost_get_controllers',
                    'bdev_lvol_get_lvstores', 'bdev_lvol_delete',
                    'bdev_lvol_create', 'nvmf_delete_subsystem',
                    'nvmf_get_subsystems', 'nvmf_create_subsystem',
                    'nvmf_subsystem_add_ns', 'nvmf_subsystem_add_listener',
                    'nvmf_subsystem_add_host', 'bdev_get_bdevs#1',
                    'bdev_lvol_rename', 'bdev_lvol_rename#1',
                    'bdev_set_qos_limit', 'bdev_lvol_delete#1'], expect)
        self.assertEqual([], self.staged())

    def test_copy_volume_to_image(self):
        def prepare():
            src = self.volume()
            volume = self.make_volume()
            self.driver.create_cloned_volume(volume, src)
            return self.ctxt, volume, self.glance, self.image()
        expect = {(step, rpc_exc.NotFound): OK
                  for step in ('bdev_lvol_delete', 'bdev_lvol_delete#1',
                               'bdev_aio_delete')}
        self.check(prepare, 'copy_volume_to_image',
                   ['bdev_get_bdevs', 'bdev_lvol_delete',
                    'bdev_lvol_delete#1', 'bdev_lvol_snapshot',
                    'bdev_lvol_clone', 'bdev_lvol_decouple_parent',
                    'bdev_lvol_set_read_only', 'bdev_aio_delete',
                    'bdev_aio_create', 'bdev_lvol_start_shallow_copy',
                    'bdev_lvol_check_shallow_copy'], expect)
        self.assertEqual([], self.staged())

    def test_clone_image(self):
        vtype = self.make_type(QOS)

        def prepare():
            self.driver = self.make_driver(spdk_image_cache_enabled=True)
            return (self.ctxt, self.make_volume(vtype=vtype), None,
                    self.image(), self.glance)
        # No base yet (lookup NotFound) means: import one.
        expect = {('bdev_get_bdevs', rpc_exc.NotFound): OK,
                  ('bdev_lvol_delete', rpc_exc.NotFound): OK,
                  # A scratch export left by an earlier attempt.
                  ('nvmf_delete_subsystem', rpc_exc.NotFound): OK,
                  ('nvmf_delete_subsystem', rpc_exc.InvalidParams): OK,
                  ('nvmf_get_subsystems', rpc_exc.NotFound): OK,
                  ('nvmf_get_subsystems', rpc_exc.InvalidParams): OK,
                  ('bdev_set_qos_limit', rpc_exc.TryAgain): OK}
        self.check(prepare, 'clone_image',
                   ['bdev_get_bdevs', 'bdev_lvol_get_lvols',
                    'bdev_lvol_get_lvstores', 'bdev_lvol_delete',
                    'bdev_lvol_create', 'nvmf_delete_subsystem',
                    'nvmf_get_subsystems', 'nvmf_create_subsystem',
                    'nvmf_subsystem_add_ns', 'nvmf_subsystem_add_listener',
                    'nvmf_subsystem_add_host', 'bdev_get_bdevs#1',
                    'bdev_lvol_set_read_only', 'bdev_lvol_clone',
                    'bdev_get_bdevs#2', 'bdev_lvol_resize',
                    'bdev_set_qos_limit'], expect)
