"""Cinder QoS specs of a volume type as the SPDK limits of its lvols.

The rules (keys, rounding, validation) are :mod:`spdk_vhost_core.qos`,
shared with the connector; here only what is the Cinder driver's: which
consumers SPDK enforces on the storage side, all four limits (0 = off)
for a volume, and Cinder's exception.
"""

from cinder import exception

from spdk_vhost_core import qos as rules

CONSUMERS = ('back-end', 'both')
SPDK_KEYS = rules.SPDK_KEYS
SUPPORTED_KEYS = rules.SUPPORTED_KEYS
NO_LIMITS = rules.NO_LIMITS


def backend_specs(qos_specs):
    """The specs of a type's QoS that SPDK must enforce, or {}.

    ``qos_specs`` is the ``qos_specs`` value of
    ``volume_types.get_volume_type_qos_specs()`` (None without QoS).
    """
    if not qos_specs or qos_specs.get('consumer') not in CONSUMERS:
        return {}
    return dict(qos_specs.get('specs') or {})


def to_limits(specs, size_gb):
    """All four SPDK limits (0 = off) for a volume of ``size_gb`` GiB."""
    try:
        return dict(NO_LIMITS, **rules.to_limits(specs, size_gb))
    except rules.InvalidQoS as err:
        raise exception.InvalidQoSSpecs(reason=str(err)) from err
