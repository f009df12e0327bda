"""The emulated SPDK target: state, locking and method dispatch.

Handlers live in one module per SPDK area (bdev, lvol, vhost, nvmf, ...);
each exposes ``METHODS = {name: (params decoder, handler)}`` and this class
only routes calls, keeps the bdev registry every area shares, and tells
the areas about bdevs going away (SPDK's hot-remove), so a vhost
controller is left with ``bdev: null`` and a namespace disappears exactly
when SPDK would do it.
"""

import logging
import os
import threading

from tests.emulator import bdev as bdev_mod
from tests.emulator import errors
from tests.emulator import framework
from tests.emulator import keyring
from tests.emulator import lvol_rpc
from tests.emulator import nvme
from tests.emulator import nvmf
from tests.emulator import vhost

LOG = logging.getLogger(__name__)

AREAS = (framework, bdev_mod, lvol_rpc, vhost, nvmf, nvme, keyring)


class Target(object):
    """One emulated ``spdk_tgt`` process."""

    def __init__(self, dataplane, vhost_dir, state_dir, core_mask=0x3,
                 reactor_numa=None):
        self.dataplane = dataplane
        self.vhost_dir = vhost_dir
        self.state_dir = state_dir
        self.core_mask = core_mask
        cores = [c for c in range(core_mask.bit_length())
                 if core_mask >> c & 1]
        numa = list(reactor_numa or [])
        self.reactors = [(c, numa[i] if i < len(numa) else 0)
                         for i, c in enumerate(cores)]
        self.lock = threading.RLock()
        self.bdevs = []
        self.methods = {}
        for area in AREAS:
            self.methods.update(area.METHODS)
        self.keyring = keyring.KeyringState(self)
        self.vhost = vhost.VhostState(self)
        self.nvmf = nvmf.NvmfState(self)
        self.nvme = nvme.NvmeState(self)
        self.lvol = lvol_rpc.LvolState(self)

    # -- dispatch -------------------------------------------------------
    def dispatch(self, method, params):
        try:
            decoder, handler = self.methods[method]
        except KeyError:
            raise errors.RpcError(errors.METHOD_NOT_FOUND,
                                  'Method not found') from None
        args = decoder(params)
        with self.lock:
            return handler(self, args)

    # -- bdev registry --------------------------------------------------
    def find_bdev(self, name):
        """A bdev by name, alias or UUID string, as spdk_bdev_get_by_name."""
        for bdev in self.bdevs:
            if name == bdev.name or name in bdev.aliases or (
                    bdev.uuid and name.lower() == bdev.uuid):
                return bdev
        return None

    def get_bdev(self, name, code=None):
        bdev = self.find_bdev(name)
        if bdev is None:
            raise errors.errno_error(19, code)
        return bdev

    def name_taken(self, name):
        return self.find_bdev(name) is not None

    def add_bdev(self, bdev):
        self.bdevs.append(bdev)

    def remove_bdev(self, bdev):
        """Unregister: every user of the bdev learns it is gone."""
        self.vhost.bdev_removed(bdev)
        self.nvmf.bdev_removed(bdev)
        self.bdevs.remove(bdev)

    def has_open_channel(self, bdev):
        """True while some consumer holds an I/O channel on the bdev.

        A vhost controller opens channels only while a guest is connected;
        an NVMe-oF namespace holds them as long as it exists.
        """
        return (self.vhost.sessions_on(bdev) > 0 or
                self.nvmf.exports_bdev(bdev))

    def private_dir(self, *parts):
        path = os.path.join(self.state_dir, *parts)
        os.makedirs(path, exist_ok=True)
        return path

    def close(self):
        """Stop everything the target runs (link sockets, QSD)."""
        with self.lock:
            self.nvme.close()
            self.nvmf.close()
            self.lvol.close()
        self.dataplane.close()
