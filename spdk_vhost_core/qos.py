"""Cinder QoS keys as SPDK rate limits: the one set of rules.

SPDK has one IOPS limit (read+write, in steps of 1000) and three
bandwidth limits in MiB/s (``bdev_set_qos_limit``). Every supported
Cinder key maps onto one of them; any other key is refused by name,
because silently dropping a limit the operator asked for would hand
tenants more than they pay for. The Cinder driver (back-end specs), the
connector (front-end specs) and the tempest plugin's checks all use
:func:`to_limits`, so a ``both`` spec finds the same limits on either
side. Callers turn :class:`InvalidQoS` into their own service's error.
"""

import math

from oslo_log import log

from spdk_vhost_core import exception

LOG = log.getLogger(__name__)

IOPS_STEP = 1000
MIB = 1024 * 1024
PER_GB = '_per_gb'
# Far above any device, and exact in a float: larger is a typo or hostile
# (NaN, inf and 1e400 would otherwise crash the rounding).
MAX_VALUE = 2 ** 53

# Cinder key -> (SPDK limit, one step in Cinder units, in SPDK units).
KEYS = {
    'total_iops_sec': ('rw_ios_per_sec', IOPS_STEP, IOPS_STEP),
    'total_bytes_sec': ('rw_mbytes_per_sec', MIB, 1),
    'read_bytes_sec': ('r_mbytes_per_sec', MIB, 1),
    'write_bytes_sec': ('w_mbytes_per_sec', MIB, 1),
}
SPDK_KEYS = tuple(spdk_key for spdk_key, _step, _spdk_step in KEYS.values())
#: Every limit off: SPDK's 0 means "no limit".
NO_LIMITS = dict.fromkeys(SPDK_KEYS, 0)
#: What a back-end spec may hold: per-GiB keys scale with the volume.
SUPPORTED_KEYS = tuple(sorted(list(KEYS) + [k + PER_GB for k in KEYS]))


class InvalidQoS(exception.SpdkVhostError, ValueError):
    """A QoS spec SPDK cannot enforce; the message names the key."""


def _number(key, value):
    try:
        number = float(value)
    except (TypeError, ValueError) as err:
        raise InvalidQoS('%s=%r is not a number' % (key, value)) from err
    if not math.isfinite(number) or number > MAX_VALUE:
        raise InvalidQoS('%s=%r is not a finite number up to %d'
                         % (key, value, MAX_VALUE))
    if number < 0:
        raise InvalidQoS('%s=%r is negative' % (key, value))
    return number


def spdk_value(key, wanted):
    """``wanted`` (Cinder units of ``key``) to the nearest SPDK step.

    0 means "no limit" to SPDK, so a small positive limit becomes the
    smallest SPDK can enforce instead of vanishing.
    """
    spdk_key, step, spdk_step = KEYS[key]
    steps = max(int(round(wanted / step)), 1 if wanted else 0)
    if steps * step != wanted:
        LOG.info('QoS %(key)s=%(wanted)s rounded to SPDK %(spdk)s=%(value)s '
                 '(SPDK counts IOPS in steps of %(ios)d and bandwidth in '
                 'MiB/s)', {'key': key, 'wanted': wanted, 'spdk': spdk_key,
                            'value': steps * spdk_step, 'ios': IOPS_STEP})
    return steps * spdk_step


def validate(specs, size_gb=None):
    """Refuse unsupported keys and double definitions, naming them.

    Per-GiB keys need the volume's size; without one (a front-end spec,
    which Cinder has already scaled) they are unsupported.
    """
    supported = SUPPORTED_KEYS if size_gb is not None else tuple(sorted(KEYS))
    unsupported = sorted(str(key) for key in set(specs) - set(supported))
    if unsupported:
        raise InvalidQoS('SPDK cannot enforce %s (supported keys: %s)'
                         % (', '.join(unsupported), ', '.join(supported)))
    for key in KEYS:
        if key in specs and key + PER_GB in specs:
            raise InvalidQoS('%s and %s%s both set the same SPDK limit'
                             % (key, key, PER_GB))
    for key, value in specs.items():
        _number(key, value)


def to_limits(specs, size_gb=None):
    """The SPDK limits ``specs`` name, for a volume of ``size_gb`` GiB."""
    specs = specs or {}
    validate(specs, size_gb)
    limits = {}
    for key, value in specs.items():
        base = key[:-len(PER_GB)] if key.endswith(PER_GB) else key
        wanted = _number(key, value)
        if base != key:
            wanted *= size_gb
        limits[KEYS[base][0]] = spdk_value(base, wanted)
    return limits
