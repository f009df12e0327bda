"""Call tracing for the connector that never logs key material.

os-brick's ``utils.trace`` masks only password-like keys; SPDK's
NVMe-oF key fields (``psk``, ``dhchap_key``, ...) would be printed with
the connection properties. This traces the same way, through
:func:`exception.mask_params`.
"""

import functools
import time

from oslo_log import log

from spdk_vhost_core import exception

LOG = log.getLogger(__name__)


def traced(func):
    """Log entry (masked arguments), result or exception, and duration."""
    @functools.wraps(func)
    def wrapper(self, *args, **kwargs):
        name = func.__name__
        LOG.debug('==> %(name)s: call %(args)s %(kwargs)s',
                  {'name': name, 'args': exception.mask_params(list(args)),
                   'kwargs': exception.mask_params(kwargs)})
        start = time.monotonic()
        try:
            result = func(self, *args, **kwargs)
        except Exception as err:
            LOG.debug('<== %(name)s: exception (%(ms)dms) %(exc)s',
                      {'name': name, 'exc': type(err).__name__,
                       'ms': (time.monotonic() - start) * 1000})
            raise
        LOG.debug('<== %(name)s: return (%(ms)dms) %(result)s',
                  {'name': name, 'result': exception.mask_params(result),
                   'ms': (time.monotonic() - start) * 1000})
        return result
    return wrapper
