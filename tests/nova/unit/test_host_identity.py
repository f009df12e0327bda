"""The connector properties this host reports to Cinder."""

import os
import socket

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture

from os_brick_connector import connector_errors as errors
from os_brick_connector import host_identity
from os_brick_connector import options
from spdk_vhost_core import exception as spdk_exc
from tests import base


class CountingClient(object):
    """An SPDK client recording each RPC asked of it."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, method):
        def rpc(*args, **kwargs):
            self.calls.append(method)
            raise spdk_exc.TargetUnreachable(method, message='not here')
        return rpc


class TestHostIdentity(base.TestCase):

    def setUp(self):
        super().setUp()
        conf = cfg.ConfigOpts()
        options.register_opts(conf)
        self.cfg = self.useFixture(config_fixture.Config(conf))
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.cfg.config(group='spdk_vhost', host_nqn_file=os.path.join(
            self.tmp, 'hostnqn'))
        self.conf = conf.spdk_vhost

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, 'w') as dst:
            dst.write(text)
        return path

    def test_target_id(self):
        self.assertEqual(socket.gethostname(),
                         host_identity.target_id(self.conf))
        self.cfg.config(group='spdk_vhost', spdk_rpc_address='192.0.2.1',
                        spdk_rpc_port=5260)
        self.assertEqual('tcp:192.0.2.1:5260',
                         host_identity.target_id(self.conf))
        self.cfg.config(group='spdk_vhost', target_id='rack1-spdk')
        self.assertEqual('rack1-spdk', host_identity.target_id(self.conf))

    def test_host_nqn_sources_in_order(self):
        machine_id = self.write('machine-id',
                                '0123456789abcdef0123456789abcdef\n')
        self.assertEqual(
            'nqn.2014-08.org.nvmexpress:uuid:'
            '01234567-89ab-cdef-0123-456789abcdef',
            host_identity.host_nqn(self.conf, machine_id))
        self.write('hostnqn', 'nqn.2014-08.org.nvmexpress:uuid:from-file\n')
        self.assertEqual('nqn.2014-08.org.nvmexpress:uuid:from-file',
                         host_identity.host_nqn(self.conf, machine_id))
        self.cfg.config(group='spdk_vhost', host_nqn='nqn.x:configured')
        self.assertEqual('nqn.x:configured',
                         host_identity.host_nqn(self.conf, machine_id))

    def test_no_host_nqn_anywhere(self):
        self.assertRaises(errors.HostNqnMissing, host_identity.host_nqn,
                          self.conf, os.path.join(self.tmp, 'none'))

    def test_malformed_machine_id_is_no_host_nqn(self):
        machine_id = self.write('machine-id', 'not-a-uuid\n')
        self.assertRaises(errors.HostNqnMissing, host_identity.host_nqn,
                          self.conf, machine_id)

    def test_connector_properties_are_what_cinder_reads(self):
        self.cfg.config(group='spdk_vhost', host_nqn='nqn.x:h',
                        target_id='t1')
        client = CountingClient()
        self.cfg.config(group='spdk_vhost', nvme_ctrlr_loss_timeout_sec=-1,
                        nvme_fast_io_fail_timeout_sec=0)
        self.assertEqual(
            {'spdk_target_id': 't1', 'nqn': 'nqn.x:h',
             'spdk_nvme_reconnect': {'ctrlr_loss_timeout_sec': -1,
                                     'reconnect_delay_sec': 2,
                                     'fast_io_fail_timeout_sec': 0}},
            host_identity.connector_properties(self.conf, client))
        self.assertEqual([], client.calls)

    def test_connector_properties_never_raise(self):
        logger = self.useFixture(fixtures.FakeLogger())
        # An unreadable NQN file: not an SPDK error, not "missing".
        self.cfg.config(group='spdk_vhost', host_nqn_file=self.tmp)
        self.assertEqual({}, host_identity.connector_properties(self.conf))
        self.assertEqual(1, logger.output.count('cannot attach SPDK'))
        self.assertIn('IsADirectoryError', logger.output)
