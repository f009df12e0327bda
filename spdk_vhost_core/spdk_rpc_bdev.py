"""Typed SPDK RPCs about the target itself, bdevs, lvols and RAIDs.

Mixins of :class:`spdk_vhost_core.spdk_rpc.SpdkClient`, which provides
``call()``. Method and parameter names are SPDK v26's; optional arguments
left at None are not sent, so SPDK applies its own defaults.
"""

from spdk_vhost_core import exception


def rpc_params(**kwargs):
    """Params for an RPC: the given arguments that are not None."""
    return {key: value for key, value in kwargs.items() if value is not None}


class FrameworkMethods(object):
    """Discovery and configuration RPCs."""

    def spdk_get_version(self):
        return self.call('spdk_get_version')

    def rpc_get_methods(self, current=None):
        return self.call('rpc_get_methods', rpc_params(current=current))

    def framework_get_reactors(self):
        return self.call('framework_get_reactors')

    def framework_get_subsystems(self):
        return self.call('framework_get_subsystems')

    def framework_get_config(self, name):
        return self.call('framework_get_config', rpc_params(name=name))

    def save_config(self):
        """The target's live configuration, as ``rpc.py save_config``.

        Not an RPC in v26: assembled from the subsystem list (already in
        dependency order) and each subsystem's config, into the
        ``{'subsystems': [{'subsystem', 'config'}]}`` document that
        ``spdk_tgt --json`` loads at start.
        """
        return {'subsystems': [
            {'subsystem': item['subsystem'],
             'config': self.framework_get_config(item['subsystem'])}
            for item in self.framework_get_subsystems()]}


class BdevMethods(object):
    """Generic bdev RPCs: lookup, AIO files, QoS and statistics."""

    def bdev_get_bdevs(self, name=None, timeout=None):
        """All bdevs, or a one-element list for ``name`` (or alias).

        A missing name raises :class:`exception.NotFound`; ``timeout``
        (ms) makes SPDK wait for the bdev to appear.
        """
        params = rpc_params(name=name, timeout=timeout)
        bdevs = self.call('bdev_get_bdevs', params)
        if name is not None and not bdevs:
            # SPDK answers -19 itself; an empty list must not pass either.
            raise exception.NotFound('bdev_get_bdevs', params, -19,
                                     'No such device')
        return bdevs

    def bdev_wait_for_examine(self):
        """Return once every bdev module has examined every bdev."""
        return self.call('bdev_wait_for_examine')

    def bdev_aio_create(self, filename, name, block_size=None,
                        readonly=None, fallocate=None, uuid=None):
        return self.call('bdev_aio_create', rpc_params(
            name=name, filename=filename, block_size=block_size,
            readonly=readonly, fallocate=fallocate, uuid=uuid))

    def bdev_aio_delete(self, name):
        return self.call('bdev_aio_delete', rpc_params(name=name))

    def bdev_set_qos_limit(self, name, rw_ios_per_sec=None,
                           rw_mbytes_per_sec=None, r_mbytes_per_sec=None,
                           w_mbytes_per_sec=None):
        """Set rate limits; 0 turns one off, None leaves it unchanged.

        ``rw_ios_per_sec`` must be a multiple of 1000. SPDK answers
        :class:`exception.TryAgain` to a change while the bdev has no
        open I/O channel.
        """
        return self.call('bdev_set_qos_limit', rpc_params(
            name=name, rw_ios_per_sec=rw_ios_per_sec,
            rw_mbytes_per_sec=rw_mbytes_per_sec,
            r_mbytes_per_sec=r_mbytes_per_sec,
            w_mbytes_per_sec=w_mbytes_per_sec))


class LvolMethods(object):
    """Logical volume store and logical volume RPCs."""

    def bdev_lvol_get_lvstores(self, lvs_name=None, uuid=None):
        return self.call('bdev_lvol_get_lvstores',
                         rpc_params(lvs_name=lvs_name, uuid=uuid))

    def bdev_lvol_get_lvols(self, lvs_name=None, lvs_uuid=None):
        return self.call('bdev_lvol_get_lvols',
                         rpc_params(lvs_name=lvs_name, lvs_uuid=lvs_uuid))

    def bdev_lvol_create(self, lvol_name, size_in_mib, lvs_name=None,
                         uuid=None, thin_provision=None, clear_method=None):
        """Create an lvol; returns its UUID (its bdev name)."""
        return self.call('bdev_lvol_create', rpc_params(
            lvol_name=lvol_name, size_in_mib=size_in_mib,
            lvs_name=lvs_name, uuid=uuid, thin_provision=thin_provision,
            clear_method=clear_method))

    def bdev_lvol_delete(self, name):
        return self.call('bdev_lvol_delete', rpc_params(name=name))

    def bdev_lvol_resize(self, name, size_in_mib):
        return self.call('bdev_lvol_resize',
                         rpc_params(name=name, size_in_mib=size_in_mib))

    def bdev_lvol_snapshot(self, lvol_name, snapshot_name):
        return self.call('bdev_lvol_snapshot', rpc_params(
            lvol_name=lvol_name, snapshot_name=snapshot_name))

    def bdev_lvol_clone(self, snapshot_name, clone_name):
        return self.call('bdev_lvol_clone', rpc_params(
            snapshot_name=snapshot_name, clone_name=clone_name))

    def bdev_lvol_inflate(self, name):
        return self.call('bdev_lvol_inflate', rpc_params(name=name))

    def bdev_lvol_decouple_parent(self, name):
        return self.call('bdev_lvol_decouple_parent', rpc_params(name=name))

    def bdev_lvol_set_read_only(self, name):
        return self.call('bdev_lvol_set_read_only', rpc_params(name=name))

    def bdev_lvol_rename(self, old_name, new_name):
        return self.call('bdev_lvol_rename',
                         rpc_params(old_name=old_name, new_name=new_name))

    def bdev_lvol_start_shallow_copy(self, src_lvol_name, dst_bdev_name):
        """Start copying a read-only lvol's own clusters to a bdev.

        Returns ``{'operation_id': N}`` for
        :meth:`bdev_lvol_check_shallow_copy`.
        """
        return self.call('bdev_lvol_start_shallow_copy', rpc_params(
            src_lvol_name=src_lvol_name, dst_bdev_name=dst_bdev_name))

    def bdev_lvol_check_shallow_copy(self, operation_id):
        """Progress of a shallow copy.

        The final state is reported once; after that the id is
        :class:`exception.NotFound`.
        """
        return self.call('bdev_lvol_check_shallow_copy',
                         rpc_params(operation_id=operation_id))


def raid_members(raid):
    """The members a RAID of ``bdev_raid_get_bdevs`` uses.

    A failed or missing member keeps its slot, with no name or not
    configured.
    """
    return [base['name'] for base in raid.get('base_bdevs_list') or ()
            if base.get('name') and base.get('is_configured', True)]


class RaidMethods(object):
    """RAID bdevs: a replicated volume's mirror, a local volume's layer.

    Parameters as SPDK v26.05's ``module/bdev/raid/bdev_raid_rpc.c``
    decodes them.
    """

    def bdev_raid_get_bdevs(self, category='all'):
        """The RAIDs in ``category``: all, online, configuring, offline."""
        return self.call('bdev_raid_get_bdevs',
                         rpc_params(category=category))

    def bdev_raid_create(self, name, raid_level, base_bdevs,
                         strip_size_kb=None, uuid=None, superblock=None):
        """Create RAID ``name``; ``superblock`` writes one on each member.

        A member that does not exist yet is waited for: the RAID is
        configured once examine finds the last one.
        """
        return self.call('bdev_raid_create', rpc_params(
            name=name, raid_level=raid_level, strip_size_kb=strip_size_kb,
            base_bdevs=base_bdevs, uuid=uuid, superblock=superblock))

    def bdev_raid_delete(self, name, clear_sb=None):
        """Delete RAID ``name``; ``clear_sb`` wipes its members' superblocks.

        Without it they stay: a mirror assembles again from them.
        """
        return self.call('bdev_raid_delete',
                         rpc_params(name=name, clear_sb=clear_sb))

    def bdev_raid_add_base_bdev(self, raid_bdev, base_bdev):
        """Add member ``base_bdev`` to ``raid_bdev``; a mirror rebuilds it."""
        return self.call('bdev_raid_add_base_bdev', rpc_params(
            raid_bdev=raid_bdev, base_bdev=base_bdev))

    def bdev_raid_remove_base_bdev(self, name):
        """Take member ``name`` out of the RAID that holds it."""
        return self.call('bdev_raid_remove_base_bdev',
                         rpc_params(name=name))
