"""What the SPDK target behind the backend really enforces.

The API tests can only see what Cinder reports; on an all-in-one host
(``[spdk_vhost] spdk_rpc_socket`` set) they also read the lvol's limits
from SPDK, so a QoS spec reported as applied but not in force fails.
"""

from os_brick_connector import spdk_rpc

# Cinder key -> SPDK's assigned_rate_limits key, and the unit divisor.
LIMITS = {
    'total_iops_sec': ('rw_ios_per_sec', 1),
    'total_bytes_sec': ('rw_mbytes_per_sec', 1024 * 1024),
    'read_bytes_sec': ('r_mbytes_per_sec', 1024 * 1024),
    'write_bytes_sec': ('w_mbytes_per_sec', 1024 * 1024),
}


def expected_limits(qos_specs):
    """SPDK's limits for Cinder QoS keys given in exact SPDK units."""
    limits = {}
    for key, value in qos_specs.items():
        spdk_key, divisor = LIMITS[key]
        limits[spdk_key] = int(value) // divisor
    return limits


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
