"""Hostile connection_info at the connector and the Nova volume driver.

The contract (see the classes' docstrings): malformed input raises the
documented exception before any RPC is sent. The connector here has a
real configuration and a client that records whether it was called and
then answers like an absent target, so a property that slips past the
checks shows up as an RPC, not as a pass.
"""

import fixtures
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from nova import exception as nova_exc
from oslo_config import cfg
from oslo_config import fixture as config_fixture

from nova_vhost_user import brick
from nova_vhost_user import volume
from os_brick_connector import connector
from os_brick_connector import connector_errors as errors
from os_brick_connector import frontend_qos
from os_brick_connector import options
from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import properties
from spdk_vhost_core import validation
from tests import base
from tests import fuzz
from tests.nova.unit import nova_fakes as fakes

FUZZ = settings(max_examples=300, deadline=None)


def _valid(props):
    try:
        validation.check_properties(props, properties.VOLUME_ID)
    except spdk_exc.InvalidProperties:
        return False
    return True


class FuzzCase(base.TestCase):

    def setUp(self):
        super().setUp()
        conf = cfg.ConfigOpts()
        options.register_opts(conf)
        self.useFixture(config_fixture.Config(conf))
        self.client = fuzz.AbsentTarget()
        self.connector = connector.SpdkVhostConnector(
            None, conf=conf.spdk_vhost, client=self.client)

    def outcome(self, func, *args, **kwargs):
        """'refused' (no RPC made) or 'sent' (an RPC was tried)."""
        del self.client.calls[:]
        try:
            func(*args, **kwargs)
        except errors.InvalidConnectionProperties:
            self.assertEqual([], self.client.calls)
            return 'refused'
        except errors.TargetError as err:
            # Only os-brick exceptions leave the connector.
            self.assertIsInstance(err.__cause__, spdk_exc.TargetUnreachable)
            return 'sent'
        self.fail('%s returned without reaching the target' % func)


class TestConnectorFuzz(FuzzCase):

    @FUZZ
    @given(fuzz.anything)
    def test_connect(self, props):
        got = self.outcome(self.connector.connect_volume, props)
        self.assertEqual('sent' if _valid(props) else 'refused', got)

    @FUZZ
    @given(fuzz.anything)
    def test_disconnect_extend_paths(self, props):
        for func in (self.connector.extend_volume,
                     self.connector.get_volume_paths):
            self.outcome(func, props)
        self.outcome(self.connector.disconnect_volume, props, None)

    def test_known_bad_values_named(self):
        good = {'volume_id': fuzz.VOLUME_ID, 'transport': 'tcp',
                'nqn': fuzz.GOOD_NQN, 'traddr': '192.0.2.1'}
        self.assertTrue(_valid(good))
        for key, value in (('nqn', 'nqn.2014-08.org.x: y'),
                           ('nqn', 'not-an-nqn'), ('nqn', 'x' * 300),
                           ('host_nqn', 'iqn.1993-08.org.debian:01'),
                           ('traddr', 'storage.example.com'),
                           ('trsvcid', '70000'), ('adrfam', 'ipv6'),
                           ('ns_id', 0), ('ns_id', '1'),
                           ('volume_id', '../../etc/passwd'),
                           ('block_size', 1000), ('qos_specs', 'fast'),
                           ('transport', 'fc')):
            with self.subTest(key=key, value=value):
                err = self.assertRaises(
                    errors.InvalidConnectionProperties,
                    self.connector.connect_volume, dict(good, **{key: value}))
                self.assertIn(key, str(err))
        self.assertEqual([], self.client.calls)


class TestFrontendQosFuzz(base.TestCase):

    @FUZZ
    @given(st.dictionaries(st.one_of(st.sampled_from(
        ['total_iops_sec', 'total_bytes_sec', 'read_bytes_sec',
         'write_bytes_sec']), st.text(max_size=8)), fuzz.values,
        max_size=4))
    def test_only_invalid_spec_or_whole_limits(self, specs):
        try:
            limits = frontend_qos.spdk_limits(specs)
        except errors.InvalidQoSSpec:
            return
        for value in limits.values():
            self.assertIsInstance(value, int)
            self.assertGreaterEqual(value, 0)


class TestNovaVolumeDriverFuzz(FuzzCase):

    def setUp(self):
        super().setUp()
        self.useFixture(config_fixture.Config(volume.CONF))
        self.useFixture(fixtures.MockPatchObject(
            brick, 'get_connector', return_value=self.connector))
        self.driver = volume.LibvirtVhostUserBlkVolumeDriver(
            fakes.FakeHost(fakes.host_topology([0, 1], [2, 3])))

    @FUZZ
    @given(fuzz.anything, fuzz.values)
    def test_connect_volume(self, data, serial):
        info = {'driver_volume_type': 'spdk_vhost', 'data': data,
                'serial': serial}
        try:
            got = self.outcome(self.driver.connect_volume, info,
                               fakes.instance())
        except (nova_exc.VolumeAttachFailed,
                nova_exc.InvalidVolumeAccessMode,
                nova_exc.VolumeEncryptionNotSupported):
            self.assertEqual([], self.client.calls)
            return
        self.assertIsInstance(data, dict)
        if got == 'sent':
            self.assertTrue(_valid(dict(data, numa_node=None)))

    @FUZZ
    @given(fuzz.json_values)
    def test_malformed_connection_info(self, info):
        if isinstance(info, dict) and isinstance(info.get('data'), dict):
            return
        for func in (self.driver.connect_volume,
                     self.driver.disconnect_volume):
            self.assertRaises(nova_exc.VolumeAttachFailed, func, info,
                              fakes.instance())
        self.assertEqual([], self.client.calls)
