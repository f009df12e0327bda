"""check_for_setup_error: one clear message per way a target is unfit."""

from cinder import exception
from cinder.volume import configuration
from cinder.volume import driver as cinder_driver

from cinder_spdk_vhost import driver as spdk_driver
from cinder_spdk_vhost import rollback
from os_brick_connector import exception as rpc_exc
from tests.cinder import base


class _OldTarget(object):
    """A target whose rpc_get_methods lacks some of what the driver uses."""

    target = 'unix:/fake.sock'

    def __init__(self, methods):
        self.methods = methods

    def rpc_get_methods(self):
        return sorted(self.methods)


class SetupTest(base.CinderTestCase):

    def check_refused(self, methods, missing, **options):
        conf = configuration.Configuration(cinder_driver.volume_opts,
                                           config_group=base.BACKEND)
        drv = spdk_driver.SpdkVhostDriver(configuration=conf)
        for name, value in options.items():
            base.CONF.set_override(name, value, group=base.BACKEND)
        drv.client = _OldTarget(methods)
        err = self.assertRaises(exception.VolumeDriverException,
                                drv.check_for_setup_error)
        self.assertIn('lacks the RPC(s) %s:' % missing, str(err))

    def test_missing_rpcs_named(self):
        self.check_refused(
            spdk_driver.REQUIRED_RPCS -
            {'nvmf_create_subsystem', 'nvmf_subsystem_add_host'},
            'nvmf_create_subsystem, nvmf_subsystem_add_host')

    def test_keyring_required_with_dhchap(self):
        self.check_refused(spdk_driver.REQUIRED_RPCS,
                           'keyring_file_add_key, keyring_file_remove_key',
                           spdk_nvmf_auth='dhchap',
                           spdk_nvmf_key_dir='/var/lib/spdk/keys')

    def test_driver_options_listed(self):
        names = {o.name for o in spdk_driver.SpdkVhostDriver.
                 get_driver_options()}
        self.assertIn('spdk_lvstores', names)
        self.assertIn('spdk_rpc_socket', names)


class RollbackTest(base.CinderTestCase):

    def test_undo_newest_first_and_keep_going(self):
        done = []

        def failing():
            done.append('failing')
            raise rpc_exc.NotFound('bdev_lvol_delete', code=-19)
        with self.assertRaisesRegex(ValueError, 'boom'):
            with rollback.Rollback('op') as rb:
                rb.add('first', done.append, 'first')
                rb.add('second', failing)
                rb.add('third', done.append, 'third')
                raise ValueError('boom')
        self.assertEqual(['third', 'failing', 'first'], done)

    def test_nothing_undone_on_success(self):
        done = []
        with rollback.Rollback('op') as rb:
            rb.add('first', done.append, 'first')
        self.assertEqual([], done)
