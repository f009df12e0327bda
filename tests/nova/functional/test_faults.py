"""Faults on the wire between the connector and the compute target.

The connector talks to its SPDK target through testbed.fault_proxy, which
loses the reply of a call that did run or stalls it past the timeout;
the connector must raise, and leave no vhost controller and no NVMe-oF
attachment behind. Also: a second host cannot reach a volume exported
to the first.
"""

import os

import fixtures

from os_brick_connector import connector
from os_brick_connector import connector_errors as errors
from os_brick_connector import nvme_initiator
from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import nvme_auth
from spdk_vhost_core import spdk_rpc
from testbed import fault_proxy
from tests.nova.functional import targets
from tests.nova.functional import test_connector as base_tests

GROUP = base_tests.GROUP
OTHER_NQN = ('nqn.2014-08.org.nvmexpress:uuid:'
             '2c5f39cb-3fb2-42e3-994a-c0b872ce4f0c')


class TcpCase(base_tests.RemoteTestCase):
    """Plus a connector behind a fault proxy."""

    #: Short, so that a stalled reply times out quickly.
    rpc_timeout = 1.0

    def setUp(self):
        super().setUp()
        self.proxy = self.useFixture(fault_proxy.FaultProxyFixture(
            self.target.socket_path)).proxy
        self.cfg.config(group=GROUP, spdk_rpc_socket=self.proxy.path,
                        spdk_rpc_timeout=self.rpc_timeout,
                        spdk_rpc_connect_retries=0)
        self.faulty = connector.SpdkVhostConnector(
            None, conf=self.conf,
            client=spdk_rpc.SpdkClient.from_conf(self.conf))
        self.addCleanup(self.faulty.client.close)


class FaultTest(TcpCase):

    def check(self, method, action, seconds=0):
        props = self.export(base_tests.VOLUME_A)
        self.proxy.fail(method, action, seconds=seconds)
        err = self.assertRaises(errors.TargetError,
                                self.faulty.connect_volume, props)
        self.assertIsInstance(err.__cause__, spdk_exc.SpdkTransportError)
        self.assertEqual([(method, action)], self.proxy.fired)
        self.assertEqual([], self.controller_names())
        self.assertEqual([], self.nvme_names())
        # And a retry by Nova succeeds.
        info = self.connect(props)
        self.assertEqual(['vhost-' + base_tests.VOLUME_A],
                         self.controller_names())
        self.faulty.disconnect_volume(props, info)
        self.assertEqual([], self.nvme_names())

    def test_controller_reply_lost(self):
        self.check('vhost_create_blk_controller', 'cut_after')

    def test_nvme_attach_reply_lost(self):
        self.check('bdev_nvme_attach_controller', 'cut_after')

    def test_controller_times_out(self):
        self.check('vhost_create_blk_controller', 'delay', seconds=2)

    def test_lost_undo_keeps_other_nvme_controllers(self):
        """The undo detaches its own NVMe controller, not another's."""
        props_b = self.export(base_tests.VOLUME_B)
        self.connect(props_b)
        props_a = self.export(base_tests.VOLUME_A)
        self.proxy.fail('vhost_create_blk_controller', 'cut_after')
        err = self.assertRaises(errors.TargetError,
                                self.faulty.connect_volume, props_a)
        self.assertIsInstance(err.__cause__, spdk_exc.SpdkTransportError)
        self.assertEqual(['vhost-' + base_tests.VOLUME_B],
                         self.controller_names())
        self.assertEqual([nvme_initiator.controller_name(props_b)],
                         self.nvme_names())

    def test_second_host_is_refused(self):
        """A third target (another compute host) with its own NQN."""
        props = self.export(base_tests.VOLUME_A)
        self.connect(props)
        other = targets.client_of(self, targets.remote_compute(
            self, name='other', lvstore=False))
        self.cfg.config(group=GROUP, host_nqn=OTHER_NQN)
        intruder = connector.SpdkVhostConnector(None, conf=self.conf,
                                                client=other)
        err = self.assertRaises(errors.TargetError,
                                intruder.connect_volume,
                                dict(props, host_nqn=OTHER_NQN))
        self.assertEqual('bdev_nvme_attach_controller', err.__cause__.method)
        self.assertEqual([], other.bdev_nvme_get_controllers())
        self.assertEqual([], other.vhost_get_controllers())


class SocketModeTest(base_tests.ConnectorTestCase):

    def test_world_writable_mode_refused_at_construction(self):
        for mode in ('0666', '0662', '0777', 'rw', '01777'):
            with self.subTest(mode=mode):
                self.cfg.config(group=GROUP, vhost_socket_mode=mode)
                err = self.assertRaises(
                    errors.InvalidConnectorConfig,
                    connector.SpdkVhostConnector, None, conf=self.conf,
                    client=self.client)
                self.assertIn('vhost_socket_mode', str(err))

    def test_unknown_group_refused(self):
        self.cfg.config(group=GROUP, vhost_socket_group='no-such-group')
        err = self.assertRaises(errors.InvalidConnectorConfig,
                                connector.SpdkVhostConnector, None,
                                conf=self.conf, client=self.client)
        self.assertIn('vhost_socket_group', str(err))

    def test_world_writable_rpc_socket_warns(self):
        logger = self.useFixture(fixtures.FakeLogger(
            name='spdk_vhost_core.validation'))
        os.chmod(self.target.socket_path, 0o660)
        connector.SpdkVhostConnector(None, conf=self.conf,
                                     client=self.client)
        self.assertEqual('', logger.output)
        os.chmod(self.target.socket_path, 0o666)
        connector.SpdkVhostConnector(None, conf=self.conf,
                                     client=self.client)
        self.assertIn('world-writable', logger.output)
        self.assertIn(self.target.socket_path, logger.output)


SECRET = nvme_auth.generate_secret()
SECRET_B64 = SECRET.split(':')[2]
CTRLR_SECRET = nvme_auth.generate_secret()


class SecretsNotLoggedTest(TcpCase):
    """A full DH-HMAC-CHAP attach/detach at DEBUG: no secret in any log.

    Cinder puts the per-attachment secret in connection_info (as other
    drivers put CHAP passwords), and os-brick's call tracing and our RPC
    log print whole dicts. The key files and keyring entries must be gone
    after the detach.
    """

    # Real DH-HMAC-CHAP (ffdhe8192) takes seconds on this machine.
    rpc_timeout = 30.0

    def test_attach_detach_at_debug(self):
        logger = self.useFixture(fixtures.FakeLogger(level='DEBUG'))
        tmp = self.useFixture(fixtures.TempDir()).path
        key_dir = os.path.join(tmp, 'compute-keys')
        self.cfg.config(group=GROUP, nvme_key_dir=key_dir)
        props = self.export(base_tests.VOLUME_A)
        self.storage.nvmf_subsystem_remove_host(props['nqn'],
                                                props['host_nqn'])
        for name, secret in (('storage-key', SECRET),
                             ('storage-ctrlr-key', CTRLR_SECRET)):
            nvme_auth.register(self.storage, os.path.join(tmp, 'storage'),
                               name, secret)
        self.storage.nvmf_subsystem_add_host(
            props['nqn'], props['host_nqn'], dhchap_key='storage-key',
            dhchap_ctrlr_key='storage-ctrlr-key')
        props.update(dhchap_key=SECRET, dhchap_ctrlr_key=CTRLR_SECRET,
                     psk=SECRET, auth_password=SECRET)
        info = self.faulty.connect_volume(props)
        self.assertEqual(1, len(self.nvme_names()))
        # Both directions authenticated: host and controller keys kept.
        self.assertEqual(2, len(os.listdir(key_dir)))
        qpairs = self.storage.call('nvmf_subsystem_get_qpairs',
                                   {'nqn': props['nqn']})
        self.assertEqual({'completed'},
                         {q['auth']['state'] for q in qpairs})
        self.faulty.disconnect_volume(props, info)
        self.assertEqual([], self.nvme_names())
        self.assertEqual([], os.listdir(key_dir))
        self.assertEqual([], self.client.call('keyring_get_keys'))
        # SPDK wants a keyring name as psk and refuses an inline secret:
        # the failed call and its parameters are logged, never the secret.
        self.assertRaises(spdk_exc.SpdkRpcError,
                          self.storage.nvmf_subsystem_add_host,
                          props['nqn'], OTHER_NQN, psk=SECRET)
        output = logger.output
        self.assertIn('connect_volume', output)
        self.assertIn('nvmf_subsystem_add_host', output)
        self.assertIn('keyring_file_add_key', output)
        self.assertNotIn(SECRET, output)
        self.assertNotIn(SECRET_B64, output)
        self.assertNotIn(CTRLR_SECRET.split(':')[2], output)

    def test_subsystem_with_another_controller_key_is_refused(self):
        """The host checks the storage side too: a stranger is refused."""
        tmp = self.useFixture(fixtures.TempDir()).path
        self.cfg.config(group=GROUP, nvme_key_dir=os.path.join(tmp, 'keys'))
        props = self.export(base_tests.VOLUME_A)
        self.storage.nvmf_subsystem_remove_host(props['nqn'],
                                                props['host_nqn'])
        for name, secret in (('host', SECRET), ('ctrlr', SECRET)):
            nvme_auth.register(self.storage, os.path.join(tmp, 'storage'),
                               name, secret)
        self.storage.nvmf_subsystem_add_host(
            props['nqn'], props['host_nqn'], dhchap_key='host',
            dhchap_ctrlr_key='ctrlr')
        props.update(dhchap_key=SECRET, dhchap_ctrlr_key=CTRLR_SECRET)
        self.assertRaises(errors.TargetError,
                          self.faulty.connect_volume, props)
        self.assertEqual([], self.nvme_names())
        self.assertEqual([], self.client.call('keyring_get_keys'))
        self.assertEqual([], os.listdir(os.path.join(tmp, 'keys')))

    def test_wrong_secret_leaves_nothing(self):
        self.cfg.config(group=GROUP, nvme_key_dir=self.useFixture(
            fixtures.TempDir()).path)
        props = self.export(base_tests.VOLUME_A)
        # A malformed secret is refused before any file or RPC.
        props['dhchap_key'] = SECRET.replace(':00:', ':09:')
        self.assertRaises(errors.InvalidConnectionProperties,
                          self.faulty.connect_volume, props)
        self.assertEqual([], self.client.call('keyring_get_keys'))
        self.assertEqual([], self.nvme_names())
