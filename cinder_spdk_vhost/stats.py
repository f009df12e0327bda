"""The scheduler's view of the backend: one pool per lvol store."""

from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import tally


def provisioned(store, bdevs):
    """Bytes the lvols of ``store`` may hold, counted from every bdev.

    Markers of deleted snapshots hold nothing; see
    :meth:`tally.Entry.bytes` for what the others count.
    """
    cluster = store['cluster_size']
    return sum(entry.bytes(cluster)
               for entry in (tally.Entry(b) for b in bdevs
                             if tally.Entry.counted(b))
               if entry.store == store['uuid'])


def pool_stats(client, conf, target_id, lvs, bdevs=None, counts=None):
    """The stats of pool (lvol store) ``lvs``.

    Provisioned bytes from ``counts`` (a :class:`tally.Tally` brought up
    to date for this call: no reply that grows with the pool) or else
    from ``bdevs``, every bdev of the target.
    """
    store = client.bdev_lvol_get_lvstores(lvs_name=lvs)[0]
    cluster = store['cluster_size']
    held = (counts.provisioned(store) if counts is not None
            else provisioned(store, bdevs))
    return {
        'pool_name': lvs,
        'total_capacity_gb': round(
            store['total_data_clusters'] * cluster / lvols.GIB, 2),
        'free_capacity_gb': round(
            store['free_clusters'] * cluster / lvols.GIB, 2),
        'provisioned_capacity_gb': round(held / lvols.GIB, 2),
        'reserved_percentage': conf.reserved_percentage,
        'max_over_subscription_ratio': conf.max_over_subscription_ratio,
        'thin_provisioning_support': conf.spdk_thin_provision,
        'thick_provisioning_support': not conf.spdk_thin_provision,
        'QoS_support': True,
        'multiattach': True,
        'location_info': 'spdk_vhost:%s:%s' % (target_id, lvs),
    }


def report(backend_name, version, pools, most_replicas):
    """The backend's stats, each pool with ``spdk_max_replicas``.

    ``most_replicas``: the most copies (``spdk:replicas``) a volume
    could have now, for a replicated type's
    ``capabilities:spdk_max_replicas``.
    """
    for pool in pools:
        pool['spdk_max_replicas'] = most_replicas
    return {'volume_backend_name': backend_name, 'vendor_name': 'SPDK',
            'driver_version': version, 'storage_protocol': 'vhost-user',
            'pools': pools}
