"""Nova's start-up check of its hugepage reservation, on a real target.

The target is found as the peer of its RPC socket and its ``-s`` read
from its command line (``testbed`` starts every target with
``-s 256``), as the compute driver's ``init_host`` does.
"""

import fixtures
from nova import exception
from oslo_config import fixture as config_fixture

from nova_vhost_user import spdk_memory
from os_brick_connector import numa
from testbed import spdk_target
from tests import base
from tests.nova import compute
from tests.nova.functional import targets


class TestSpdkMemoryCheck(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(120, gentle=True))
        self.conf = self.useFixture(config_fixture.Config(compute.CONF))
        compute.register()
        self.target = targets.start(self, 'compute', app='vhost',
                                    interrupt_mode=True, lvstore=False)
        self.client = targets.client_of(self, self.target)
        self.pages = spdk_target.MEM_MB * 1024 // numa.default_hugepage_kb()

    def reserve(self, count):
        self.conf.config(reserved_huge_pages=[{
            'node': '0', 'size': str(numa.default_hugepage_kb()),
            'count': str(count)}])

    def check(self):
        return spdk_memory.check(self.client, self.target.socket_path)

    def test_the_reservation_testbed_writes_passes(self):
        self.conf.config(reserved_huge_pages=[dict(
            item.split(':') for item in
            spdk_target.nova_reserved_huge_pages().split(','))])
        self.assertEqual((spdk_target.MEM_MB, spdk_target.MEM_MB),
                         self.check())

    def test_one_page_short_is_refused(self):
        self.reserve(self.pages - 1)
        err = self.assertRaises(exception.InvalidConfiguration, self.check)
        self.assertIn('holds %d MiB' % spdk_target.MEM_MB, str(err))
        self.assertIn('count:%d' % self.pages, str(err))
