"""Entry point for oslo-config-generator (``oslo.config.opts``)."""

import copy

from os_brick_connector import options
from spdk_vhost_core import options as rpc_options

GROUP = 'spdk_vhost'


def list_opts():
    """Return this package's options by group, for the sample config."""
    return [(GROUP, copy.deepcopy(rpc_options.rpc_opts) +
             copy.deepcopy(options.connector_opts))]
