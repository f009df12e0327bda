"""``nova-compute-spdk-vhost``: nova-compute that can load this driver.

nova-compute imports its driver as ``nova.virt.<compute_driver>`` and
has no hook for drivers outside its tree, so
``compute_driver = nova_vhost_user.driver.LibvirtVhostUserDriver`` is
looked for as ``nova.virt.nova_vhost_user.driver`` and nova-compute
exits. This command makes the driver importable under Nova's prefix,
as ``nova.virt.spdk_vhost``, and then runs nova-compute unchanged:

    compute_driver = spdk_vhost.LibvirtVhostUserDriver
"""

import sys

MODULE = 'nova.virt.spdk_vhost'
COMPUTE_DRIVER = 'spdk_vhost.LibvirtVhostUserDriver'


def register():
    """Make ``nova.virt.spdk_vhost`` this package's compute driver module."""
    from nova_vhost_user import driver
    sys.modules.setdefault(MODULE, driver)


def main():
    # nova-compute's module sets up its concurrency (threads or eventlet)
    # when imported: it must come before anything that imports the driver.
    from nova.cmd import compute
    register()
    return compute.main()
