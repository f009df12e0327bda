"""The bdev a volume's vhost-blk controller exposes, and its removal.

A local volume gets a layer over its lvol (:mod:`volume_bdev`), a remote
one the namespace of an NVMe-oF controller (:mod:`nvme_initiator`); both
are named after the volume, so the name is the disk serial the guest
sees; so is a replicated one's RAID1 over its replicas (:mod:`replicas`).
Several controllers may share one (a multiattach volume's guests):
it goes only with the last.
"""

from os_brick_connector import connector_errors as errors
from os_brick_connector import nvme_initiator
from os_brick_connector import replicas
from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import volume_bdev


def controller_bdev(ctrl):
    """The bdev a ``vhost_get_controllers`` entry exposes, or None."""
    return ctrl.get('backend_specific', {}).get('block', {}).get('bdev')


class Backing(object):
    """Makes, recognises and releases the bdev under a controller."""

    def __init__(self, client, conf):
        self.client = client
        self.conf = conf

    def canonical(self, bdev):
        """A bdev's own name: an alias (lvs/lvol) is listed by its UUID."""
        return self.client.bdev_get_bdevs(name=bdev)[0]['name']

    def _lvol_bdev(self, props):
        """The local lvol's bdev name: its UUID, which Cinder gives."""
        return props.get('lvol_uuid') or self.canonical(props.bdev)

    def served(self, ctrl, props):
        """The bdev of ``ctrl`` if it already serves this volume, else None.

        An attachment made by an older release (the lvol itself, or an
        NVMe controller named after the subsystem) is kept as it is until
        it is detached: its guest may be running.
        """
        used = controller_bdev(ctrl)
        if not used:
            return None
        if props.replicas is not None:
            return used if replicas.served(self.client, props, used) else None
        if props.is_local:
            lvol = self._lvol_bdev(props)
            if used == lvol or volume_bdev.is_layer_of(self.client, used,
                                                       lvol):
                return used
        elif nvme_initiator.serves(self.client, props, used):
            return used
        return None

    def make(self, props, undo):
        """The bdev the controller exposes, named after the volume.

        Its name is the disk serial the guest sees (see volume_bdev): a
        layer over a local lvol, the NVMe namespace of a remote one.
        Returns it, and the saved-config entry that makes it when that
        is all the attach adds to the ``bdev`` subsystem (else None).
        """
        if props.is_local:
            return self._local_layer(props, undo)
        if props.replicas is not None:
            # The superblock holds the RAID's config: the saved config
            # gets the NVMe attaches, read back from the target.
            return replicas.assemble(self.client, props, self.conf,
                                     undo), None
        created = False
        try:
            wanted, created = nvme_initiator.attach(self.client, props,
                                                    self.conf)
        except spdk_exc.SpdkTransportError:
            # The answer was lost: it may be attached. Detach only if
            # no other volume's controller uses it.
            created = True
            raise
        finally:
            if created:
                undo.append(lambda: nvme_initiator.detach_if_unused(
                    self.client, props,
                    self.client.vhost_get_controllers(), self.conf))
        return self.canonical(wanted), None

    def _local_layer(self, props, undo):
        """Create (or find) the layer named after the volume on its lvol."""
        lvol = self._lvol_bdev(props)
        layer = volume_bdev.name(props.volume_id)
        try:
            volume_bdev.create(self.client, layer, lvol)
        except spdk_exc.AlreadyExists:
            if not volume_bdev.is_layer_of(self.client, layer, lvol):
                raise errors.BdevConflict(bdev=layer, wanted=lvol)
            # Another guest's controller of a multiattach volume uses it,
            # or a detach that did not finish left it.
        except spdk_exc.NotPermitted as err:
            # Nothing was created; SPDK's log names who holds the lvol.
            raise errors.VolumeClaimed(bdev=props.bdev,
                                       reason=err) from err
        except spdk_exc.SpdkTransportError:
            undo.append(lambda: self._drop_unused_layer(layer))
            raise
        # Never delete it from under a controller of another guest.
        undo.append(lambda: self._drop_unused_layer(layer))
        return layer, volume_bdev.config_entry(layer, lvol)

    def _drop_unused_layer(self, layer, controllers=None):
        """Delete the volume's layer unless a controller still uses it."""
        if controllers is None:
            controllers = self.client.vhost_get_controllers()
        if all(controller_bdev(ctrl) != layer for ctrl in controllers):
            volume_bdev.delete(self.client, layer)

    def release(self, props, used):
        """Remove what the deleted controller alone used.

        ``used`` is the bdev it exposed (None when it was gone already):
        the NVMe controller to detach is found from it, so one named by
        an older release goes too. Returns the layer's saved-config entry
        when the layer is what went.
        """
        if props.replicas is not None:
            replicas.release(self.client, props, self.conf)
            return None
        if props.is_remote:
            nvme_initiator.detach_if_unused(
                self.client, props, self.client.vhost_get_controllers(),
                self.conf, bdev=used)
            return None
        layer = volume_bdev.name(props.volume_id)
        if props.attached_to is None:
            # No other guest's controller can be on it: only a
            # multiattach volume's guests share a layer.
            volume_bdev.delete(self.client, layer)
        else:
            self._drop_unused_layer(layer)
        return volume_bdev.config_entry(layer, used)
