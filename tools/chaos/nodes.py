"""The chaos run's SPDK targets: storage nodes and compute hosts.

Each is a real target started as its unit starts it (``testbed``), with
a saved config of its own that it comes back from after a SIGKILL, as
systemd's ``Restart=on-failure`` brings it back. A storage node exports
lvols over NVMe/TCP on one port of its own, as the Cinder driver does;
a compute host attaches them through the os-brick connector and runs
``spdk-vhost-replicas watch`` beside it, as nova-compute's host does.

A node is taken down and brought back only under its lock; the work
that needs it up (an export, a connector call) takes the lock too and
finds out whether the node is up, so a fault never lands half-way
through a provisioning step (faults mid-RPC have their own tests).
"""

import json
import os
import subprocess
import sys
import threading

from oslo_config import cfg

from os_brick_connector import connector
from os_brick_connector import options
from os_brick_connector import privileged
from spdk_vhost_core import replicas as wire
from spdk_vhost_core import saved_config
from spdk_vhost_core import spdk_rpc
from testbed import net
from testbed import spdk_target

LVS = 'lvs0'
LVS_MIB = 4096  # a sparse file: the volumes are thin
VOLUME_MIB = 16
HOST_NQN = ('nqn.2014-08.org.nvmexpress:uuid:'
            'c4a05d39-1f0e-4d8b-9a52-7e3f6b2d8c10')
#: Seconds between the watcher's rounds (the units' default is 10).
WATCH_INTERVAL = 2


class Node(object):
    """One target that can be killed and brought back from its config."""

    def __init__(self, name, workdir, **target_args):
        self.name = name
        self.saved = os.path.join(workdir, '%s.json' % name)
        self.target = spdk_target.SpdkTarget(
            name=name, json_config=self.saved, service=True, **target_args)
        self.lock = threading.RLock()
        self.up = False

    def start(self):
        """Start the target and set it up; stopped again if that fails."""
        self.target.setUp()
        try:
            self.prepare()
        except Exception:
            self.stop()
            raise
        self.up = True

    def prepare(self):
        self.target.aio_lvstore(LVS, size_mib=LVS_MIB, block_size=512)

    def rpc(self, method, params=None):
        return self.target.rpc(method, params)

    def save(self):
        with spdk_rpc.SpdkClient(self.target.socket_path) as client:
            saved_config.ConfigSaver(client, self.saved).save()

    def kill(self):
        """SIGKILL it; the crash it had already died of, or None."""
        with self.lock:
            self.up = False
            try:
                self.target.kill()
            except spdk_target.TargetDied as died:
                return str(died)
        return None

    def bring_back(self):
        with self.lock:
            self.target.start()
            self.up = True

    def crashed(self):
        """What to say if it died of itself (not by our kill), else None."""
        with self.lock:
            if not self.up or self.target.process.poll() is None:
                return None
            self.up = False
            return self.target.crash_report() or '%s exited with %s' % (
                self.name, self.target.process.returncode)

    def stop(self):
        self.target.cleanUp()


class Storage(Node):
    """A storage node's ``nvmf_tgt``: idle, no auto-examine (replicas)."""

    def __init__(self, name, workdir):
        super().__init__(name, workdir, app='nvmf_tgt', interrupt_mode=True,
                         auto_examine=False)
        self.port = str(net.free_port())
        # Exports whose removal waits for the node to be back, as
        # Cinder's delete of a volume on a node down is retried.
        self.owed = []

    def prepare(self):
        super().prepare()
        self.rpc('nvmf_create_transport', {'trtype': 'TCP'})
        self.save()

    def export(self, volume_id):
        """Cinder's part: a thin lvol in a subsystem for this host only."""
        nqn = 'nqn.2016-06.io.spdk:%s' % volume_id
        with self.lock:
            if not self.up:
                return None
            lvol = self.rpc('bdev_lvol_create', {
                'lvol_name': volume_id, 'size_in_mib': VOLUME_MIB,
                'lvs_name': LVS, 'thin_provision': True})
            self.rpc('nvmf_create_subsystem', {'nqn': nqn})
            self.rpc('nvmf_subsystem_add_ns', {
                'nqn': nqn, 'namespace': {'bdev_name': lvol}})
            self.rpc('nvmf_subsystem_add_listener', {
                'nqn': nqn, 'listen_address': {
                    'trtype': 'TCP', 'adrfam': 'IPv4',
                    'traddr': '127.0.0.1', 'trsvcid': self.port}})
            self.rpc('nvmf_subsystem_add_host', {'nqn': nqn,
                                                 'host': HOST_NQN})
            self.save()
        return {'volume_id': volume_id, 'bdev': lvol, 'lvol_uuid': lvol,
                'transport': 'tcp', 'nqn': nqn, 'traddr': '127.0.0.1',
                'trsvcid': self.port, 'adrfam': 'ipv4', 'ns_id': 1,
                'host_nqn': HOST_NQN, 'target_id': self.name,
                'access_mode': 'rw', 'block_size': 512, 'numa_node': 0}

    def unexport(self, volume_id):
        """Delete the export now, or once the node is back."""
        with self.lock:
            self.owed.append(volume_id)
            if self.up:
                self.settle()

    def settle(self):
        """Delete the exports owed; the node is up, its lock held."""
        while self.owed:
            volume_id = self.owed[0]
            nqn = 'nqn.2016-06.io.spdk:%s' % volume_id
            if any(s['nqn'] == nqn for s in self.rpc('nvmf_get_subsystems')):
                self.rpc('nvmf_delete_subsystem', {'nqn': nqn})
            if any(lv['name'] == volume_id for lv in self.rpc(
                    'bdev_lvol_get_lvols', {'lvs_name': LVS})):
                self.rpc('bdev_lvol_delete', {'name': '%s/%s' % (
                    LVS, volume_id)})
            self.owed.pop(0)
        self.save()

    def bring_back(self):
        with self.lock:
            super().bring_back()
            self.settle()

    def left(self):
        """What is still here: lvols and subsystems."""
        return (['lvol %s' % lv['name'] for lv in self.rpc(
            'bdev_lvol_get_lvols', {'lvs_name': LVS})]
            + ['subsystem %s' % s['nqn'] for s in self.rpc(
                'nvmf_get_subsystems') if s.get('subtype') == 'NVMe'])


def replicated(volume_id, exports):
    """Cinder's connection_info data for copies on several nodes."""
    keys = ('transport', 'nqn', 'traddr', 'trsvcid', 'adrfam', 'ns_id',
            'host_nqn', 'target_id')
    return {'volume_id': volume_id, 'transport': wire.REPLICATED,
            'replicas': [{k: e[k] for k in keys} for e in exports],
            'access_mode': 'rw', 'block_size': 512, 'numa_node': 0}


class Compute(Node):
    """A compute host's ``vhost`` (polling: it attaches NVMe/TCP)."""

    def __init__(self, name, workdir, lock_dir):
        super().__init__(name, workdir, app='vhost')
        self.workdir = workdir
        # The connector's lock, which the watcher holds too. The run's
        # connectors are in one process, whose oslo.concurrency lock_path
        # is one directory: every host's watcher shares it.
        self.lock_dir = lock_dir
        self.conf_path = os.path.join(workdir, '%s-nova.conf' % name)
        self.watcher = None

    def prepare(self):
        super().prepare()
        with open(self.conf_path, 'w') as conf:
            conf.write('[oslo_concurrency]\nlock_path = %s\n\n'
                       '[spdk_vhost]\nspdk_rpc_socket = %s\n'
                       'spdk_saved_config = %s\nhost_nqn = %s\n'
                       'numa_policy = none\n'
                       % (self.lock_dir, self.target.socket_path,
                          self.saved, HOST_NQN))
        self.save()
        self.start_watcher()

    def start_watcher(self):
        """``spdk-vhost-replicas watch``, as the compute host runs it."""
        command = os.path.join(os.path.dirname(sys.executable),
                               'spdk-vhost-replicas')
        with open(os.path.join(self.workdir, '%s-watch.log' % self.name),
                  'ab') as log:
            self.watcher = subprocess.Popen(
                [command, '--config-file', self.conf_path, 'watch',
                 '--interval', str(WATCH_INTERVAL)],
                stdout=log, stderr=subprocess.STDOUT)

    def connector(self):
        """An os-brick connector as nova-compute has it, and its client."""
        conf = cfg.ConfigOpts()
        options.register_opts(conf)
        conf(['--config-file', self.conf_path], project='spdk-vhost-chaos')
        privileged.socket_access.set_client_mode(False)
        client = spdk_rpc.SpdkClient.from_conf(conf.spdk_vhost)
        return connector.SpdkVhostConnector(None, conf=conf.spdk_vhost,
                                            client=client), client

    def local_props(self, volume_id):
        """A volume on this host's own lvol store."""
        with self.lock:
            lvol = self.rpc('bdev_lvol_create', {
                'lvol_name': volume_id, 'size_in_mib': VOLUME_MIB,
                'lvs_name': LVS, 'thin_provision': True})
        return {'volume_id': volume_id, 'bdev': '%s/%s' % (LVS, volume_id),
                'lvol_uuid': lvol, 'transport': 'local',
                'access_mode': 'rw', 'block_size': 512, 'numa_node': 0}

    def delete_local(self, volume_id):
        with self.lock:
            self.rpc('bdev_lvol_delete', {'name': '%s/%s' % (LVS,
                                                             volume_id)})

    def left(self):
        """Controllers, mirrors, NVMe controllers and lvols still here.

        In the target and in its saved config, which could keep what a
        restart did not replay after its volume's detach.
        """
        found = ['vhost %s' % c['ctrlr'] for c in self.rpc(
            'vhost_get_controllers')]
        found += ['nvme %s' % c['name'] for c in self.rpc(
            'bdev_nvme_get_controllers')]
        found += ['raid %s' % r['name'] for r in self.rpc(
            'bdev_raid_get_bdevs', {'category': 'all'})]
        found += ['lvol %s' % lv['name'] for lv in self.rpc(
            'bdev_lvol_get_lvols', {'lvs_name': LVS})]
        with open(self.saved) as src:
            doc = json.load(src)
        for method, key in (('vhost_create_blk_controller', 'ctrlr'),
                            ('bdev_nvme_attach_controller', 'name')):
            found += ['saved %s %s' % (method, name)
                      for name in saved_config.names(doc, method, key)]
        return found

    def stop(self):
        if self.watcher is not None:
            self.watcher.terminate()
            self.watcher.wait(20)
        super().stop()
