"""Hostile connector properties, sizes and QoS at the Cinder driver.

As the driver's docstring says: malformed input raises its documented
Cinder exception before any RPC. The driver's client records calls and
answers like an absent target, so input that slips past the checks is
seen as an RPC attempt.
"""

import os

from cinder import exception
from cinder.volume import configuration
from cinder.volume import driver as cinder_driver
import fixtures
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from cinder_spdk_vhost import driver as spdk_driver
from cinder_spdk_vhost import qos
from cinder_spdk_vhost import validation
from spdk_vhost_core import spdk_rpc
from tests.cinder import base
from tests import fuzz

FUZZ = settings(max_examples=300, deadline=None)


class FuzzTest(base.CinderTestCase):

    def setUp(self):
        super().setUp()
        conf = configuration.Configuration(cinder_driver.volume_opts,
                                           config_group=base.BACKEND)
        self.driver = spdk_driver.SpdkVhostDriver(configuration=conf,
                                                  host=base.HOST)
        base.CONF.set_override('spdk_target_id', 'storage-target',
                               group=base.BACKEND)
        base.CONF.set_override('spdk_dd_path', 'true', group=base.BACKEND)
        self.client = fuzz.AbsentTarget()
        self.useFixture(fixtures.MockPatchObject(
            spdk_rpc.SpdkClient, 'from_conf',
            side_effect=lambda conf: self.client))
        self.driver.do_setup(self.ctxt)
        self.volume = self.make_volume()

    def outcome(self, documented, func, *args):
        del self.client.calls[:]
        try:
            func(*args)
        except documented:
            self.assertEqual([], self.client.calls)
            return 'refused'
        except exception.VolumeBackendAPIException:
            self.assertNotEqual([], self.client.calls)
            return 'sent'
        return 'done'

    @FUZZ
    @given(fuzz.connector_dicts)
    def test_initialize_connection(self, connector):
        got = self.outcome(exception.InvalidConnectorException,
                           self.driver.initialize_connection, self.volume,
                           connector)
        if got == 'sent':
            local = connector.get('spdk_target_id') == 'storage-target'
            self.assertTrue(local or validation.brick_validation.is_nqn(
                connector.get('nqn')), connector)

    @FUZZ
    @given(fuzz.connector_dicts)
    def test_terminate_connection(self, connector):
        self.outcome(exception.InvalidConnectorException,
                     self.driver.terminate_connection, self.volume,
                     connector)

    @FUZZ
    @given(st.one_of(fuzz.values, st.integers()))
    def test_sizes(self, size):
        self.volume.size = size if isinstance(size, int) else 1
        valid = (isinstance(size, int) and not isinstance(size, bool)
                 and 1 <= size <= validation.MAX_SIZE_GB)
        got = self.outcome(exception.InvalidInput,
                           self.driver.extend_volume, self.volume, size)
        self.assertEqual('sent' if valid else 'refused', got)

    def test_hostile_names_refused(self):
        for name in ('../lvs1/x', 'a/b', '', 'x' * 64, 'a b', '-x', None):
            with self.subTest(name=name):
                self.assertEqual('refused', self.outcome(
                    exception.InvalidInput, validation.check_volume,
                    _Named(name, 1)))

    @FUZZ
    @given(st.dictionaries(st.sampled_from(qos.SUPPORTED_KEYS + ('x',)),
                           fuzz.values, max_size=4), st.integers(1, 10))
    def test_qos_values(self, specs, size):
        try:
            limits = qos.to_limits(specs, size)
        except exception.InvalidQoSSpecs:
            return
        for value in limits.values():
            self.assertIsInstance(value, int)
            self.assertGreaterEqual(value, 0)


class _Named(object):
    def __init__(self, name, size):
        self.name = name
        self.size = size


class ConfigTest(base.CinderTestCase):
    """Every option refused at do_setup names itself."""

    def check(self, option, value):
        conf = configuration.Configuration(cinder_driver.volume_opts,
                                           config_group=base.BACKEND)
        drv = spdk_driver.SpdkVhostDriver(configuration=conf)
        base.CONF.set_override('spdk_dd_path', 'true', group=base.BACKEND)
        base.CONF.set_override(option, value, group=base.BACKEND)
        err = self.assertRaises(exception.InvalidConfigurationValue,
                                drv.do_setup, self.ctxt)
        self.assertIn(option, str(err))

    def test_bad_options(self):
        for option, value in (
                ('spdk_lvstores', []), ('spdk_lvstores', ['../x']),
                ('spdk_lvstores', ['a/b']),
                ('spdk_nvmf_nqn_prefix', 'cinder'),
                ('spdk_nvmf_nqn_prefix', 'nqn.2016-06.io.spdk:' + 'x' * 200),
                ('spdk_nvmf_address', 'storage.example.com'),
                ('spdk_target_id', 'a b'),
                ('spdk_rpc_socket', 'spdk.sock'),
                ('spdk_rpc_socket', '/var/../tmp/spdk.sock'),
                ('spdk_image_staging_dir', 'relative/dir'),
                ('spdk_saved_config', '/no/such/dir/spdk_tgt.json'),
                ('spdk_dd_path', '/no/such/spdk_dd'),
                ('spdk_dd_path', 'no-such-spdk_dd')):
            with self.subTest(option=option, value=value):
                self.check(option, value)
                base.CONF.clear_override(option, group=base.BACKEND)

    def test_world_writable_rpc_socket_warns(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 's')
        with open(path, 'w'):
            pass
        os.chmod(path, 0o666)
        logger = self.useFixture(fixtures.FakeLogger(
            name='spdk_vhost_core.validation'))
        conf = configuration.Configuration(cinder_driver.volume_opts,
                                           config_group=base.BACKEND)
        drv = spdk_driver.SpdkVhostDriver(configuration=conf)
        base.CONF.set_override('spdk_dd_path', 'true', group=base.BACKEND)
        base.CONF.set_override('spdk_rpc_socket', path, group=base.BACKEND)
        drv.do_setup(self.ctxt)
        self.addCleanup(drv.client.close)
        self.assertIn('spdk_rpc_socket', logger.output)
        self.assertIn('world-writable', logger.output)
