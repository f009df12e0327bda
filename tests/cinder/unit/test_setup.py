"""check_for_setup_error: one clear message per way a target is unfit."""

from cinder import exception
from cinder.volume import configuration
from cinder.volume import driver as cinder_driver
import fixtures

from cinder_spdk_vhost import driver as spdk_driver
from cinder_spdk_vhost import peers
from cinder_spdk_vhost import rollback
from cinder_spdk_vhost import target_rpcs
from spdk_vhost_agent import methods as agent_methods
from spdk_vhost_core import exception as rpc_exc
from spdk_vhost_core import node_state
from tests.cinder import base
from tests.cinder.unit import driver_base as dbase


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
        self.assertIn('(lacks %s)' % missing, str(err))

    def test_missing_rpcs_named(self):
        self.check_refused(
            target_rpcs.LVOL | target_rpcs.NVMF -
            {'nvmf_create_subsystem', 'nvmf_subsystem_add_host'},
            'nvmf_create_subsystem, nvmf_subsystem_add_host')

    def test_keyring_required_with_dhchap(self):
        self.check_refused(target_rpcs.LVOL | target_rpcs.NVMF,
                           'keyring_file_add_key, keyring_file_remove_key',
                           spdk_nvmf_auth='dhchap',
                           spdk_nvmf_key_dir='/var/lib/spdk/keys')


class Conf(object):
    def __init__(self, transport='tcp', auth='none', agent_url=None):
        self.spdk_nvmf_transport = transport
        self.spdk_nvmf_auth = auth
        self.spdk_agent_url = agent_url


class RequiredRpcsTest(base.CinderTestCase):
    """Each SPDK application serves the configurations it can."""

    # What rpc_get_methods lists, in part, per application (v26.05).
    LVOL = target_rpcs.LVOL | target_rpcs.STAGING
    NVMF_TGT = LVOL | target_rpcs.NVMF | target_rpcs.AUTH
    VHOST = LVOL | target_rpcs.AUTH | {'vhost_get_controllers'}
    SPDK_TGT = NVMF_TGT | VHOST
    # What an nvmf_tgt's agent lists: no files, its own key methods.
    AGENT = target_rpcs.LVOL | target_rpcs.NVMF | target_rpcs.AGENT_AUTH

    def test_storage_host_on_nvmf_tgt(self):
        self.assertIsNone(target_rpcs.missing(Conf(), self.NVMF_TGT))
        self.assertIsNone(target_rpcs.missing(Conf(auth='dhchap'),
                                              self.NVMF_TGT))

    def test_hyperconverged_on_vhost_only_without_nvmf(self):
        self.assertIsNone(target_rpcs.missing(Conf('none'), self.VHOST))
        reason = target_rpcs.missing(Conf('tcp'), self.VHOST)
        for said in ('run nvmf_tgt', 'spdk_tgt', 'not vhost',
                     'spdk_nvmf_transport = none', 'nvmf_create_subsystem'):
            self.assertIn(said, reason)

    def test_spdk_tgt_serves_everything(self):
        for conf in (Conf(), Conf('none'), Conf('rdma', 'dhchap')):
            self.assertIsNone(target_rpcs.missing(conf, self.SPDK_TGT))

    def test_storage_node_behind_its_agent(self):
        for auth in ('none', 'dhchap'):
            self.assertIsNone(target_rpcs.missing(
                Conf(auth=auth, agent_url='https://node:5261'), self.AGENT))
        # Without the agent, the same target would need to open files.
        reason = target_rpcs.missing(Conf(), self.AGENT)
        self.assertIn('bdev_aio_create', reason)

    def test_the_agent_offers_what_a_node_backend_needs(self):
        offered = agent_methods.FORWARDED | set(node_state.METHODS)
        for auth in ('none', 'dhchap'):
            conf = Conf(auth=auth, agent_url='https://node:5261')
            for group, need in target_rpcs.required(conf):
                self.assertEqual(set(), group - offered, need)

    def test_no_lvol_module(self):
        reason = target_rpcs.missing(Conf('none'), {'rpc_get_methods'})
        self.assertIn('lvol module', reason)

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


class VersionCheckTest(dbase.DriverTestCase):
    """The target's SPDK release is checked against the supported ones."""

    def _answer(self, major, minor, patch=0):
        self.fake.version = {
            'version': 'SPDK v%d.%02d' % (major, minor),
            'fields': {'major': major, 'minor': minor, 'patch': patch,
                       'suffix': ''}}

    def test_both_supported_releases_start(self):
        for minor in (1, 5):
            self._answer(26, minor, patch=1)
            self.driver.check_for_setup_error()

    def test_other_release_refused_naming_the_supported(self):
        for major, minor in ((25, 9), (26, 9)):
            self._answer(major, minor)
            err = self.assertRaises(exception.VolumeDriverException,
                                    self.driver.check_for_setup_error)
            self.assertIn('runs SPDK v%d.%02d' % (major, minor), str(err))
            self.assertIn('supports SPDK v26.01, v26.05 only', str(err))


class ToolsTest(dbase.DriverTestCase):
    """spdk_dd is checked where it runs: the backend's own section."""

    def test_backend_without_spdk_dd_refused_naming_it(self):
        err = self.assertRaises(exception.InvalidConfigurationValue,
                                self.make_driver,
                                spdk_dd_path='no-such-spdk_dd')
        self.assertIn('spdk_dd_path', str(err))
        self.assertIn('not an executable on this host', str(err))

    def test_replica_target_section_needs_none(self):
        # The backend's own spdk_dd runs every copy, to or from a peer:
        # a replica target's section leaves it at its default, which
        # is no executable here.
        peer = peers.Peer.from_section('peer-b')
        self.assertEqual('peer-b', peer.name)


class RebuildRoomTest(dbase.DriverTestCase):
    """The own copies' rebuild room is the over-subscription ratio's."""

    WARNING = 'max_over_subscription_ratio is'

    def logged(self, **overrides):
        logger = self.useFixture(fixtures.FakeLogger())
        self.make_driver(**overrides)
        return logger.output

    def test_replicas_on_over_subscribed_pools_are_warned_of(self):
        for ratio in ('20.0', 'auto'):
            self.assertIn(self.WARNING, self.logged(
                spdk_replica_targets=['peer-b'],
                max_over_subscription_ratio=ratio))

    def test_no_warning_without_copies_or_over_subscription(self):
        self.assertNotIn(self.WARNING, self.logged(
            max_over_subscription_ratio='20.0'))
        self.assertNotIn(self.WARNING, self.logged(
            spdk_replica_targets=['peer-b'],
            max_over_subscription_ratio='1.0'))
