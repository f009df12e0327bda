"""Cinder QoS specs to SPDK ``bdev_set_qos_limit`` limits.

SPDK has one IOPS limit (read+write, in multiples of 1000) and three
bandwidth limits in MiB/s. Every supported key maps onto one of them;
any other key is refused by name, because silently dropping a limit the
operator asked for would hand tenants more than they pay for.
"""

import math

from cinder import exception
from oslo_log import log

LOG = log.getLogger(__name__)

CONSUMERS = ('back-end', 'both')
IOS_UNIT = 1000
MIB = 1024 * 1024

# Cinder key -> (SPDK param, unit of the SPDK value in Cinder units).
_LIMITS = {
    'total_iops_sec': ('rw_ios_per_sec', 1),
    'total_bytes_sec': ('rw_mbytes_per_sec', MIB),
    'read_bytes_sec': ('r_mbytes_per_sec', MIB),
    'write_bytes_sec': ('w_mbytes_per_sec', MIB),
}
PER_GB = '_per_gb'
SPDK_KEYS = ('rw_ios_per_sec', 'rw_mbytes_per_sec', 'r_mbytes_per_sec',
             'w_mbytes_per_sec')
SUPPORTED_KEYS = tuple(sorted(list(_LIMITS) + [k + PER_GB for k in _LIMITS]))
NO_LIMITS = dict.fromkeys(SPDK_KEYS, 0)
# Far above any device, and exact in a float: larger is a typo or hostile
# (NaN, inf and 1e400 would otherwise crash the rounding).
MAX_VALUE = 2 ** 53


def _invalid(reason):
    return exception.InvalidQoSSpecs(reason=reason)


def _number(key, value):
    try:
        number = float(value)
    except (TypeError, ValueError) as err:
        raise _invalid('%s=%r is not a number' % (key, value)) from err
    if not math.isfinite(number) or number > MAX_VALUE:
        raise _invalid('%s=%r is not a finite number up to %d'
                       % (key, value, MAX_VALUE))
    if number < 0:
        raise _invalid('%s=%r is negative' % (key, value))
    return number


def _round(key, spdk_key, wanted, unit):
    """Round ``wanted`` (Cinder units) to a whole SPDK value, never to 0.

    0 means "no limit" to SPDK, so a small positive limit becomes the
    smallest SPDK can enforce instead of vanishing.
    """
    if spdk_key == 'rw_ios_per_sec':
        value = int(round(wanted / IOS_UNIT)) * IOS_UNIT
        smallest = IOS_UNIT
    else:
        value = int(round(wanted / unit))
        smallest = 1
    if wanted and not value:
        value = smallest
    if value * (1 if spdk_key == 'rw_ios_per_sec' else unit) != wanted:
        LOG.info('QoS %(key)s=%(wanted)s rounded to SPDK %(spdk)s=%(value)s '
                 '(SPDK counts IOPS in steps of %(ios)d and bandwidth in '
                 'MiB/s)', {'key': key, 'wanted': wanted, 'spdk': spdk_key,
                            'value': value, 'ios': IOS_UNIT})
    return value


def backend_specs(qos_specs):
    """The specs of a type's QoS that SPDK must enforce, or {}.

    ``qos_specs`` is the ``qos_specs`` value of
    ``volume_types.get_volume_type_qos_specs()`` (None without QoS).
    """
    if not qos_specs or qos_specs.get('consumer') not in CONSUMERS:
        return {}
    return dict(qos_specs.get('specs') or {})


def validate(specs):
    """Refuse unsupported keys and double definitions, naming them."""
    unsupported = sorted(set(specs) - set(SUPPORTED_KEYS))
    if unsupported:
        raise _invalid('SPDK cannot enforce %s (supported keys: %s)'
                       % (', '.join(unsupported), ', '.join(SUPPORTED_KEYS)))
    for key in _LIMITS:
        if key in specs and key + PER_GB in specs:
            raise _invalid('%s and %s%s both set the same SPDK limit'
                           % (key, key, PER_GB))
    for key, value in specs.items():
        _number(key, value)


def to_limits(specs, size_gb):
    """All four SPDK limits (0 = off) for a volume of ``size_gb`` GiB."""
    validate(specs)
    limits = dict(NO_LIMITS)
    for key, value in specs.items():
        base = key[:-len(PER_GB)] if key.endswith(PER_GB) else key
        spdk_key, unit = _LIMITS[base]
        wanted = _number(key, value)
        if base != key:
            wanted *= size_gb
        limits[spdk_key] = _round(key, spdk_key, wanted, unit)
    return limits


def has_per_gb(specs):
    """True when the limits depend on the volume size."""
    return any(key.endswith(PER_GB) for key in specs)
