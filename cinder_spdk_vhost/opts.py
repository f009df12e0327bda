"""Entry point for oslo-config-generator (``oslo.config.opts``)."""

import copy

from cinder_spdk_vhost import options
from spdk_vhost_core import options as rpc_options

# Cinder reads [backend_defaults] as every backend section's defaults;
# in cinder.conf the options go in each SPDK backend's own section (or
# there, for all of them).
GROUP = 'backend_defaults'


def list_opts():
    """Return the driver's options (and the RPC ones it registers)."""
    return [(GROUP, copy.deepcopy(rpc_options.rpc_opts) +
             copy.deepcopy(rpc_options.agent_opts) +
             copy.deepcopy(options.driver_opts))]
