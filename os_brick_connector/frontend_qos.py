"""Front-end QoS: Cinder's ``qos_specs`` as SPDK rate limits on a bdev.

libvirt rejects ``<iotune>`` on a vhostuser disk, so the limits Nova would
have put there are set in SPDK, on the bdev the controller exposes. SPDK
has one IOPS limit (read+write, a multiple of 1000) and three bandwidth
limits in MiB/s; a spec SPDK cannot honour is refused, never dropped.
"""

import math

from os_brick_connector import connector_errors as errors
from os_brick_connector import exception as spdk_exc

IOPS_STEP = 1000
MIB = 1024 * 1024
# Exact in a float and far above any device; NaN, inf and more are refused.
MAX_VALUE = 2 ** 53

# Cinder QoS key -> (SPDK limit, one step in Cinder units, in SPDK units).
_LIMITS = {
    'total_iops_sec': ('rw_ios_per_sec', IOPS_STEP, IOPS_STEP),
    'total_bytes_sec': ('rw_mbytes_per_sec', MIB, 1),
    'read_bytes_sec': ('r_mbytes_per_sec', MIB, 1),
    'write_bytes_sec': ('w_mbytes_per_sec', MIB, 1),
}


def spdk_value(wanted, step, spdk_step):
    """``wanted`` (Cinder units) as an SPDK value: nearest step, never 0.

    The same rounding as the Cinder driver's back-end QoS, so a ``both``
    spec on a local volume finds its limits already in force. 0 is "no
    limit" to SPDK, so a small positive limit becomes the smallest one.
    """
    steps = max(int(round(wanted / step)), 1 if wanted else 0)
    return steps * spdk_step


def spdk_limits(qos_specs):
    """SPDK limits for Cinder front-end ``qos_specs``.

    Raises :class:`errors.InvalidQoSSpec` for a key SPDK has no limit for
    (read/write IOPS, bursts, ...) or a bad value.
    """
    limits = {}
    for key, value in (qos_specs or {}).items():
        if key not in _LIMITS:
            raise errors.InvalidQoSSpec(reason='SPDK has no limit for %r '
                                        '(supported: %s)'
                                        % (key, ', '.join(sorted(_LIMITS))))
        try:
            number = float(value)
        except (TypeError, ValueError) as err:
            raise errors.InvalidQoSSpec(
                reason='%s=%r is not a number' % (key, value)) from err
        if not math.isfinite(number) or not 0 <= number <= MAX_VALUE:
            raise errors.InvalidQoSSpec(
                reason='%s=%r is not a number between 0 and %d'
                       % (key, value, MAX_VALUE))
        name, step, spdk_step = _LIMITS[key]
        limits[name] = spdk_value(number, step, spdk_step)
    return limits


def apply(client, bdev, qos_specs):
    """Make ``qos_specs`` the limits in force on ``bdev``; return them.

    Limits the spec does not name are left as they are (the back-end part
    of a ``both`` spec may be there). Nothing is sent when the limits are
    already in force, which keeps a repeated connect from hitting SPDK's
    EAGAIN on a bdev with no I/O channel open; when SPDK does refuse, the
    attach fails rather than run the guest without its limits.
    """
    wanted = spdk_limits(qos_specs)
    if not wanted:
        return {}
    current = client.bdev_get_bdevs(name=bdev)[0].get(
        'assigned_rate_limits', {})
    if all(current.get(key) == value for key, value in wanted.items()):
        return wanted
    try:
        client.bdev_set_qos_limit(bdev, **wanted)
    except spdk_exc.SpdkRpcError as err:
        raise errors.QoSNotApplied(limits=wanted, bdev=bdev,
                                   reason=err) from err
    return wanted
