"""SpdkVhostConnector against real SPDK targets.

Local volumes: an idle ``vhost`` target with four reactors placed on two
faked NUMA nodes. Remote volumes: an ``nvmf_tgt`` storage target exports
lvols over real NVMe/TCP on loopback and a polling compute target
attaches them. A connected guest is a real client on SPDK's vhost socket.
"""

import grp
import os
import socket
import stat
import threading

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture

from os_brick_connector import connector
from os_brick_connector import connector_errors as errors
from os_brick_connector import host_identity
from os_brick_connector import nvme_initiator
from os_brick_connector import options
from os_brick_connector import privileged
from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import reconnect
from testbed import net
from testbed import spdk_target
from tests import base
from tests.nova import fake_sysfs
from tests.nova.functional import targets

GROUP = 'spdk_vhost'
LVS = targets.LVS
HOST_NQN = ('nqn.2014-08.org.nvmexpress:uuid:'
            '1b4e28ba-2fa1-11d2-883f-b9a761bde3fb')
VOLUME_A = '6a1c7b8e-0d2f-4c3e-9a51-0a2b3c4d5e6f'
VOLUME_B = '7b2d8c9f-1e30-4d4f-8b62-1b3c4d5e6f70'
VOLUME_C = '8c3e9da0-2f41-4e50-9c73-2c4d5e6f7081'


def local_props(volume_id, client, **extra):
    """Cinder's connection_info['data'] for a volume on this target."""
    lvol = client.bdev_lvol_create(volume_id, 8, lvs_name=LVS,
                                   thin_provision=True)
    props = {'volume_id': volume_id, 'bdev': '%s/%s' % (LVS, volume_id),
             'lvol_uuid': lvol, 'transport': 'local',
             'access_mode': 'rw', 'block_size': 512}
    props.update(extra)
    return props


class ConnectorTestCase(base.TestCase):
    """One compute target with reactors 0,1 on node 0 and 2,3 on node 1."""

    host_nodes = {0: '0-1', 1: '2-3'}

    def start_compute(self):
        return targets.local_compute(self)

    def setUp(self):
        super().setUp()
        self.target = self.start_compute()
        self.client = targets.client_of(self, self.target)
        self.sysfs = self.useFixture(fake_sysfs.FakeSysfs(self.host_nodes))
        conf = cfg.ConfigOpts()
        options.register_opts(conf)
        self.cfg = self.useFixture(config_fixture.Config(conf))
        self.cfg.config(group=GROUP, spdk_rpc_socket=self.target.socket_path,
                        host_nqn=HOST_NQN,
                        disconnect_retry_interval=0.05)
        self.conf = conf[GROUP]
        # Run the privileged calls in this (root) process, for real.
        privileged.socket_access.set_client_mode(False)
        self.addCleanup(privileged.socket_access.set_client_mode, True)
        self.connector = connector.SpdkVhostConnector(
            None, conf=self.conf, client=self.client)

    def connect(self, props):
        info = self.connector.connect_volume(props)
        self.addCleanup(self._cleanup_controller, info['controller'])
        return info

    def _cleanup_controller(self, name):
        try:
            self.client.vhost_delete_controller(name)
        except spdk_exc.NotFound:
            pass  # the test disconnected it: the usual case

    def controller_names(self):
        return [c['ctrlr'] for c in self.client.vhost_get_controllers()]

    def controller(self, name):
        return self.client.vhost_get_controllers(name=name)[0]


class TestLocalConnect(ConnectorTestCase):

    def test_connect_then_disconnect(self):
        self.cfg.config(group=GROUP, vhost_socket_group='nogroup',
                        vhost_socket_mode='0640')
        props = local_props(VOLUME_A, self.client, numa_node=1)
        info = self.connect(props)

        name = 'vhost-' + VOLUME_A
        self.assertEqual({'type': 'vhost_user_blk',
                          'path': os.path.join(self.target.vhost_dir, name),
                          'controller': name, 'cpumask': '0x4',
                          'numa_node': 1}, info)
        mode = os.stat(info['path'])
        self.assertTrue(stat.S_ISSOCK(mode.st_mode))
        self.assertEqual(0o640, stat.S_IMODE(mode.st_mode))
        self.assertEqual('nogroup', grp.getgrgid(mode.st_gid).gr_name)
        ctrl = self.controller(name)
        # A layer named after the volume: its name is the disk serial.
        self.assertEqual(VOLUME_A, ctrl['backend_specific']['block']['bdev'])
        self.assertFalse(ctrl['backend_specific']['block']['readonly'])
        self.assertTrue(self.connector.check_valid_device(info['path']))
        self.assertEqual([info['path']],
                         self.connector.get_volume_paths(props))
        self.assertEqual(self.target.vhost_dir,
                         self.connector.get_search_path())

        self.connector.disconnect_volume(props, info)
        self.assertNotIn(name, self.controller_names())
        self.assertFalse(os.path.exists(info['path']))
        self.assertEqual([], self.connector.get_volume_paths(props))
        self.assertFalse(self.connector.check_valid_device(info['path']))
        # The volume itself is untouched.
        self.client.bdev_get_bdevs(name=props['bdev'])

    def test_connect_twice_gives_the_same_controller(self):
        props = local_props(VOLUME_A, self.client, numa_node=0)
        first = self.connect(props)
        second = self.connector.connect_volume(props)
        self.assertEqual(first, second)
        self.assertEqual([first['controller']], self.controller_names())

    def test_disconnect_twice_is_harmless(self):
        props = local_props(VOLUME_A, self.client)
        info = self.connect(props)
        self.connector.disconnect_volume(props, info)
        self.connector.disconnect_volume(props, info)
        self.assertEqual([], self.controller_names())

    def test_readonly_packed_ring_and_coalescing(self):
        self.cfg.config(group=GROUP, vhost_packed_ring=True,
                        vhost_coalescing_delay_base_us=50,
                        vhost_coalescing_iops_threshold=20000)
        props = local_props(VOLUME_A, self.client, access_mode='ro')
        info = self.connect(props)
        ctrl = self.controller(info['controller'])
        self.assertTrue(ctrl['backend_specific']['block']['readonly'])
        self.assertEqual(50, ctrl['delay_base_us'])
        self.assertEqual(20000, ctrl['iops_threshold'])

    def test_frontend_qos_is_in_force(self):
        props = local_props(VOLUME_A, self.client, qos_specs={
            'total_iops_sec': '3000', 'read_bytes_sec': 10 * 1024 * 1024})
        info = self.connect(props)
        exposed = self.controller(info['controller'])[
            'backend_specific']['block']['bdev']
        limits = self.client.bdev_get_bdevs(
            name=exposed)[0]['assigned_rate_limits']
        self.assertEqual({'rw_ios_per_sec': 3000, 'rw_mbytes_per_sec': 0,
                          'r_mbytes_per_sec': 10, 'w_mbytes_per_sec': 0},
                         limits)
        # Same limits again: nothing to change, no EAGAIN from SPDK.
        self.connector.connect_volume(props)

    def test_unsupported_qos_creates_nothing(self):
        props = local_props(VOLUME_A, self.client,
                            qos_specs={'read_iops_sec': 1000})
        self.assertRaises(errors.InvalidQoSSpec,
                          self.connector.connect_volume, props)
        self.assertEqual([], self.controller_names())

    def test_existing_controller_of_another_bdev_is_not_reused(self):
        props = local_props(VOLUME_A, self.client)
        other = local_props(VOLUME_B, self.client)
        self.client.vhost_create_blk_controller('vhost-' + VOLUME_A,
                                                other['bdev'])
        self.addCleanup(self.client.vhost_delete_controller,
                        'vhost-' + VOLUME_A)
        self.assertRaises(errors.ControllerConflict,
                          self.connector.connect_volume, props)
        ctrl = self.controller('vhost-' + VOLUME_A)
        self.assertEqual(other['lvol_uuid'],
                         ctrl['backend_specific']['block']['bdev'])

    def test_extend_reports_the_new_size(self):
        props = local_props(VOLUME_A, self.client)
        self.connect(props)
        self.client.bdev_lvol_resize(props['bdev'], 16)
        self.assertEqual(16 * 1024 * 1024,
                         self.connector.extend_volume(props))

    def test_disconnect_leaves_other_volumes_alone(self):
        props_a = local_props(VOLUME_A, self.client)
        props_b = local_props(VOLUME_B, self.client)
        info_a = self.connect(props_a)
        info_b = self.connect(props_b)
        self.connector.disconnect_volume(props_a, info_a)
        self.assertEqual([info_b['controller']], self.controller_names())
        self.assertTrue(os.path.exists(info_b['path']))


class TestDisconnectWithGuest(ConnectorTestCase):
    """A vhost-user client holds the socket, as QEMU would."""

    def wait_sessions(self, name, connected):
        for _attempt in range(100):
            ctrls = self.client.vhost_get_controllers()
            sessions = [c['sessions'] for c in ctrls if c['ctrlr'] == name]
            if bool(sessions and sessions[0]) == connected:
                return
            threading.Event().wait(0.05)
        self.fail('sessions of %s never became %s' % (name, connected))

    def guest_connects(self, path):
        name = os.path.basename(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        self.addCleanup(self.wait_sessions, name, False)
        self.addCleanup(sock.close)
        self.wait_sessions(name, True)
        return sock

    def test_refuses_while_guest_connected(self):
        self.cfg.config(group=GROUP, disconnect_retries=2)
        props = local_props(VOLUME_A, self.client)
        info = self.connect(props)
        self.guest_connects(info['path'])
        err = self.assertRaises(errors.VolumeStillInUse,
                                self.connector.disconnect_volume,
                                props, info)
        self.assertIn('3 attempt(s)', str(err))
        self.assertIn(info['controller'], self.controller_names())

    def test_force_leaves_the_controller_without_error(self):
        self.cfg.config(group=GROUP, disconnect_retries=0)
        props = local_props(VOLUME_A, self.client)
        info = self.connect(props)
        self.guest_connects(info['path'])
        self.connector.disconnect_volume(props, info, force=True)
        self.assertIn(info['controller'], self.controller_names())

    def test_retries_until_guest_goes(self):
        self.cfg.config(group=GROUP, disconnect_retries=100)
        props = local_props(VOLUME_A, self.client)
        info = self.connect(props)
        sock = self.guest_connects(info['path'])
        timer = threading.Timer(0.5, sock.close)
        timer.start()
        self.addCleanup(timer.cancel)
        self.connector.disconnect_volume(props, info)
        self.assertNotIn(info['controller'], self.controller_names())


class TestNumaPlacement(ConnectorTestCase):
    """A faked three-node host: node 2 has CPUs but no SPDK reactor."""

    host_nodes = {0: '0-1', 1: '2-3', 2: '4-5'}

    def test_controllers_spread_over_the_node_reactors(self):
        masks = [self.connect(local_props(vol, self.client,
                                          numa_node=1))['cpumask']
                 for vol in (VOLUME_A, VOLUME_B, VOLUME_C)]
        self.assertEqual(['0x4', '0x8', '0x4'], masks)

    def test_no_preference_uses_least_loaded_reactor(self):
        first = self.connect(local_props(VOLUME_A, self.client))
        second = self.connect(local_props(VOLUME_B, self.client))
        self.assertEqual(('0x1', 0), (first['cpumask'], first['numa_node']))
        self.assertEqual(('0x2', 0),
                         (second['cpumask'], second['numa_node']))

    def test_required_refuses_a_node_without_reactor(self):
        self.cfg.config(group=GROUP, numa_policy='required')
        props = local_props(VOLUME_A, self.client, numa_node=2)
        err = self.assertRaises(errors.NumaPlacementError,
                                self.connector.connect_volume, props)
        self.assertIn('no SPDK reactor runs on node 2', str(err))
        self.assertEqual([], self.controller_names())

    def test_preferred_falls_back_and_warns(self):
        logger = self.useFixture(fixtures.FakeLogger(
            name='os_brick_connector.numa'))
        self.connect(local_props(VOLUME_A, self.client, numa_node=0))
        info = self.connect(local_props(VOLUME_B, self.client, numa_node=2))
        # Core 0 already polls one controller; 1 is the least loaded.
        self.assertEqual(('0x2', 0), (info['cpumask'], info['numa_node']))
        self.assertIn('no SPDK reactor runs on node 2', logger.output)

    def test_none_ignores_the_guest_node(self):
        self.cfg.config(group=GROUP, numa_policy='none')
        info = self.connect(local_props(VOLUME_A, self.client, numa_node=1))
        self.assertEqual(('0x1', 0), (info['cpumask'], info['numa_node']))

    def test_connector_properties(self):
        props = connector.SpdkVhostConnector.get_connector_properties(
            None, conf=self.conf)
        # What Cinder reads, and nothing else.
        self.assertEqual({host_identity.HOST_NQN: HOST_NQN,
                          host_identity.TARGET_ID: socket.gethostname(),
                          reconnect.KEY: reconnect.from_conf(self.conf)},
                         props)


class RemoteTestCase(ConnectorTestCase):
    """Storage on an nvmf_tgt, reached over real NVMe/TCP on loopback.

    The compute target polls one reactor, on node 0.
    """

    host_nodes = {0: '0-1'}

    def start_compute(self):
        return targets.remote_compute(self)

    def setUp(self):
        super().setUp()
        self.storage_target = targets.storage(self)
        self.storage = targets.client_of(self, self.storage_target)

    def export(self, volume_id, storage=None):
        """What the Cinder driver does: one subsystem per volume.

        ``storage``: the client of another storage target than the first.
        """
        storage = storage or self.storage
        lvol = storage.bdev_lvol_create(volume_id, 8, lvs_name=LVS,
                                        thin_provision=True)
        nqn = 'nqn.2016-06.io.spdk:%s' % volume_id
        port = str(net.free_port())
        storage.nvmf_create_subsystem(nqn, allow_any_host=False)
        storage.nvmf_subsystem_add_ns(nqn, lvol)
        storage.nvmf_subsystem_add_listener(nqn, 'TCP', '127.0.0.1', port,
                                            adrfam='IPv4')
        storage.nvmf_subsystem_add_host(nqn, HOST_NQN)
        return {'volume_id': volume_id, 'bdev': lvol, 'lvol_uuid': lvol,
                'transport': 'tcp', 'nqn': nqn, 'traddr': '127.0.0.1',
                'trsvcid': port, 'adrfam': 'ipv4', 'ns_id': 1,
                'host_nqn': HOST_NQN, 'access_mode': 'rw',
                'block_size': 512, 'numa_node': 0}

    def nvme_names(self):
        return [c['name'] for c in self.client.bdev_nvme_get_controllers()]


class TestTcpConnect(RemoteTestCase):

    def test_connect_then_disconnect(self):
        self.cfg.config(group=GROUP, nvme_ctrlr_loss_timeout_sec=30,
                        nvme_fast_io_fail_timeout_sec=10)
        props = self.export(VOLUME_A)
        info = self.connect(props)
        nvme = nvme_initiator.controller_name(props)
        self.assertEqual([nvme], self.nvme_names())
        ctrl = self.controller(info['controller'])
        self.assertEqual(nvme + 'n1',
                         ctrl['backend_specific']['block']['bdev'])
        self.assertEqual(('0x1', 0), (info['cpumask'], info['numa_node']))
        config = self.client.framework_get_config('bdev')
        attach = [c['params'] for c in config
                  if c['method'] == 'bdev_nvme_attach_controller']
        self.assertEqual(HOST_NQN, attach[0]['hostnqn'])
        # The reconnect policy is in force on the target (and saved).
        self.assertEqual((30, 2, 10), (attach[0]['ctrlr_loss_timeout_sec'],
                                       attach[0]['reconnect_delay_sec'],
                                       attach[0]['fast_io_fail_timeout_sec']))
        self.assertEqual(info, self.connector.connect_volume(props))
        self.assertEqual([nvme], self.nvme_names())

        self.connector.disconnect_volume(props, info)
        self.assertEqual([], self.controller_names())
        self.assertEqual([], self.nvme_names())

    def test_extend_reports_the_size(self):
        props = self.export(VOLUME_A)
        self.connect(props)
        self.assertEqual(8 * 1024 * 1024,
                         self.connector.extend_volume(props))

    def test_detach_only_when_last_user_gone(self):
        props_a = self.export(VOLUME_A)
        props_b = self.export(VOLUME_B)
        info_a = self.connect(props_a)
        info_b = self.connect(props_b)
        self.assertEqual(2, len(self.nvme_names()))
        self.connector.disconnect_volume(props_a, info_a)
        self.assertEqual([nvme_initiator.controller_name(props_b)],
                         self.nvme_names())
        self.assertEqual([info_b['controller']], self.controller_names())

    def test_failed_connect_detaches_what_it_attached(self):
        self.cfg.config(group=GROUP, numa_policy='required')
        props = self.export(VOLUME_A)
        props['numa_node'] = 5
        self.assertRaises(errors.NumaPlacementError,
                          self.connector.connect_volume, props)
        self.assertEqual([], self.nvme_names())
        self.assertEqual([], self.controller_names())

    def test_refused_host_fails_clearly(self):
        props = self.export(VOLUME_A)
        props['host_nqn'] = HOST_NQN[:-1] + '0'
        self.assertRaises(errors.TargetError,
                          self.connector.connect_volume, props)
        self.assertEqual([], self.nvme_names())


class TestInterruptModeCompute(RemoteTestCase):
    """A compute target in interrupt mode: local volumes only, said early."""

    def start_compute(self):
        return targets.local_compute(self, lcores=None)

    def test_remote_attach_refused_at_once_leaving_nothing(self):
        props = self.export(VOLUME_A)
        err = self.assertRaises(errors.RemoteAttachUnsupported,
                                self.connector.connect_volume, props)
        self.assertIn('interrupt mode', str(err))
        self.assertEqual([], self.nvme_names())
        self.assertEqual([], self.controller_names())


class TestMultiattach(ConnectorTestCase):
    """One volume, two guests of this host: a controller each, one bdev."""

    wait_sessions = TestDisconnectWithGuest.wait_sessions
    guest_connects = TestDisconnectWithGuest.guest_connects

    def two_guests(self, props):
        infos = [self.connect(dict(props, attached_to=guest))
                 for guest in ('guest-1', 'guest-2')]
        self.assertEqual(2, len({info['controller'] for info in infos}))
        self.assertEqual(2, len({info['path'] for info in infos}))
        return infos

    def bdev_of(self, info):
        return self.controller(
            info['controller'])['backend_specific']['block']['bdev']

    def check_detach_order(self, props, shared, order):
        infos = self.two_guests(props)
        self.assertEqual([shared, shared], [self.bdev_of(i) for i in infos])
        socks = [self.guest_connects(info['path']) for info in infos]
        first, last = order
        socks[first].close()
        self.wait_sessions(infos[first]['controller'], False)
        self.connector.disconnect_volume(
            dict(props, attached_to='guest-%d' % (first + 1)), infos[first])
        # The other guest keeps its controller, session and bdev.
        self.assertEqual([infos[last]['controller']],
                         self.controller_names())
        self.assertTrue(self.controller(infos[last]['controller'])[
            'sessions'])
        self.assertEqual(shared, self.bdev_of(infos[last]))
        socks[last].close()
        self.wait_sessions(infos[last]['controller'], False)
        self.connector.disconnect_volume(
            dict(props, attached_to='guest-%d' % (last + 1)), infos[last])
        self.assertEqual([], self.controller_names())
        self.assertNotIn(shared, spdk_target.bdev_names(self.client))

    def test_local_detach_in_either_order(self):
        for order in ((0, 1), (1, 0)):
            volume_id = (VOLUME_A, VOLUME_B)[order[0]]
            self.check_detach_order(local_props(volume_id, self.client),
                                    volume_id, order)

    def test_retry_finds_the_guests_own_controller(self):
        props = dict(local_props(VOLUME_A, self.client), attached_to='g')
        info = self.connect(props)
        self.assertEqual(info, self.connector.connect_volume(props))
        self.assertEqual([info['controller']], self.controller_names())
        self.assertTrue(info['controller'].startswith(
            'vhost-' + VOLUME_A + '.'))

    def test_failed_second_attach_leaves_the_first_alone(self):
        props = local_props(VOLUME_A, self.client)
        first = self.connect(dict(props, attached_to='guest-1'))
        self.cfg.config(group=GROUP, numa_policy='required')
        self.assertRaises(errors.NumaPlacementError,
                          self.connector.connect_volume,
                          dict(props, attached_to='guest-2', numa_node=5))
        self.assertEqual([first['controller']], self.controller_names())
        self.assertEqual(VOLUME_A, self.bdev_of(first))
        self.assertTrue(self.client.bdev_get_bdevs(name=VOLUME_A))

    def test_read_only_guest_beside_a_writer(self):
        props = local_props(VOLUME_A, self.client)
        writer = self.connect(dict(props, attached_to='guest-1'))
        reader = self.connect(dict(props, attached_to='guest-2',
                                   access_mode='ro'))
        self.assertEqual((False, True), tuple(
            self.controller(info['controller'])['backend_specific'][
                'block']['readonly'] for info in (writer, reader)))


class TestRemoteMultiattach(RemoteTestCase):

    def test_one_nvme_link_for_both_guests(self):
        props = self.export(VOLUME_A)
        nvme = nvme_initiator.controller_name(props)
        infos = [self.connect(dict(props, attached_to=guest))
                 for guest in ('guest-1', 'guest-2')]
        self.assertEqual([nvme], self.nvme_names())
        self.connector.disconnect_volume(dict(props, attached_to='guest-2'),
                                         infos[1])
        self.assertEqual([nvme], self.nvme_names())
        self.assertEqual([infos[0]['controller']], self.controller_names())
        self.assertEqual(nvme + 'n1', self.controller(infos[0]['controller'])[
            'backend_specific']['block']['bdev'])
        self.connector.disconnect_volume(dict(props, attached_to='guest-1'),
                                         infos[0])
        self.assertEqual([], self.nvme_names())
        self.assertEqual([], self.controller_names())
