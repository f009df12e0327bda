"""Entry point for oslo-config-generator (``oslo.config.opts``)."""

import copy

from os_brick_connector import config

GROUP = 'spdk_vhost'


def list_opts():
    """Return this package's options by group, for the sample config."""
    return [(GROUP, copy.deepcopy(config.rpc_opts) +
             copy.deepcopy(config.connector_opts))]
