"""The scheduler's view of the backend: one pool per lvol store."""

from cinder_spdk_vhost import lvols


def provisioned(store, bdevs):
    """Bytes the lvols of ``store`` may hold.

    A volume its whole size; a snapshot, with or without a Cinder
    record (hidden and deleted ones too), only the clusters it holds:
    it never grows, and what it shares is counted once. Markers of
    deleted snapshots hold nothing.
    """
    total = 0
    for bdev in bdevs:
        info = bdev.get('driver_specific', {}).get('lvol', {})
        if (info.get('lvol_store_uuid') != store['uuid'] or
                lvols.is_marker(lvols.from_bdev(bdev).name)):
            continue
        if info.get('snapshot'):
            total += ((info.get('num_allocated_clusters') or 0) *
                      store['cluster_size'])
        else:
            total += bdev['num_blocks'] * bdev['block_size']
    return total


def pool_stats(client, conf, target_id, lvs, bdevs):
    """The stats of pool (lvol store) ``lvs``, given every bdev."""
    store = client.bdev_lvol_get_lvstores(lvs_name=lvs)[0]
    cluster = store['cluster_size']
    return {
        'pool_name': lvs,
        'total_capacity_gb': round(
            store['total_data_clusters'] * cluster / lvols.GIB, 2),
        'free_capacity_gb': round(
            store['free_clusters'] * cluster / lvols.GIB, 2),
        'provisioned_capacity_gb': round(
            provisioned(store, bdevs) / lvols.GIB, 2),
        'reserved_percentage': conf.reserved_percentage,
        'max_over_subscription_ratio': conf.max_over_subscription_ratio,
        'thin_provisioning_support': conf.spdk_thin_provision,
        'thick_provisioning_support': not conf.spdk_thin_provision,
        'QoS_support': True,
        'multiattach': True,
        'location_info': 'spdk_vhost:%s:%s' % (target_id, lvs),
    }
