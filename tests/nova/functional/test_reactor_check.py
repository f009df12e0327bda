"""Nova's start-up check of guest CPUs against real SPDK reactors.

The reactor cores come from a real target's ``framework_get_reactors``,
the host's online CPUs from libvirtd (Nova's ``Host.get_online_cpus``),
as the compute driver's ``init_host`` takes them.
"""

import os

import fixtures
from nova import exception
from nova.virt import hardware
from oslo_config import fixture as config_fixture

from nova_vhost_user import reactors
from tests import base
from tests.nova import compute
from tests.nova.functional import targets

URI = os.environ.get('SPDK_VHOST_TEST_LIBVIRT_URI', 'qemu:///system')


class ReactorCheckTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(120, gentle=True))
        self.conf = self.useFixture(config_fixture.Config(compute.CONF))
        compute.register()
        self.conf.config(group='libvirt', virt_type='qemu',
                         connection_uri=URI)
        self.log = self.useFixture(fixtures.FakeLogger(
            name='nova_vhost_user.reactors'))
        self.online = compute.make_driver()._host.get_online_cpus()
        self.assertIn(1, self.online, 'the test needs two CPUs')

    def check(self, target, **kwargs):
        return reactors.check_overlap(targets.client_of(self, target),
                                      self.online, **kwargs)


class TestPollingTarget(ReactorCheckTestCase):
    """A polling vhost target on CPU 1."""

    def setUp(self):
        super().setUp()
        self.target = targets.start(self, 'compute', app='vhost',
                                    core_mask='0x2', lvstore=False)

    def test_nova_default_reported_with_the_set_to_write(self):
        rest = hardware.format_cpu_spec(self.online - {1})
        self.assertEqual({reactors.UNSET: {1}}, self.check(self.target))
        self.assertIn('cores 1 included', self.log.output)
        self.assertIn('e.g. cpu_shared_set = %s' % rest, self.log.output)

    def test_shared_set_without_the_reactor_is_quiet(self):
        rest = hardware.format_cpu_spec(self.online - {1})
        self.conf.config(group='compute', cpu_shared_set=rest)
        self.assertEqual({}, self.check(self.target))
        self.assertEqual('', self.log.output)

    def test_refused(self):
        self.conf.config(group='compute', cpu_shared_set='0-1')
        err = self.assertRaises(exception.InvalidConfiguration, self.check,
                                self.target, refuse=True)
        self.assertIn('[compute] cpu_shared_set contains CPUs 1', str(err))


class TestInterruptModeTarget(ReactorCheckTestCase):
    """A vhost target in interrupt mode on CPU 1: it sleeps when idle."""

    def setUp(self):
        super().setUp()
        self.target = targets.start(self, 'compute', app='vhost',
                                    core_mask='0x2', interrupt_mode=True,
                                    lvstore=False)

    def test_floating_guests_may_share(self):
        self.conf.config(group='compute', cpu_shared_set='0-1')
        self.assertEqual({}, self.check(self.target))

    def test_pinned_guests_may_not(self):
        self.conf.config(group='compute', cpu_dedicated_set='1')
        self.assertEqual({reactors.DEDICATED_SET: {1}},
                         self.check(self.target))
        self.assertIn('pinned guest vCPU', self.log.output)
