"""A writing guest rides out a crash of the SPDK target under it.

The connector saves the target's config after each change
(``[spdk_vhost] spdk_saved_config``); the real SPDK target is SIGKILLed
and restarted with ``--json`` of that file, as the service unit does.
The compute target polls (it attaches remote volumes); the storage
target is an idle ``nvmf_tgt``. The guest's vhost-user disk reconnects
(QEMU ``reconnect``) and its verified-pattern writer goes on with no I/O
error, and a write acknowledged before the crash is still there after.
Base bdevs are aio files: malloc data would not survive.

QEMU runs as libvirt runs it, as ``libvirt-qemu`` with that user's
groups, not as root; and the compute target as the service unit starts
it: ``UMask=0007`` and a setgid socket directory of QEMU's group. The
restarted target makes every vhost socket again, and nobody calls the
connector to hand it to QEMU: the guest reconnects only if the socket is
born connectable by QEMU.
"""

import grp
import hashlib
import io
import os
import pwd
import stat
import threading

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture

from nova_vhost_user import replicas_cmd
from os_brick_connector import connector
from os_brick_connector import options
from os_brick_connector import privileged
from spdk_vhost_core import save_cmd
from spdk_vhost_core import saved_config
from spdk_vhost_core import unreplayed
from testbed.guest import qemu
from testbed.guest import writer
from testbed import net
from testbed import spdk_target
from tests import base
from tests.nova import compute
from tests.nova import fake_sysfs
from tests.nova.functional import targets
from tests.nova import libvirt_guest

GROUP = 'spdk_vhost'
LVS = targets.LVS
MIB = 1024 * 1024
HOST_NQN = ('nqn.2014-08.org.nvmexpress:uuid:'
            '1b4e28ba-2fa1-11d2-883f-b9a761bde3fb')
VOLUME = '6a1c7b8e-0d2f-4c3e-9a51-0a2b3c4d5e6f'
QOS = {'total_iops_sec': '50000'}
WRITER = (MIB, 65536)
KEPT = (4 * MIB, 65536)
# Who libvirt runs QEMU as (Debian's qemu.conf defaults), and the group
# that the vhost socket directory, the connector and QEMU share.
QEMU_USER = 'libvirt-qemu'
QEMU_PRIMARY_GROUP = 'libvirt-qemu'
SOCKET_GROUP = compute.QEMU_GROUP


class QemuUserGuest(qemu.Guest):
    """The test guest under QEMU run as libvirt runs it: not root.

    Its user, group and supplementary groups are libvirt's (``initgroups``
    of the user, as libvirt's DAC driver does before starting QEMU).
    """

    def __init__(self, disks, workdir, **kwargs):
        os.chown(workdir, pwd.getpwnam(QEMU_USER).pw_uid, -1)
        libvirt_guest.open_to_qemu(workdir)
        super().__init__(disks, workdir=workdir, **kwargs)

    def command_line(self, initrd, hugetlbfs=None):
        os.chmod(initrd, 0o644)
        return (['setpriv', '--reuid=' + QEMU_USER,
                 '--regid=' + QEMU_PRIMARY_GROUP, '--init-groups', '--'] +
                super().command_line(initrd, hugetlbfs))


class QemuUserGuestFixture(fixtures.Fixture):
    """A running :class:`QemuUserGuest` for the length of a test."""

    def __init__(self, disks):
        super().__init__()
        self._disks = disks

    def _setUp(self):
        workdir = self.useFixture(fixtures.TempDir()).path
        self.guest = QemuUserGuest(self._disks, workdir)
        self.addCleanup(self.guest.stop)
        self.guest.start()
        # QEMU made its QMP socket: as libvirt's user, or the test is moot.
        owner = os.stat(self.guest.qmp_socket).st_uid
        if owner != pwd.getpwnam(QEMU_USER).pw_uid:
            raise AssertionError('QEMU runs as uid %d, not %s'
                                 % (owner, QEMU_USER))


def socket_access(path):
    """A socket's owner, group and mode, to tell why QEMU is locked out."""
    info = os.stat(path)
    return '%s: mode %04o, group %s' % (
        path, stat.S_IMODE(info.st_mode), grp.getgrgid(info.st_gid).gr_name)


class Host(object):
    """One SPDK target with an aio lvstore and a saved config.

    The compute target is started as its service unit starts it (umask,
    setgid socket directory of QEMU's group), and QEMU may reach that
    directory.
    """

    def __init__(self, test, name, storage=False):
        tmp = test.useFixture(fixtures.TempDir()).path
        self.saved = os.path.join(tmp, name + '.json')
        if storage:
            self.target = targets.storage(test, name, transport=False,
                                          json_config=self.saved)
        else:
            self.target = targets.remote_compute(
                test, name, json_config=self.saved,
                socket_group=SOCKET_GROUP, umask=spdk_target.SERVICE_UMASK)
            libvirt_guest.open_to_qemu(self.target.vhost_dir)
        # Retries ride out the moment a restart takes.
        self.client = targets.client_of(test, self.target,
                                        connect_retries=100,
                                        retry_interval=0.1)
        self.saver = saved_config.ConfigSaver(self.client, self.saved)

    def crash_and_restart(self):
        self.client.close()
        self.target.restart(crash=True)


class RestartTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(600, gentle=True))
        self.compute = Host(self, 'compute')
        self.sysfs = self.useFixture(fake_sysfs.FakeSysfs({0: '0-1'}))
        conf = cfg.ConfigOpts()
        options.register_opts(conf)
        self.cfg = self.useFixture(config_fixture.Config(conf))
        self.cfg.config(group=GROUP,
                        spdk_rpc_socket=self.compute.target.socket_path,
                        spdk_saved_config=self.compute.saved,
                        vhost_socket_group=SOCKET_GROUP,
                        vhost_socket_mode='0660',
                        host_nqn=HOST_NQN,
                        disconnect_retry_interval=0.05,
                        nvme_reconnect_delay_sec=1)
        privileged.socket_access.set_client_mode(False)
        self.addCleanup(privileged.socket_access.set_client_mode, True)
        self.connector = connector.SpdkVhostConnector(
            None, conf=conf[GROUP], client=self.compute.client)

    def local_props(self):
        lvol = self.compute.client.bdev_lvol_create(
            VOLUME, 16, lvs_name=LVS, thin_provision=True)
        return {'volume_id': VOLUME, 'bdev': '%s/%s' % (LVS, VOLUME),
                'lvol_uuid': lvol, 'transport': 'local',
                'access_mode': 'rw', 'block_size': 512, 'qos_specs': QOS}

    def tcp_props(self, storage):
        """What the Cinder driver does at attach, then saves."""
        client = storage.client
        lvol = client.bdev_lvol_create(VOLUME, 16, lvs_name=LVS,
                                       thin_provision=True)
        nqn = 'nqn.2016-06.io.spdk:cinder:' + VOLUME
        port = str(net.free_port())
        client.nvmf_create_transport('TCP')
        client.nvmf_create_subsystem(nqn, allow_any_host=False)
        client.nvmf_subsystem_add_ns(nqn, lvol)
        client.nvmf_subsystem_add_listener(nqn, 'TCP', '127.0.0.1', port,
                                           adrfam='IPv4')
        client.nvmf_subsystem_add_host(nqn, HOST_NQN)
        client.bdev_set_qos_limit(lvol, rw_ios_per_sec=40000)
        storage.saver.save()
        return {'volume_id': VOLUME, 'bdev': lvol, 'lvol_uuid': lvol,
                'transport': 'tcp', 'nqn': nqn, 'traddr': '127.0.0.1',
                'trsvcid': port, 'adrfam': 'ipv4', 'ns_id': 1,
                'host_nqn': HOST_NQN, 'access_mode': 'rw',
                'block_size': 512, 'qos_specs': QOS}

    def attach(self, props):
        info = self.connector.connect_volume(props)
        self.addCleanup(self._detach, props, info)
        return info

    def _detach(self, props, info):
        # The guest is gone by now (its fixture was set up later).
        self.connector.disconnect_volume(props, info, force=True)

    def boot(self, info):
        self.disk = info['path']
        return self.useFixture(QemuUserGuestFixture(
            [qemu.VhostUserDisk(info['path'], 1, reconnect=1)])).guest

    def wait_writes(self, guest, count):
        """The writer's count once past ``count``; who QEMU is if not."""
        return writer.writes(writer.writes_after(
            guest, count, on_timeout=lambda: 'QEMU runs as %s, vhost socket '
            '%s' % (QEMU_USER, socket_access(self.disk))))

    def assert_pattern(self, guest, where, token):
        offset, length = where
        got = guest.execute(qemu.read_back('vda', offset, length))
        self.assertEqual(
            hashlib.sha256(qemu.pattern_bytes(token, length)).hexdigest(),
            got['vda.read@%d' % offset])

    def controller_state(self, client, name):
        ctrl = client.vhost_get_controllers(name=name)[0]
        bdev = ctrl['backend_specific']['block']['bdev']
        limits = client.bdev_get_bdevs(name=bdev)[0]['assigned_rate_limits']
        return ctrl['socket'], ctrl['cpumask'], limits

    def ride_out(self, guest, restart):
        """Write, restart, write on: no failure, nothing lost."""
        guest.execute(qemu.write_pattern('vda', KEPT[0], KEPT[1], 'kept'))
        guest.execute(qemu.writer_start('vda', WRITER[0], WRITER[1],
                                        'restart'))
        before = self.wait_writes(guest, 2)
        restart()
        self.wait_writes(guest, before + 3)
        stopped = guest.execute(qemu.writer_stop())
        self.assertEqual('0', stopped['writer.failures'])
        self.assert_pattern(guest, WRITER, 'restart')
        self.assert_pattern(guest, KEPT, 'kept')


class TestComputeTargetCrash(RestartTestCase):

    def check_restart(self, props):
        info = self.attach(props)
        client = self.compute.client
        state = self.controller_state(client, info['controller'])
        guest = self.boot(info)
        self.ride_out(guest, self.compute.crash_and_restart)
        self.assertEqual(state,
                         self.controller_state(client, info['controller']))
        self.assertEqual(50000,
                         state[2]['rw_ios_per_sec'])

    def test_local_volume(self):
        self.check_restart(self.local_props())

    def test_tcp_volume(self):
        storage = Host(self, 'storage', storage=True)
        self.check_restart(self.tcp_props(storage))


class TestStorageTargetCrash(RestartTestCase):

    def test_tcp_volume(self):
        storage = Host(self, 'storage', storage=True)
        props = self.tcp_props(storage)
        info = self.attach(props)
        guest = self.boot(info)
        exported = storage.client.call('nvmf_get_subsystems')
        self.ride_out(guest, storage.crash_and_restart)
        self.assertEqual(exported,
                         storage.client.call('nvmf_get_subsystems'))
        self.assertEqual(40000, storage.client.bdev_get_bdevs(
            name=props['bdev'])[0]['assigned_rate_limits']['rw_ios_per_sec'])


class TestComputeRestartWithStorageDown(RestartTestCase):
    """A storage node is down when the compute target comes back.

    Its remote attachment cannot be replayed from the saved config; the
    target must start all the same (as the service unit starts it), so
    the guest on a local volume rides the crash out, and the remote one
    comes back when the node does (``spdk-vhost-replicas watch``).
    """

    def test_local_guest_survives(self):
        storage = Host(self, 'storage', storage=True)
        remote = self.tcp_props(storage)
        self.attach(dict(remote, volume_id=VOLUME[:-1] + '1'))
        info = self.attach(self.local_props())
        client = self.compute.client
        state = self.controller_state(client, info['controller'])
        guest = self.boot(info)

        def storage_down_then_crash():
            storage.target.stop()
            self.compute.crash_and_restart()

        self.ride_out(guest, storage_down_then_crash)
        self.assertEqual(state,
                         self.controller_state(client, info['controller']))

    def restorer(self):
        """One round of the watcher's restore, and what it printed."""
        locks = self.useFixture(fixtures.TempDir()).path
        out, waits = io.StringIO(), {}

        def restore():
            replicas_cmd.restore_once(self.compute.client, out, waits,
                                      self.compute.saved, locks)
            return out.getvalue()
        return restore

    def saved_controllers(self):
        return [chain.controller for chain in
                unreplayed.chains(self.compute.saver.read())]

    def test_remote_guest_stalls_then_resumes(self):
        """Its volume waits in the saved config for the node, then returns.

        Saves of every kind meanwhile (an attach, the units' ExecStop)
        keep it; the watcher brings it back once the node answers, with
        its QoS limit, and the guest writes on: a stall, no I/O error.
        """
        storage = Host(self, 'storage', storage=True)
        info = self.attach(self.tcp_props(storage))
        name = info['controller']
        client = self.compute.client
        state = self.controller_state(client, name)
        guest = self.boot(info)
        restore = self.restorer()
        local = dict(self.local_props(), volume_id=VOLUME[:-1] + '2')

        def node_down_restart_node_back():
            storage.target.stop()
            self.compute.crash_and_restart()
            self.assertIsNone(client.vhost_controller(name))
            self.attach(local)
            self.assertEqual(0, save_cmd.main([
                '--rpc-socket', self.compute.target.socket_path,
                self.compute.saved]))
            self.assertIn(name, self.saved_controllers())
            self.assertIn('%s waits: its NVMe-oF subsystem' % name,
                          restore())
            self.assertIsNone(client.vhost_controller(name))
            listed = io.StringIO()
            self.assertEqual(2, replicas_cmd.main(
                ['list'], client=client, conf=self.connector.conf,
                out=listed))
            self.assertIn('%s offline; not replayed' % name,
                          listed.getvalue())
            storage.target.start()
            self.assertIn('%s restored from the saved config' % name,
                          restore())

        self.ride_out(guest, node_down_restart_node_back)
        self.assertEqual(state, self.controller_state(client, name))

    def test_detach_while_the_node_is_down_leaves_nothing(self):
        storage = Host(self, 'storage', storage=True)
        props = self.tcp_props(storage)
        info = self.connector.connect_volume(props)
        storage.target.stop()
        self.compute.crash_and_restart()
        self.connector.disconnect_volume(props, info)
        self.assertEqual([], self.saved_controllers())
        storage.target.start()
        restore = self.restorer()
        self.assertEqual('', restore())
        self.assertEqual([], self.compute.client.vhost_get_controllers())
        self.assertEqual([], self.compute.client.bdev_nvme_get_controllers())


class TestRacingRestart(RestartTestCase):
    """Attach and detach race a crash: what is left is what they said."""

    def pause_first_controller(self, client):
        """The first attach to create its controller waits for the crash.

        So the crash lands mid-attach for sure (its first steps done,
        its controller not made yet), whatever the threads' timing.
        Returns the events: that attach is paused; the target crashed.
        """
        real_call = client.call
        paused, crashed = threading.Event(), threading.Event()

        def call(method, params=None):
            if method == 'vhost_create_blk_controller' and not paused.is_set():
                paused.set()
                crashed.wait(60)
            return real_call(method, params)
        self.useFixture(fixtures.MockPatchObject(client, 'call',
                                                 side_effect=call))
        return paused, crashed

    def test_attach_and_detach_racing_a_crash(self):
        client = self.compute.client
        volumes = ['%s-%d' % (VOLUME[:-2], n) for n in range(4)]
        props = {}
        for volume in volumes:
            lvol = client.bdev_lvol_create(volume, 4, lvs_name=LVS,
                                           thin_provision=True)
            props[volume] = {'volume_id': volume, 'lvol_uuid': lvol,
                             'bdev': '%s/%s' % (LVS, volume),
                             'transport': 'local', 'access_mode': 'rw'}
        attached, to_attach = volumes[:2], volumes[2:]
        for volume in attached:
            self.connector.connect_volume(props[volume])
        outcome = {}
        paused, crashed = self.pause_first_controller(client)

        def run(volume, action):
            try:
                action(props[volume])
                outcome[volume] = 'ok'
            except Exception as err:  # noqa: the outcome is asserted
                outcome[volume] = err

        threads = [threading.Thread(target=run, args=(
            v, lambda p: self.connector.disconnect_volume(p, None)))
            for v in attached]
        threads += [threading.Thread(target=run, args=(
            v, self.connector.connect_volume)) for v in to_attach]
        for thread in threads:
            thread.start()
        self.assertTrue(paused.wait(60), 'no attach reached its controller')
        self.compute.crash_and_restart()
        crashed.set()
        for thread in threads:
            thread.join(120)
        # Once more: whatever survives must be in the saved config.
        self.compute.crash_and_restart()
        present = {c['ctrlr'] for c in client.vhost_get_controllers()}
        for volume in attached:
            self.assertEqual('ok', outcome[volume])
            self.assertNotIn('vhost-' + volume, present)
        for volume in to_attach:
            self.assertEqual(outcome[volume] == 'ok',
                             'vhost-' + volume in present, outcome)
        for name in present:
            client.vhost_delete_controller(name)
