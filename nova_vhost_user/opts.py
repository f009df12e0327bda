"""Entry point for oslo-config-generator (``oslo.config.opts``)."""

import copy

from nova_vhost_user import options


def list_opts():
    """Return this package's own options by group, for the sample config.

    The connector's options in the same group are listed by
    ``os_brick_connector.opts``; listing them here too would print them
    twice in a sample built from both namespaces.
    """
    return [(options.GROUP, copy.deepcopy(options.nova_opts))]
