"""Entry point for oslo-config-generator (``oslo.config.opts``)."""

import copy

from spdk_vhost_agent import options


def list_opts():
    return [(options.GROUP, copy.deepcopy(options.agent_opts))]
