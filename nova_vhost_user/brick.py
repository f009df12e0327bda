"""Where the Nova side gets its os-brick connector from.

os-brick's connector factory has a fixed table of protocols, so the SPDK
connector is built here directly. Everything in this package obtains it
through these two functions: tests swap them for a fake, and a change of
the connector's construction is a change in one place.
"""

from nova import utils
from oslo_utils import importutils

CONNECTOR_CLASS = 'os_brick_connector.connector.SpdkVhostConnector'


def connector_class():
    """The connector class (imported late: it talks to SPDK on use)."""
    return importutils.import_class(CONNECTOR_CLASS)


def get_connector():
    """A connector for this host's SPDK target, configured by [spdk_vhost].

    Its ``connect_volume`` returns the device info ``{'type', 'path',
    'controller', 'cpumask', 'numa_node'}`` (the wire format is in
    doc/source/contributor/architecture.rst).
    """
    return connector_class()(utils.get_root_helper())


def get_connector_properties(host):
    """This host's SPDK identity, for get_volume_connector()."""
    return connector_class().get_connector_properties(
        utils.get_root_helper(), host=host, multipath=False,
        enforce_multipath=False, execute=None)
