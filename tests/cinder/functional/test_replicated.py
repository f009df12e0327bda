"""Replicated volumes through the Cinder driver, on three real targets.

The backend's own target and two peers (``spdk_replica_targets``) are
idle ``nvmf_tgt`` storage targets started without auto-examine, as the
admin guide asks; a polling ``spdk_tgt`` is the compute host, where the
real connector mirrors what the driver hands over. Checked: where the
copies go, that nothing is left on any target after a delete or a
failed create, that every copy gets the QoS and the new size, and that
what the driver cannot do for a replicated volume is refused, not done
to one copy.
"""

import time

from cinder import exception
from oslo_config import cfg
from oslo_config import fixture as config_fixture

from cinder_spdk_vhost import peers
from cinder_spdk_vhost import replication
from os_brick_connector import connector
from os_brick_connector import options
from os_brick_connector import privileged
from spdk_vhost_core import replicas as wire
from spdk_vhost_core import spdk_rpc
from testbed import net
from testbed import spdk_target
from tests.cinder import base
from tests.cinder.functional import test_driver

MIB = test_driver.MIB
CONF = cfg.CONF
#: Peer section -> (its target id, lvstore MiB): C has the most room.
PEERS = {'spdk-b': ('storage-b', 1024), 'spdk-c': ('storage-c', 1536)}
QOS = {'total_iops_sec': '4000'}


class ReplicatedTestCase(test_driver.DriverTestCase):
    """The backend's target plus two peers, all idle ``nvmf_tgt``."""

    APP = 'nvmf_tgt'
    INTERRUPT_MODE = True
    AUTO_EXAMINE = False

    def setUp(self):
        self.peers = {}
        super().setUp()

    def make_driver(self, **overrides):
        for name, (target_id, size_mib) in sorted(PEERS.items()):
            if name not in self.peers:
                self.peers[name] = self.start_peer(name, target_id,
                                                   size_mib)
        overrides.setdefault('spdk_replica_targets', sorted(PEERS))
        return super().make_driver(**overrides)

    def start_peer(self, name, target_id, size_mib):
        target = self.useFixture(spdk_target.SpdkTarget(
            app='nvmf_tgt', interrupt_mode=True, auto_examine=False,
            name=target_id))
        target.aio_lvstore(base.LVS, size_mib=size_mib)
        peers.section(name)
        for option, value in {
                'spdk_rpc_socket': target.socket_path,
                'spdk_rpc_connect_retries': 0, 'spdk_target_id': target_id,
                'spdk_nvmf_port': net.free_port(),
                'spdk_saved_config': ''}.items():
            CONF.set_override(option, value, group=name)
        return target

    def restart_peer(self, name):
        """Start a killed peer again; its lvstore's file is still there."""
        target = self.peers[name]
        target.start()
        base_bdev = '%s_base' % base.LVS
        target.rpc('bdev_aio_create', {
            'name': base_bdev, 'block_size': 4096,
            'filename': '%s/%s.img' % (target.workdir, base.LVS)})
        target.rpc('bdev_examine', {'name': base_bdev})
        target.rpc('bdev_wait_for_examine')

    def replicated(self, copies=2, qos=None):
        """A volume type asking for ``copies`` copies of each volume."""
        return self.make_type(qos, extra_specs={
            replication.EXTRA_SPEC: str(copies)})

    def copies(self, volume):
        """Target id -> the volume's lvol there, on every target."""
        found = {}
        for target_id, target, name in [
                ('storage-target', self.target, volume.name)] + [
                (tid, self.peers[sec], replication.replica_name(volume.id))
                for sec, (tid, _size) in PEERS.items()]:
            lvols = [lvol for lvol in target.rpc(
                'bdev_lvol_get_lvols', {'lvs_name': base.LVS})
                if lvol['name'] == name]
            if lvols:
                found[target_id] = target.rpc(
                    'bdev_get_bdevs', {'name': lvols[0]['uuid']})[0]
        return found

    def everything(self):
        """Every lvol and subsystem on every target: [] when clean."""
        return [(t.name, item) for t in [self.target] + list(
            self.peers.values())
            for item in [lvol['name'] for lvol in t.rpc(
                'bdev_lvol_get_lvols', {'lvs_name': base.LVS})] + [
                sub['nqn'] for sub in t.rpc('nvmf_get_subsystems')
                if sub['subtype'] == 'NVMe']]


class PlacementTest(ReplicatedTestCase):

    def test_copies_go_to_the_roomiest_peers_and_go_with_the_volume(self):
        two = self.created(vtype=self.replicated(2, qos=QOS))
        held = self.copies(two)
        self.assertEqual(['storage-c', 'storage-target'], sorted(held))
        for bdev in held.values():
            self.assertEqual(4000,
                             bdev['assigned_rate_limits']['rw_ios_per_sec'])
            self.assertEqual(1024 * MIB,
                             bdev['num_blocks'] * bdev['block_size'])
        three = self.created(vtype=self.replicated(3))
        self.assertEqual(['storage-b', 'storage-c', 'storage-target'],
                         sorted(self.copies(three)))
        plain = self.created()
        self.assertEqual(['storage-target'], sorted(self.copies(plain)))

        self.driver.delete_volume(two)
        self.driver.delete_volume(three)
        self.driver.delete_volume(three)
        self.driver.delete_volume(plain)
        self.assertEqual([], self.everything())

    def test_more_copies_than_targets_is_refused_before_any_rpc(self):
        for copies in (4, 'two', 0):
            self.assertRaises(exception.InvalidVolumeType,
                              self.driver.create_volume,
                              self.make_volume(vtype=self.replicated(copies)))
        self.assertEqual([], self.everything())

    def test_two_targets_with_one_identity_are_refused_at_start(self):
        CONF.set_override('spdk_target_id', 'storage-target', group='spdk-b')
        self.assertRaises(exception.InvalidConfigurationValue,
                          self.make_driver)

    def test_a_peer_down_at_start_serves_once_it_is_back(self):
        self.peers['spdk-b'].kill()
        driver = self.make_driver()
        self.restart_peer('spdk-b')
        volume = self.make_volume(vtype=self.replicated(3))
        driver.create_volume(volume)
        self.assertEqual(3, len(self.copies(volume)))
        driver.delete_volume(volume)
        self.assertEqual([], self.everything())

    def test_a_dead_peer_fails_the_create_and_leaves_nothing(self):
        self.peers['spdk-b'].kill()
        volume = self.make_volume(vtype=self.replicated(3))
        self.assertRaises(exception.VolumeBackendAPIException,
                          self.driver.create_volume, volume)
        self.restart_peer('spdk-b')
        self.assertEqual([], self.everything())
        # Two copies still fit on the targets that answer.
        self.created(vtype=self.replicated(2))

    def test_a_dead_peer_fails_the_delete_and_a_retry_finishes_it(self):
        volume = self.created(vtype=self.replicated(3))
        self.peers['spdk-c'].kill()
        self.assertRaises(exception.VolumeBackendAPIException,
                          self.driver.delete_volume, volume)
        # Nothing went before the dead peer answers.
        self.assertIn(volume.name, self.lvol_names())
        self.restart_peer('spdk-c')
        self.driver.delete_volume(volume)
        self.assertEqual([], self.everything())

    def test_extend_and_retype_change_every_copy(self):
        volume = self.created(vtype=self.replicated(2))
        self.driver.extend_volume(volume, 2)
        volume.size = 2
        held = self.copies(volume)
        self.assertEqual({2048 * MIB}, {b['num_blocks'] * b['block_size']
                                        for b in held.values()})
        host = {'host': base.HOST + '#' + base.LVS}
        faster = self.replicated(2, qos={'total_iops_sec': '7000'})
        self.assertEqual((True, None), self.driver.retype(
            self.ctxt, volume, faster, {}, host))
        self.assertEqual({7000}, {
            b['assigned_rate_limits']['rw_ios_per_sec']
            for b in self.copies(volume).values()})
        # Changing the number of copies is not done in place.
        self.assertEqual((False, None), self.driver.retype(
            self.ctxt, volume, self.make_type(), {}, host))
        self.assertEqual(2, len(self.copies(volume)))

    def test_what_would_touch_one_copy_is_refused(self):
        volume = self.created(vtype=self.replicated(2))
        snapshot = self.make_snapshot(volume)
        for call, args in [
                (self.driver.create_snapshot, (snapshot,)),
                (self.driver.create_cloned_volume,
                 (self.make_volume(), volume)),
                (self.driver.copy_volume_to_image,
                 (self.ctxt, volume, None, {})),
                (self.driver.copy_image_to_volume,
                 (self.ctxt, volume, None, 'image')),
                (self.driver.unmanage, (volume,))]:
            self.assertRaises(exception.VolumeDriverException, call, *args)
        # Cinder-backup's connector: no staged copy of one replica.
        self.assertRaises(exception.VolumeDriverException,
                          self.driver.initialize_connection, volume,
                          {'host': 'backup', 'initiator': 'x'})
        self.assertEqual(2, len(self.copies(volume)))

    def test_stats_say_how_many_copies_fit(self):
        pools = self.driver.get_volume_stats(refresh=True)['pools']
        self.assertEqual([3], [pool['spdk_max_replicas'] for pool in pools])
        self.peers['spdk-c'].kill()
        pools = self.driver.get_volume_stats(refresh=True)['pools']
        self.assertEqual([2], [pool['spdk_max_replicas'] for pool in pools])


class AttachTest(ReplicatedTestCase):
    """The real connector on a compute target mirrors the exports."""

    def setUp(self):
        super().setUp()
        self.compute = self.useFixture(spdk_target.SpdkTarget(
            name='compute'))
        conf = cfg.ConfigOpts()
        options.register_opts(conf)
        self.useFixture(config_fixture.Config(conf))
        conf.set_override('spdk_rpc_socket', self.compute.socket_path,
                          'spdk_vhost')
        conf.set_override('spdk_saved_config', '', 'spdk_vhost')
        privileged.socket_access.set_client_mode(False)
        self.addCleanup(privileged.socket_access.set_client_mode, True)
        self.connector = connector.SpdkVhostConnector(
            None, conf=conf.spdk_vhost)
        self.addCleanup(self.connector.client.close)
        with spdk_rpc.SpdkClient.from_conf(conf.spdk_vhost) as client:
            self.host = connector.SpdkVhostConnector.get_connector_properties(
                None, conf=conf.spdk_vhost, client=client)

    def test_attach_mirrors_every_copy_and_detach_unexports_all(self):
        volume = self.created(vtype=self.replicated(3))
        props = self.driver.initialize_connection(volume, self.host)['data']
        self.assertEqual(wire.REPLICATED, props['transport'])
        self.assertEqual(['storage-b', 'storage-c', 'storage-target'],
                         sorted(r['target_id'] for r in props['replicas']))
        info = self.connector.connect_volume(props)
        [raid] = self.compute.rpc('bdev_raid_get_bdevs', {'category': 'all'})
        self.assertEqual(volume.id, raid['name'])
        self.assertEqual(('raid1', 'online', 3, 3),
                         (raid['raid_level'], raid['state'],
                          raid['num_base_bdevs'],
                          raid['num_base_bdevs_operational']))
        # Online extend: each copy's namespace grows, the compute host's
        # NVMe bdevs hear of it and the mirror grows with the smallest.
        before = self.raid_bytes(volume)
        self.driver.extend_volume(volume, 2)
        self.wait_for(lambda: self.raid_bytes(volume) >= before + 1024 * MIB)
        self.assertEqual(self.raid_bytes(volume),
                         self.connector.extend_volume(props))
        self.connector.disconnect_volume(props, info)
        self.assertEqual([], self.compute.rpc('bdev_raid_get_bdevs',
                                              {'category': 'all'}))
        self.driver.terminate_connection(volume, self.host)
        self.driver.delete_volume(volume)
        self.assertEqual([], self.everything())

    def raid_bytes(self, volume):
        [raid] = self.compute.rpc('bdev_get_bdevs', {'name': volume.id})
        return raid['num_blocks'] * raid['block_size']

    def wait_for(self, check, timeout=30):
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                self.fail('still not so after %ss' % timeout)
            time.sleep(0.2)

    def test_attach_where_a_copy_lives_is_refused(self):
        volume = self.created(vtype=self.replicated(2))
        here = dict(self.host, spdk_target_id='storage-c')
        self.assertRaises(exception.VolumeBackendAPIException,
                          self.driver.initialize_connection, volume, here)
        # Refused before any export: no subsystem (NQNs have colons).
        self.assertEqual([], [item for item in self.everything()
                              if ':' in item[1]])
