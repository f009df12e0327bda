"""Front-end QoS: Cinder's ``qos_specs`` as SPDK rate limits on a bdev.

libvirt rejects ``<iotune>`` on a vhostuser disk, so the limits Nova would
have put there are set in SPDK, on the bdev the controller exposes, by
the same rules as the Cinder driver's back-end limits (:mod:`qos`); a spec
SPDK cannot honour is refused, never dropped.
"""

from os_brick_connector import connector_errors as errors
from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import qos


def spdk_limits(qos_specs):
    """SPDK limits for Cinder front-end ``qos_specs`` (:mod:`qos`'s rules).

    Raises :class:`errors.InvalidQoSSpec` for a key SPDK has no limit for
    (read/write IOPS, bursts, ...) or a bad value.
    """
    try:
        return qos.to_limits(qos_specs)
    except qos.InvalidQoS as err:
        raise errors.InvalidQoSSpec(reason=str(err)) from err


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
