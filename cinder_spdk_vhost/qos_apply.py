"""Make an lvol's SPDK rate limits equal to the wanted ones, or fail.

SPDK v26 accepts the first limit on a bdev, but refuses any later change
with EAGAIN while no I/O channel is open on it (no guest connected, not
exported; see tests/functional/transcripts/README.md). A retype or extend
of a detached volume would then leave the old limit in force. So on
EAGAIN the bdev is briefly exported through a private, host-less NVMe-oF
subsystem (which opens a channel), the change is made, and the export is
removed. The limits are read back afterwards: a limit is only reported
as applied when SPDK says it is in force.
"""

from cinder import exception
from oslo_log import log

from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import qos
from spdk_vhost_core import exception as rpc_exc

LOG = log.getLogger(__name__)


def in_force(client, name):
    """The four limits SPDK currently enforces on bdev ``name``."""
    lvol = lvols.get(client, name)
    if lvol is None:
        raise exception.VolumeBackendAPIException(
            data='lvol %s vanished while setting its QoS' % name)
    return {key: lvol.rate_limits.get(key, 0) for key in qos.SPDK_KEYS}


def apply(client, exporter, lvol, limits):
    """Converge ``lvol``'s limits to ``limits`` (all four SPDK keys)."""
    if in_force(client, lvol.uuid) == limits:
        return
    try:
        client.bdev_set_qos_limit(lvol.uuid, **limits)
    except rpc_exc.TryAgain:
        LOG.debug('QoS change on idle lvol %s: opening an I/O channel',
                  lvol.alias)
        with exporter.io_channel(lvol):
            client.bdev_set_qos_limit(lvol.uuid, **limits)
    actual = in_force(client, lvol.uuid)
    if actual != limits:
        raise exception.VolumeBackendAPIException(
            data='SPDK enforces %s on %s, not the requested %s'
                 % (actual, lvol.alias, limits))
    LOG.info('QoS of %(lvol)s is now %(limits)s',
             {'lvol': lvol.alias, 'limits': limits})
