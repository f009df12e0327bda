"""nova-compute-spdk-vhost: Nova's own loader must find the driver."""

import sys

from oslo_utils import importutils

from nova_vhost_user import cmd
from nova_vhost_user import driver
from tests import base


class TestRegister(base.TestCase):

    def setUp(self):
        super().setUp()
        self.addCleanup(sys.modules.pop, cmd.MODULE, None)

    def test_nova_prefix_finds_the_driver(self):
        """What nova.virt.driver.load_compute_driver imports."""
        name = 'nova.virt.' + cmd.COMPUTE_DRIVER
        self.assertRaises(ImportError, importutils.import_class, name)
        cmd.register()
        self.assertIs(driver.LibvirtVhostUserDriver,
                      importutils.import_class(name))

    def test_register_twice_keeps_the_first(self):
        cmd.register()
        first = sys.modules[cmd.MODULE]
        cmd.register()
        self.assertIs(first, sys.modules[cmd.MODULE])
