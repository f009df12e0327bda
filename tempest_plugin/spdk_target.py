"""What the SPDK target behind the backend really enforces.

The API tests can only see what Cinder reports; on an all-in-one host
(``[spdk_vhost] spdk_rpc_socket`` set) they also read the lvol's limits
from SPDK, so a QoS spec reported as applied but not in force fails.
"""

from spdk_vhost_core import qos
from spdk_vhost_core import spdk_rpc


def expected_limits(qos_specs):
    """The non-zero SPDK limits of Cinder QoS keys, by the product's rules.

    Tests give the limits in exact SPDK steps, so no rounding hides a
    wrong key mapping.
    """
    return {key: value for key, value in qos.to_limits(qos_specs).items()
            if value}


class Target(object):
    """A read-only view of the target's lvols."""

    def __init__(self, socket_path):
        self.client = spdk_rpc.SpdkClient(socket_path)

    def lvol(self, volume_id):
        """The bdev of the volume's lvol (``volume-<id>`` alias)."""
        for bdev in self.client.bdev_get_bdevs():
            names = [bdev['name']] + bdev.get('aliases', [])
            if any(n.endswith('/volume-%s' % volume_id) for n in names):
                return bdev
        return None

    def rate_limits(self, volume_id):
        """The non-zero limits SPDK enforces on the volume's lvol."""
        bdev = self.lvol(volume_id)
        if bdev is None:
            raise LookupError('no lvol for volume %s' % volume_id)
        limits = bdev.get('assigned_rate_limits', {})
        return {k: v for k, v in limits.items() if v}
