"""Everything the experiments share: the SPDK target and how we reach it.

A real SPDK target: the one at ``$SPDK_RPC_SOCKET`` when set (give
``--target-pid`` for its CPU time), else a fresh ``spdk_tgt`` of the
bench's own on core 0 (``spdk_tgt`` because the control-plane experiment
runs the Cinder driver, which wants the vhost and NVMe-oF RPCs). Our code
talks to it through an :class:`RpcCounter` relay, so the RPCs of every
operation are counted; set-up calls go direct and are not counted.
"""

import collections
import contextlib
import os
import signal

import fixtures
from oslo_concurrency import lockutils
from oslo_config import cfg

from os_brick_connector import connector as brick_connector
from os_brick_connector import options
from os_brick_connector import privileged
from spdk_vhost_core import saved_config
from spdk_vhost_core import spdk_rpc
from testbed import cpu
from testbed import spdk_target
from tools.bench import rpc_counter

MiB = 1024 * 1024
LVS = 'bench_lvs'
BASE_BDEV = 'bench_base'
#: A target this process did not start: where it is, and what to call it.
ExternalTarget = collections.namedtuple('ExternalTarget',
                                        'socket_path vhost_dir app pid')


class BenchTarget(fixtures.Fixture):
    """SPDK target, counting relay, backing file and a connector."""

    def __init__(self, workdir, backing_gib, backing=None, target_pid=None,
                 accel='tcg'):
        super().__init__()
        self.accel = accel
        self.workdir = workdir
        self.backing_gib = backing_gib
        self.backing = backing or os.path.join(workdir, 'backing.raw')
        self._own_backing = backing is None
        self.target_pid = target_pid
        self.lvstore = None

    def _setUp(self):
        lockutils.set_defaults(self._dir('locks'))
        self.target = self._target()
        self.admin = spdk_rpc.SpdkClient(self.target.socket_path, timeout=60)
        self.addCleanup(self.admin.close)
        self.counter = rpc_counter.RpcCounter(
            self.target.socket_path, os.path.join(self.workdir, 'rpc.sock'))
        self.addCleanup(self.counter.close)
        self.client = spdk_rpc.SpdkClient(self.counter.path, timeout=60)
        self.addCleanup(self.client.close)
        if self._own_backing:
            with open(self.backing, 'wb') as f:
                f.truncate(self.backing_gib * 1024 * MiB)
        self.connector = self._connector()

    def _target(self):
        socket = os.environ.get('SPDK_RPC_SOCKET')
        if socket:
            return ExternalTarget(
                socket, os.environ.get('SPDK_VHOST_DIR', '/var/tmp'),
                'external', self.target_pid)
        return self.useFixture(spdk_target.SpdkTarget(
            app='spdk_tgt', name='bench'))

    def workdir_for(self, name):
        """A fresh-or-existing directory under the bench's work dir."""
        return self._dir(name)

    def _dir(self, name):
        path = os.path.join(self.workdir, name)
        os.makedirs(path, exist_ok=True)
        return path

    def _connector(self):
        # Saved once, as on a deployed host: each attach and detach then
        # saves only what it changed, and that is what is counted.
        saved = os.path.join(self.workdir, 'spdk-config.json')
        saved_config.ConfigSaver(self.admin, saved).save()
        conf = cfg.ConfigOpts()
        options.register_opts(conf)
        conf([], project='spdk-vhost-bench')
        for name, value in (('spdk_rpc_socket', self.counter.path),
                            ('numa_policy', 'none'),
                            ('disconnect_retry_interval', 0.2),
                            ('spdk_saved_config', saved)):
            conf.set_override(name, value, group='spdk_vhost')
        # The bench runs as root: the socket chmod runs in this process
        # rather than through a privsep daemon.
        privileged.socket_access.set_client_mode(False)
        return brick_connector.SpdkVhostConnector(
            None, conf=conf.spdk_vhost, client=self.client)

    def ensure_lvstore(self):
        """The lvol store on the backing file (made on first use).

        Made only after the baseline has used the raw file, since the
        baseline overwrites it.
        """
        if self.lvstore is None:
            self.admin.bdev_aio_create(self.backing, BASE_BDEV,
                                       block_size=512)
            self.addCleanup(self.admin.bdev_aio_delete, BASE_BDEV)
            self.admin.call('bdev_lvol_create_lvstore', {
                'bdev_name': BASE_BDEV, 'lvs_name': LVS,
                'cluster_sz': MiB, 'clear_method': 'none'})
            self.addCleanup(self.admin.call, 'bdev_lvol_delete_lvstore',
                            {'lvs_name': LVS})
            self.lvstore = LVS
        return self.lvstore

    def make_lvol(self, name, size_mib):
        """A thin lvol (set-up, not measured); returns its alias."""
        self.admin.bdev_lvol_create(name, size_mib,
                                    lvs_name=self.ensure_lvstore(),
                                    thin_provision=True)
        alias = '%s/%s' % (self.lvstore, name)
        self.addCleanup(self.admin.bdev_lvol_delete, alias)
        return alias

    @staticmethod
    def props(volume_id, bdev, qos_specs=None):
        """connection_info['data'] as Cinder gives it for a local volume."""
        props = {'volume_id': volume_id, 'bdev': bdev, 'transport': 'local',
                 'access_mode': 'rw', 'block_size': 512}
        if qos_specs:
            props['qos_specs'] = qos_specs
        return props

    def attach(self, volume_id, bdev, qos_specs=None):
        """connect_volume through our connector; detached at cleanup."""
        props = self.props(volume_id, bdev, qos_specs)
        info = self.connector.connect_volume(props)
        self.addCleanup(self.connector.disconnect_volume, props, info,
                        force=True)
        return info

    @contextlib.contextmanager
    def paused(self):
        """SIGSTOP the bench's own target meanwhile (an external one runs).

        For experiments that start targets of their own on core 0, where
        the bench's polling ``spdk_tgt`` would take half the core.
        """
        own = isinstance(self.target, spdk_target.SpdkTarget)
        pid = self.target.pid if own else None
        if pid:
            os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            if pid:
                os.kill(pid, signal.SIGCONT)

    def backend_seconds(self):
        """CPU seconds the target has used so far (0 if its PID is unknown).

        A polling reactor burns its core whether or not there is I/O, so
        this is charged to the I/O done meanwhile.
        """
        pid = self.target_pid or self.target.pid
        return cpu.process_seconds(pid) if pid else 0.0
