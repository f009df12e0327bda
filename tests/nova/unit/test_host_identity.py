"""The connector properties this host reports to Cinder."""

import os
import socket

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture

from os_brick_connector import config
from os_brick_connector import connector_errors as errors
from os_brick_connector import exception as spdk_exc
from os_brick_connector import host_identity
from tests import base
from tests.nova import fake_sysfs
from tests.nova.unit import test_numa


class FakeTarget(test_numa.FakeReactors):

    def __init__(self, reactors, methods):
        super().__init__(reactors)
        self.methods = methods

    def rpc_get_methods(self):
        if self.methods is None:
            raise spdk_exc.MethodNotFound('rpc_get_methods', None, -32601,
                                          'Method not found')
        return self.methods


class TestHostIdentity(base.TestCase):

    def setUp(self):
        super().setUp()
        conf = cfg.ConfigOpts()
        config.register_connector_opts(conf)
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

    def test_transports(self):
        plain = self.useFixture(fake_sysfs.FakeSysfs({}))
        rdma = self.useFixture(fake_sysfs.FakeSysfs({}, ['mlx5_0']))
        nvme = FakeTarget([], ['bdev_nvme_attach_controller'])
        self.assertEqual(['local', 'tcp'],
                         host_identity.transports(nvme, plain.root))
        self.assertEqual(['local', 'tcp', 'rdma'],
                         host_identity.transports(nvme, rdma.root))
        self.assertEqual(['local'], host_identity.transports(
            FakeTarget([], ['vhost_create_blk_controller']), rdma.root))
        self.assertEqual(['local'], host_identity.transports(
            FakeTarget([], None), rdma.root))
        self.assertEqual(['local'], host_identity.transports(
            nvme, rdma.root, interrupt_mode=True))

    def test_connector_properties_of_a_two_node_host(self):
        sysfs = self.useFixture(fake_sysfs.FakeSysfs({0: '0-3', 1: '4-7'}))
        self.cfg.config(group='spdk_vhost', sysfs_root=sysfs.root,
                        host_nqn='nqn.x:h', target_id='t1')
        target = FakeTarget([(1, 0), (2, 0), (5, 1), (6, 1)],
                            ['bdev_nvme_attach_controller'])
        self.assertEqual(
            {'spdk_target_id': 't1', 'nqn': 'nqn.x:h',
             'spdk_transports': ['local', 'tcp'],
             'spdk_numa_layout': {'0': [1, 2], '1': [5, 6]}},
            host_identity.connector_properties(self.conf, target))
