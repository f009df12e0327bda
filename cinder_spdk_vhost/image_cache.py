"""Image cache: one read-only base lvol per image, volumes clone it.

The first volume from an image imports it into a base lvol (named from
the image id and a digest of its checksum, hash and update time, so a
changed image gets a new base), which is then made read-only; every
volume from that image is a thin clone of the base, a metadata
operation. A base is deleted when its last clone goes: kept, it would
hold space nobody asked for, and it costs one import to remake.
"""

import hashlib

from oslo_log import log

from cinder_spdk_vhost import images
from cinder_spdk_vhost import locks
from cinder_spdk_vhost import lvols

LOG = log.getLogger(__name__)

BASE_PREFIX = 'imgbase-'
_DIGEST_KEYS = ('checksum', 'os_hash_value', 'updated_at', 'size')


def base_name(image_meta):
    """The base lvol's name: image id plus a digest of its version.

    57 characters for a UUID image id (SPDK allows 63).
    """
    stamp = '|'.join(str(image_meta.get(key) or '')
                     for key in _DIGEST_KEYS)
    digest = hashlib.sha256(stamp.encode('utf-8')).hexdigest()[:12]
    return '%s%s-%s' % (BASE_PREFIX, image_meta['id'], digest)


def is_base(name):
    return bool(name) and name.startswith(BASE_PREFIX)


class ImageCache(object):
    """Limits and clean-up of the base lvols of one backend."""

    def __init__(self, client, conf):
        self.client = client
        self.conf = conf

    @property
    def enabled(self):
        return self.conf.spdk_image_cache_enabled

    def bases(self, lvs):
        """The base lvols of lvol store ``lvs`` (get_lvols entries)."""
        return [item for item in self.client.bdev_lvol_get_lvols(
            lvs_name=lvs) if is_base(item['name'])]

    def has_room(self, lvs, size_bytes):
        """Whether one more base of ``size_bytes`` fits the limits."""
        bases = self.bases(lvs)
        max_count = self.conf.spdk_image_cache_max_count
        if max_count and len(bases) >= max_count:
            LOG.info('Image cache of %(lvs)s holds %(n)d bases '
                     '(spdk_image_cache_max_count)',
                     {'lvs': lvs, 'n': len(bases)})
            return False
        max_gib = self.conf.spdk_image_cache_max_size_gb
        if not max_gib:
            return True
        used = sum(lvols.get(self.client, item['alias']).size_bytes
                   for item in bases)
        if used + size_bytes > max_gib * lvols.GIB:
            LOG.info('Image cache of %(lvs)s: %(used)d bytes used, no room '
                     'for %(size)d more (spdk_image_cache_max_size_gb)',
                     {'lvs': lvs, 'used': used, 'size': size_bytes})
            return False
        return True

    def release(self, alias):
        """Delete base ``alias`` if no clone uses it any more."""
        name = alias.partition('/')[2]
        with locks.locked(locks.block(name)):
            base = lvols.get(self.client, alias)
            if base is None or base.clones:
                return
            images.delete_lvol(self.client, alias)
        LOG.info('Deleted image base %s: its last clone is gone', alias)
