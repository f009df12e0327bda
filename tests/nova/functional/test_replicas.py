"""Replicated volumes on real SPDK: a RAID1 over two storage targets.

Two idle ``nvmf_tgt`` storage targets each export one lvol of the
volume over NVMe/TCP on loopback; the polling compute target attaches
both and mirrors them (``os_brick_connector.replicas``). A TCG guest
writes through the mirror while one storage target is SIGKILLed: it must
see no I/O error and read back every block it wrote; the RAID reports
itself degraded. Failures injected at each step of the assembly
(``testbed.fault_proxy``) leave nothing on the compute target, and a
crashed compute target gets the mirror back from its saved config.

The storage targets need no ``--no-auto-examine`` start here: they
examine an lvol only when it appears, before the compute target writes
its superblock; a restarted storage target would (see the admin guide).
"""

import hashlib
import os

import fixtures

from os_brick_connector import connector
from os_brick_connector import connector_errors as errors
from os_brick_connector import mirror
from spdk_vhost_core import replicas as wire
from spdk_vhost_core import saved_config
from testbed.guest import qemu
from testbed.guest import writer
from testbed import spdk_target
from testbed import waiting
from tests.nova.functional import targets
from tests.nova.functional import test_connector as base_tests
from tests.nova.functional import test_faults

GROUP = base_tests.GROUP
VOLUME = base_tests.VOLUME_A
KIB = 1024
# The guest's writer: 64 blocks of 16 KiB after a 1 MiB pattern it
# writes once; all within the 8 MiB volume less the superblock's room.
KEPT = (0, 1024 * KIB)
BLOCK = 16 * KIB
BLOCKS = 64
WRITER = (1024 * KIB, BLOCK)
#: The compute target's own lvstore and its base bdev.
LVS_PREFIX = targets.LVS


class ReplicaTestCase(test_faults.TcpCase):
    """A second storage target; a connector behind a fault proxy too."""

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(600, gentle=True))
        self.second_target = self.start_second()
        self.second = targets.client_of(self, self.second_target)
        # The replicas' own defaults (nvme_replica_*) fail a dead
        # replica's I/O after 1 s, so the RAID goes on without it; the
        # single-copy nvme_* defaults would stall the guest 70 s.

    def start_second(self):
        return targets.storage(self, 'storage-b')

    def replicated(self, volume_id=VOLUME):
        """What Cinder will hand over: one export per storage target."""
        members = []
        for target_id, storage in (('storage-a', self.storage),
                                   ('storage-b', self.second)):
            data = self.export(volume_id, storage=storage)
            member = {key: data[key] for key in
                      ('transport', 'nqn', 'traddr', 'trsvcid', 'adrfam',
                       'ns_id', 'host_nqn')}
            member['target_id'] = target_id
            members.append(member)
        return {'volume_id': volume_id, 'transport': wire.REPLICATED,
                'replicas': members, 'access_mode': 'rw',
                'block_size': 512, 'numa_node': 0}

    def member_names(self, volume_id=VOLUME):
        return sorted(mirror.member_controller(volume_id, target)
                      for target in ('storage-a', 'storage-b'))

    def raid_names(self):
        return [raid['name'] for raid in self.client.bdev_raid_get_bdevs()]

    def bdev_names(self):
        return [name for name in spdk_target.bdev_names(self.client)
                if not name.startswith(LVS_PREFIX)]

    def read_sha(self, guest, offset, length):
        return guest.execute(qemu.read_back('vda', offset, length))[
            'vda.read@%d' % offset]

    def assert_nothing_left(self):
        self.assertEqual([], self.controller_names())
        self.assertEqual([], self.raid_names())
        self.assertEqual([], self.nvme_names())
        # An NVMe bdev may outlive its controller's listing by a moment
        # (its unregister ends after): wait for it, then none may be left.
        waiting.wait_for('no bdev left', lambda: not self.bdev_names(), 10,
                         interval=0.2, on_timeout=self.bdev_names)


class TestAssembly(ReplicaTestCase):

    def test_attach_mirrors_both_and_detach_leaves_nothing(self):
        props = self.replicated()
        info = self.connect(props)
        ctrl = self.controller(info['controller'])
        # The mirror is named after the volume: the guest's disk serial.
        self.assertEqual(VOLUME, ctrl['backend_specific']['block']['bdev'])
        self.assertEqual(self.member_names(), sorted(self.nvme_names()))
        raid = mirror.find(self.client, VOLUME)
        self.assertEqual(('raid1', True, 'online'),
                         (raid['raid_level'], raid['superblock'],
                          raid['state']))
        self.assertEqual(
            {'state': 'online', 'replicas': 2, 'missing': 0,
             'rebuilding': None,
             'members': [name + 'n1' for name in self.member_names()]},
            dict(mirror.status(self.client, VOLUME),
                 members=sorted(mirror.status(self.client,
                                              VOLUME)['members'])))
        # Idempotent: the same controller, nothing more.
        self.assertEqual(info, self.connector.connect_volume(props))
        self.assertEqual(2, len(self.nvme_names()))

        self.connector.disconnect_volume(props, info)
        self.assertIsNone(mirror.status(self.client, VOLUME))
        self.assert_nothing_left()

    def test_superblock_reassembles_on_reattach(self):
        """A second attach finds the mirror its superblocks describe."""
        props = self.replicated()
        info = self.connect(props)
        first = mirror.find(self.client, VOLUME)['uuid']
        self.connector.disconnect_volume(props, info)
        self.assert_nothing_left()
        info = self.connect(props)
        raid = mirror.find(self.client, VOLUME)
        self.assertEqual((first, 'online', 2),
                         (raid['uuid'], raid['state'],
                          raid['num_base_bdevs_discovered']))
        self.connector.disconnect_volume(props, info)
        self.assert_nothing_left()

    def test_foreign_raid_refused(self):
        """A mirror of the same name over other bdevs is not reused."""
        props = self.replicated()
        foreign = ['foreign0', 'foreign1']
        for name in foreign:
            self.client.call('bdev_malloc_create', {
                'name': name, 'num_blocks': 16384, 'block_size': 512})
            self.addCleanup(self.client.call, 'bdev_malloc_delete',
                            {'name': name})
        self.client.bdev_raid_create(VOLUME, 'raid1', foreign,
                                     superblock=True)
        self.addCleanup(self.client.bdev_raid_delete, VOLUME)
        self.assertRaises(errors.ReplicaMismatch,
                          self.connector.connect_volume, props)
        self.assertEqual([], self.controller_names())
        self.assertEqual([], self.nvme_names())
        self.assertEqual([VOLUME], self.raid_names())


class TestComputeRestart(ReplicaTestCase):
    """The compute target crashes and comes back from its saved config."""

    def start_compute(self):
        self.saved = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'compute.json')
        return targets.remote_compute(self, json_config=self.saved)

    def test_mirror_comes_back_from_the_superblocks(self):
        self.cfg.config(group=GROUP, spdk_saved_config=self.saved)
        saving = connector.SpdkVhostConnector(None, conf=self.conf,
                                              client=self.client)
        props = self.replicated()
        info = saving.connect_volume(props)
        self.addCleanup(self._cleanup_controller, info['controller'])
        first = mirror.find(self.client, VOLUME)['uuid']
        self.client.close()
        self.target.restart(crash=True)
        # SPDK saved the NVMe attaches, not the RAID: examine made it.
        ctrl = self.controller(info['controller'])
        self.assertEqual(VOLUME, ctrl['backend_specific']['block']['bdev'])
        raid = mirror.find(self.client, VOLUME)
        self.assertEqual((first, 'online', 2),
                         (raid['uuid'], raid['state'],
                          raid['num_base_bdevs_discovered']))
        self.assertEqual(info, saving.connect_volume(props))
        saving.disconnect_volume(props, info)
        self.assert_nothing_left()


class StorageRestartCase(ReplicaTestCase):
    """The second storage target restarts from its saved config."""

    auto_examine = True

    def start_second(self):
        self.second_saved = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'storage-b.json')
        return targets.storage(self, 'storage-b',
                               json_config=self.second_saved,
                               auto_examine=self.auto_examine)

    def restart_second(self):
        """Restart it once the compute host wrote its superblock.

        Returns the namespaces it exports again, and its own RAIDs.
        """
        props = self.replicated()
        info = self.connect(props)
        self.addCleanup(self.connector.disconnect_volume, props, info)
        saved_config.ConfigSaver(self.second, self.second_saved).save()
        self.second.close()
        self.second_target.restart(crash=True)
        namespaces = [ns['name'] for sub in
                      self.second.call('nvmf_get_subsystems')
                      for ns in sub.get('namespaces', ())]
        raids = [raid['name'] for raid in self.second.bdev_raid_get_bdevs()]
        return namespaces, raids


class TestStorageRestartAutoExamine(StorageRestartCase):
    """The trap: the storage target's own raid module claims the replica."""

    def test_replica_not_exported_again(self):
        namespaces, raids = self.restart_second()
        self.assertEqual([], namespaces)
        self.assertEqual([VOLUME], raids)


class TestStorageRestartNoAutoExamine(StorageRestartCase):
    """Started as storage targets serving replicas must be."""

    auto_examine = False

    def test_replica_exported_again(self):
        namespaces, raids = self.restart_second()
        self.assertEqual(1, len(namespaces))
        self.assertEqual([], raids)


class TestAssemblyFaults(ReplicaTestCase):
    """A failure at each step of the assembly leaves nothing behind."""

    def check(self, method, action, occurrence=1, exc=errors.TargetError,
              superblock=False):
        props = self.replicated()
        if superblock:
            # Attached once before: examine starts the mirror by itself.
            self.faulty.disconnect_volume(
                props, self.faulty.connect_volume(props))
        self.proxy.fail(method, action, occurrence=occurrence)
        self.assertRaises(exc, self.faulty.connect_volume, props)
        self.assertEqual([(method, action)], self.proxy.fired)
        self.assert_nothing_left()
        # And Nova's retry succeeds.
        info = self.faulty.connect_volume(props)
        self.assertEqual(VOLUME, mirror.find(self.client, VOLUME)['name'])
        self.faulty.disconnect_volume(props, info)
        self.assert_nothing_left()

    def test_first_replica_attach_lost(self):
        self.check('bdev_nvme_attach_controller', 'cut_after')

    def test_second_replica_attach_lost(self):
        self.check('bdev_nvme_attach_controller', 'cut_after', 2)

    def test_second_replica_attach_never_sent(self):
        self.check('bdev_nvme_attach_controller', 'cut_before', 2)

    def test_second_replica_attach_lost_past_a_superblock(self):
        self.check('bdev_nvme_attach_controller', 'cut_after', 2,
                   superblock=True)

    def test_examine_wait_lost(self):
        self.check('bdev_wait_for_examine', 'cut_before')

    def test_raid_create_reply_lost(self):
        self.check('bdev_raid_create', 'cut_after')

    def test_controller_reply_lost(self):
        self.check('vhost_create_blk_controller', 'cut_after')

    def test_refused_replica(self):
        """The second storage target refuses this host: a real error."""
        props = self.replicated()
        props['replicas'][1]['host_nqn'] = base_tests.HOST_NQN[:-1] + '0'
        self.assertRaises(errors.TargetError, self.connector.connect_volume,
                          props)
        self.assert_nothing_left()


class TestReplicaLoss(ReplicaTestCase):
    """A storage target dies under a writing guest."""

    def test_guest_writes_on_through_a_lost_replica(self):
        props = self.replicated()
        info = self.connect(props)
        guest = self.useFixture(qemu.GuestFixture(
            [qemu.VhostUserDisk(info['path'], 1)])).guest
        guest.execute(qemu.write_pattern('vda', KEPT[0], KEPT[1], 'kept'))
        self.assertEqual(
            hashlib.sha256(qemu.pattern_bytes('kept', KEPT[1])).hexdigest(),
            self.read_sha(guest, *KEPT))
        guest.execute(qemu.writer_start('vda', WRITER[0], WRITER[1],
                                        'mirror', blocks=BLOCKS))
        before = writer.writes(writer.writes_after(guest, 5, timeout=180))
        self.second_target.kill()
        # Past the fast-fail timeout, and a whole round of the blocks.
        writer.writes_after(guest, before + BLOCKS + 10, timeout=180)
        stopped = guest.execute(qemu.writer_stop())
        self.assertEqual('0', stopped['writer.failures'])
        print('replica loss: longest guest write stall %s ms, %s writes'
              % (stopped['writer.max_gap_ms'], stopped['writer.writes']))

        state = mirror.status(self.client, VOLUME)
        self.assertEqual('degraded', state['state'])
        self.assertEqual([mirror.member_controller(VOLUME, 'storage-a')
                          + 'n1'], state['members'])
        # Every block the writer wrote, and the first pattern, intact.
        block = qemu.pattern_bytes('mirror', BLOCK)
        self.assertEqual(hashlib.sha256(block * BLOCKS).hexdigest(),
                         self.read_sha(guest, WRITER[0], BLOCK * BLOCKS))
        self.assertEqual(
            hashlib.sha256(qemu.pattern_bytes('kept', KEPT[1])).hexdigest(),
            self.read_sha(guest, *KEPT))

        guest.stop()
        self.connector.disconnect_volume(props, info)
        self.assert_nothing_left()
