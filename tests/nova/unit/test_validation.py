"""Start-time option checks of the connector and the Nova driver."""

import fixtures
from nova import exception as nova_exc
from oslo_config import fixture as config_fixture

from nova_vhost_user import driver
from nova_vhost_user import volume
from os_brick_connector import options
from spdk_vhost_core import validation
from tests import base
from tests import fuzz


class TestNqn(base.TestCase):

    def test_nqns(self):
        for good in (fuzz.GOOD_NQN, 'nqn.2016-06.io.spdk:cnode1',
                     'nqn.2014-08.org.nvmexpress.discovery'):
            self.assertTrue(validation.is_nqn(good), good)
        for bad in ('', 'nqn', 'iqn.2016-06.io.spdk:x', 'nqn.2016-6.io:x',
                    'nqn.2016-13.io.spdk:x', 'nqn.2016-06.io.spdk:a b',
                    'nqn.2016-06.io.spdk:' + 'x' * 210, None, 7,
                    'nqn.2016-06..io:x', 'nqn.2016-06.io.spdk:x\n'):
            self.assertFalse(validation.is_nqn(bad), bad)


class TestInitHost(base.TestCase):
    """init_host refuses bad [spdk_vhost] options, naming them."""

    def setUp(self):
        super().setUp()
        options.register_opts(volume.CONF)
        self.conf = self.useFixture(config_fixture.Config(volume.CONF))

    def check(self, option, value):
        self.conf.config(group='spdk_vhost', **{option: value})
        err = self.assertRaises(
            nova_exc.InvalidConfiguration,
            driver.LibvirtVhostUserDriver._check_spdk_options)
        self.assertIn(option, str(err))
        volume.CONF.clear_override(option, group='spdk_vhost')

    def test_bad_options(self):
        self.check('vhost_socket_mode', '0666')
        self.check('vhost_socket_owner', 'no-such-user-here')
        self.check('host_nqn', 'my-host')
        self.check('spdk_rpc_socket', 'relative.sock')
        self.check('spdk_saved_config', '/no/such/dir/spdk_tgt.json')

    def test_fast_io_fail_within_loss_timeout(self):
        self.conf.config(group='spdk_vhost', nvme_ctrlr_loss_timeout_sec=5,
                         nvme_fast_io_fail_timeout_sec=10)
        err = self.assertRaises(
            nova_exc.InvalidConfiguration,
            driver.LibvirtVhostUserDriver._check_spdk_options)
        self.assertIn('nvme_fast_io_fail_timeout_sec', str(err))

    def test_nvme_timeouts_follow_spdk_rules(self):
        """Each combination SPDK's attach refuses, named at start-up."""
        for loss, delay, fast_fail, option in (
                (0, 2, 0, 'nvme_ctrlr_loss_timeout_sec'),
                (0, 0, 5, 'nvme_ctrlr_loss_timeout_sec'),
                (30, 0, 10, 'nvme_reconnect_delay_sec'),
                (-1, 0, 0, 'nvme_reconnect_delay_sec'),
                (5, 10, 0, 'nvme_reconnect_delay_sec'),
                (30, 5, 2, 'nvme_fast_io_fail_timeout_sec'),
                (-1, 5, 2, 'nvme_fast_io_fail_timeout_sec')):
            self.conf.config(group='spdk_vhost',
                             nvme_ctrlr_loss_timeout_sec=loss,
                             nvme_reconnect_delay_sec=delay,
                             nvme_fast_io_fail_timeout_sec=fast_fail)
            err = self.assertRaises(
                nova_exc.InvalidConfiguration,
                driver.LibvirtVhostUserDriver._check_spdk_options)
            self.assertIn(option, str(err))
        for loss, delay, fast_fail in ((0, 0, 0), (-1, 1, 0), (30, 1, 30),
                                       (-1, 2, 100)):
            self.conf.config(group='spdk_vhost',
                             nvme_ctrlr_loss_timeout_sec=loss,
                             nvme_reconnect_delay_sec=delay,
                             nvme_fast_io_fail_timeout_sec=fast_fail)
            driver.LibvirtVhostUserDriver._check_spdk_options()

    def test_defaults_pass(self):
        logger = self.useFixture(fixtures.FakeLogger())
        driver.LibvirtVhostUserDriver._check_spdk_options()
        self.assertNotIn('upgrade', logger.output)

    def test_settings_short_of_an_upgrade_warned_once(self):
        logger = self.useFixture(fixtures.FakeLogger())
        self.useFixture(fixtures.MonkeyPatch(
            'spdk_vhost_core.validation._WARNED', set()))
        self.conf.config(group='spdk_vhost', nvme_ctrlr_loss_timeout_sec=60,
                         nvme_fast_io_fail_timeout_sec=10)
        driver.LibvirtVhostUserDriver._check_spdk_options()
        driver.LibvirtVhostUserDriver._check_spdk_options()
        self.assertEqual(1, logger.output.count(
            'do not ride out a storage target upgrade (60 s'))
        self.assertIn('fast_io_fail_timeout_sec 10 < 62 s', logger.output)
