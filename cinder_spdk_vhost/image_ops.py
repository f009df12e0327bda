"""The driver's image methods: to and from Glance, and the image cache.

:class:`cinder_spdk_vhost.driver.SpdkVhostDriver` delegates to one
:class:`ImageOps`, so the driver module stays about volumes. Cinder's own
``cinder.image.image_utils`` fetches and converts (format checks,
``disk_format``/``container_format``, virtual size against volume size)
and uploads; :mod:`cinder_spdk_vhost.images` moves the bytes between the
raw file and the lvol on the target.
"""

import contextlib

from cinder import exception
from cinder.image import image_utils
from cinder.volume import volume_utils
from oslo_config import cfg
from oslo_log import log

from cinder_spdk_vhost import dd
from cinder_spdk_vhost import errors
from cinder_spdk_vhost import image_cache
from cinder_spdk_vhost import images
from cinder_spdk_vhost import locks
from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import operation
from cinder_spdk_vhost import pools
from cinder_spdk_vhost import replica_type

LOG = log.getLogger(__name__)
CONF = cfg.CONF


def staging_dir(conf):
    """Where raw image and backup files are written on this host."""
    return conf.spdk_image_staging_dir or CONF.image_conversion_dir


class ImageOps(pools.Part):
    """copy_image_to_volume, copy_volume_to_image and clone_image.

    Images hold the guest's disk: a replicated volume's copies hold it
    after the superblock's room, which ``replicas.disk`` (a
    :class:`replica_disk.Disk`) reads and writes past.
    """

    def __init__(self, pools, replicas):
        super().__init__(pools)
        self.replicas = replicas

    @property
    def image_cache(self):
        return self.pools.image_cache

    def sweep_scratch(self):
        """Remove scratch exports, lvols and aio bdevs of broken transfers.

        Exports before the lvols they hold; clones before snapshots, so
        each snapshot has one clone at most when deleted. What a running
        transfer uses (its object's lock is held, by this process or by
        another member of the cluster) is left for a later sweep.
        """
        dd.sweep_exports(self.exporter)
        for lvs in self.pools.lvstores:
            items = self.client.bdev_lvol_get_lvols(lvs_name=lvs)
            scratch = sorted(
                (item for item in items if lvols.is_temp(item['name'])),
                key=lambda item: item.get('is_snapshot', False))
            for item in scratch:
                self._sweep(item['alias'], item['name'], images.delete_lvol)
        if self.client.through_agent:
            return  # a remote target has no aio bdev of ours
        for bdev in self.client.bdev_get_bdevs():
            if (bdev.get('product_name') == 'AIO disk' and
                    lvols.is_temp(bdev['name'])):
                self._sweep(bdev['name'], bdev['name'], images.delete_aio)

    def _sweep(self, what, name, delete):
        with locks.idle(*locks.owner_locks(name)) as unused:
            if unused:
                LOG.warning('Deleting %s, left by an interrupted image '
                            'transfer', what)
                delete(self.client, what)

    def staging_dir(self):
        return staging_dir(self.conf)

    def _import_image(self, context, image_service, image_id, volume, lvs,
                      lvol_name, rb, disable_sparse=False):
        """Fetch an image (raw, converted by Cinder's rules) into an lvol.

        The image must fit ``volume``; the new lvol is image-sized.
        """
        store = self.client.bdev_lvol_get_lvstores(lvs_name=lvs)[0]
        with self._fetched(context, image_service, image_id, volume,
                           disable_sparse) as path:
            images.pad(path, store['cluster_size'])
            return images.import_file(
                self.client, self.exporter, self.conf, path, lvs,
                lvol_name, volume.id, store['cluster_size'], rb)

    @contextlib.contextmanager
    def _fetched(self, context, image_service, image_id, volume,
                 disable_sparse):
        """The image as a raw staging file (Cinder's rules), gone after."""
        self.exporter.require('Writing an image into a volume (spdk_dd '
                              'reaches the lvol over NVMe/TCP)')
        with images.staging_file(self.staging_dir(),
                                 'image-%s-' % image_id) as path:
            image_utils.fetch_to_raw(
                context, image_service, image_id, path,
                self.conf.volume_dd_blocksize, size=volume.size,
                run_as_root=False, disable_sparse=disable_sparse)
            yield path

    def copy_image_to_volume(self, context, volume, image_service, image_id,
                             disable_sparse=False):
        """Replace the volume's (new, empty) copies by the imported image."""
        limits = self.pools.limits(volume.volume_type_id, volume.size)
        with operation.running('copy image %s to volume %s'
                               % (image_id, volume.id),
                               locks.vlock(volume.id)) as rb:
            old = self.pools.get(volume)
            self.pools.refuse_if_exported(old, volume)
            with self._fetched(context, image_service, image_id, volume,
                               disable_sparse) as path:
                stale = self.replicas.disk.write(volume, old, path, limits,
                                                 rb, 'import', 'imported')
        with errors.translated('clean up after the image import'):
            self.replicas.drop(stale)

    def copy_volume_to_image(self, context, volume, image_service,
                             image_meta):
        """Shallow-copy the volume to a raw file, then let Cinder upload.

        The volume's lock is held only while the target copies, not for
        the conversion and upload.
        """
        with images.staging_file(self.staging_dir(),
                                 'volume-%s-' % volume.id) as path:
            with locks.locked(locks.vlock(volume.id)), \
                    errors.translated('copy volume %s to an image'
                                      % volume.id):
                self.replicas.disk.save(volume, self.pools.get(volume), path,
                                        'uploading it to an image')
            volume_utils.upload_volume(context, image_service, image_meta,
                                       path, volume, run_as_root=False)

    def clone_image(self, context, volume, image_location, image_meta,
                    image_service):
        """With the image cache on: a thin clone of the image's base lvol.

        Returns ``(None, False)`` (Cinder then uses its generic
        image-volume cache if enabled, else copy_image_to_volume) when
        the cache is off or full.
        """
        if not self.image_cache.enabled:
            return None, False
        if replica_type.copies(volume) > 1:
            # A cached base holds the image at offset 0, a replicated
            # copy after the superblock: Cinder copies the image instead.
            LOG.debug('Volume %s is replicated: not cloned from the image '
                      'cache', volume.id)
            return None, False
        limits = self.pools.limits(volume.volume_type_id, volume.size)
        lvs = self.pools.pool(volume)
        name = image_cache.base_name(image_meta)
        base_alias = lvols.alias(lvs, name)
        with operation.running('volume %s from cached image %s'
                               % (volume.id, image_meta['id']),
                               locks.vlock(volume.id),
                               locks.block(name)) as rb:
            base = lvols.get(self.client, base_alias)
            if base is None:
                size = (image_meta.get('virtual_size') or
                        image_meta.get('size') or 0)
                if not self.image_cache.has_room(lvs, size):
                    return None, False
                self._import_image(context, image_service, image_meta['id'],
                                   volume, lvs, name, rb)
                self.client.bdev_lvol_set_read_only(base_alias)
                LOG.info('Cached image %(image)s as %(base)s',
                         {'image': image_meta['id'], 'base': base_alias})
            elif base.size_bytes > volume.size * lvols.GIB:
                raise exception.ImageUnacceptable(
                    image_id=image_meta['id'],
                    reason='image needs %d bytes, volume has %d GiB'
                           % (base.size_bytes, volume.size))
            alias = self.pools.clone(base_alias, volume, rb)
            self.pools.finish(alias, volume, limits)
        return None, True
