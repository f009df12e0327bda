"""Typed SPDK RPCs that export bdevs: vhost-blk, NVMe-oF target, initiator.

Mixins of :class:`spdk_vhost_core.spdk_rpc.SpdkClient`, which provides
``call()``. Method and parameter names are SPDK v26's; optional arguments
left at None are not sent.
"""

from spdk_vhost_core import exception
from spdk_vhost_core.spdk_rpc_bdev import rpc_params


def _address(trtype, traddr, trsvcid, adrfam):
    return rpc_params(trtype=trtype, adrfam=adrfam, traddr=traddr,
                      trsvcid=trsvcid)


class VhostMethods(object):
    """vhost-user-blk controllers, the sockets QEMU connects to."""

    def vhost_create_blk_controller(self, ctrlr, dev_name, cpumask=None,
                                    readonly=None, packed_ring=None,
                                    packed_ring_recovery=None,
                                    transport=None):
        """Create ``<vhost dir>/<ctrlr>`` serving bdev ``dev_name``.

        ``cpumask`` (hex string) picks the reactors polling it; it must be
        inside the target's core mask.
        """
        return self.call('vhost_create_blk_controller', rpc_params(
            ctrlr=ctrlr, dev_name=dev_name, cpumask=cpumask,
            readonly=readonly, packed_ring=packed_ring,
            packed_ring_recovery=packed_ring_recovery, transport=transport))

    def vhost_get_controllers(self, name=None):
        return self.call('vhost_get_controllers', rpc_params(name=name))

    def vhost_controller(self, name):
        """Controller ``name`` as listed by the target, or None."""
        try:
            return self.vhost_get_controllers(name=name)[0]
        except exception.NotFound:
            return None

    def vhost_delete_controller(self, ctrlr):
        return self.call('vhost_delete_controller', rpc_params(ctrlr=ctrlr))

    def vhost_controller_set_coalescing(self, ctrlr, delay_base_us,
                                        iops_threshold):
        return self.call('vhost_controller_set_coalescing', rpc_params(
            ctrlr=ctrlr, delay_base_us=delay_base_us,
            iops_threshold=iops_threshold))


class NvmfMethods(object):
    """NVMe-oF target: one subsystem per exported volume."""

    def nvmf_create_transport(self, trtype, **options):
        """Create a transport; ``options`` are SPDK's own param names."""
        return self.call('nvmf_create_transport',
                         rpc_params(trtype=trtype, **options))

    def nvmf_create_subsystem(self, nqn, serial_number=None,
                              model_number=None, allow_any_host=None,
                              max_namespaces=None, ana_reporting=None):
        return self.call('nvmf_create_subsystem', rpc_params(
            nqn=nqn, serial_number=serial_number, model_number=model_number,
            allow_any_host=allow_any_host, max_namespaces=max_namespaces,
            ana_reporting=ana_reporting))

    def nvmf_delete_subsystem(self, nqn):
        return self.call('nvmf_delete_subsystem', rpc_params(nqn=nqn))

    def nvmf_get_subsystems(self, nqn=None):
        return self.call('nvmf_get_subsystems', rpc_params(nqn=nqn))

    def nvmf_subsystem_add_listener(self, nqn, trtype, traddr, trsvcid,
                                    adrfam=None):
        return self.call('nvmf_subsystem_add_listener', {
            'nqn': nqn,
            'listen_address': _address(trtype, traddr, trsvcid, adrfam)})

    def nvmf_subsystem_add_ns(self, nqn, bdev_name, nsid=None, uuid=None,
                              nguid=None):
        """Add bdev ``bdev_name`` as a namespace; returns its nsid."""
        return self.call('nvmf_subsystem_add_ns', {
            'nqn': nqn,
            'namespace': rpc_params(bdev_name=bdev_name, nsid=nsid,
                                    uuid=uuid, nguid=nguid)})

    def nvmf_subsystem_add_host(self, nqn, host, psk=None, dhchap_key=None,
                                dhchap_ctrlr_key=None):
        """Admit ``host``; the key arguments are keyring key *names*."""
        return self.call('nvmf_subsystem_add_host', rpc_params(
            nqn=nqn, host=host, psk=psk, dhchap_key=dhchap_key,
            dhchap_ctrlr_key=dhchap_ctrlr_key))

    def nvmf_subsystem_remove_host(self, nqn, host):
        return self.call('nvmf_subsystem_remove_host',
                         rpc_params(nqn=nqn, host=host))


class NvmeMethods(object):
    """NVMe-oF initiator (bdev_nvme) on the compute side."""

    def bdev_nvme_attach_controller(self, name, trtype, traddr, subnqn,
                                    trsvcid=None, adrfam=None, hostnqn=None,
                                    ctrlr_loss_timeout_sec=None,
                                    reconnect_delay_sec=None,
                                    fast_io_fail_timeout_sec=None,
                                    psk=None, dhchap_key=None,
                                    dhchap_ctrlr_key=None):
        """Connect to a remote subsystem; returns its bdev names.

        The three timeouts decide how a lost path is retried: every
        ``reconnect_delay_sec``, I/O failing after
        ``fast_io_fail_timeout_sec`` and the controller dropped after
        ``ctrlr_loss_timeout_sec`` (-1: never). ``psk`` and the
        ``dhchap_*`` keys are keyring key names.
        """
        return self.call('bdev_nvme_attach_controller', rpc_params(
            name=name, trtype=trtype, adrfam=adrfam, traddr=traddr,
            trsvcid=trsvcid, subnqn=subnqn, hostnqn=hostnqn,
            ctrlr_loss_timeout_sec=ctrlr_loss_timeout_sec,
            reconnect_delay_sec=reconnect_delay_sec,
            fast_io_fail_timeout_sec=fast_io_fail_timeout_sec, psk=psk,
            dhchap_key=dhchap_key, dhchap_ctrlr_key=dhchap_ctrlr_key))

    def bdev_nvme_detach_controller(self, name):
        return self.call('bdev_nvme_detach_controller', rpc_params(name=name))

    def bdev_nvme_get_controllers(self, name=None):
        return self.call('bdev_nvme_get_controllers', rpc_params(name=name))


class KeyringMethods(object):
    """SPDK's file keyring: the NVMe-oF RPCs name keys registered here."""

    def keyring_file_add_key(self, name, path):
        """Register key ``name`` read from ``path`` (0600, absolute)."""
        return self.call('keyring_file_add_key',
                         rpc_params(name=name, path=path))

    def keyring_file_remove_key(self, name):
        return self.call('keyring_file_remove_key', rpc_params(name=name))
