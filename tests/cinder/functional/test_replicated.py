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

import hashlib
import io
import os
import re
import shlex
import subprocess

from cinder.db import api as db
from cinder import exception
from cinder import objects
import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture

from cinder_spdk_vhost import dd
from cinder_spdk_vhost import locks
from cinder_spdk_vhost import peers
from cinder_spdk_vhost import replica_compare
from cinder_spdk_vhost import replica_health as health
from cinder_spdk_vhost import replica_type
from cinder_spdk_vhost import rollback
from cinder_spdk_vhost import superblock
from nova_vhost_user import replicas_cmd
from os_brick_connector import connector
from os_brick_connector import mirror
from os_brick_connector import mirror_repair
from os_brick_connector import options
from os_brick_connector import privileged
from spdk_vhost_core import replicas as wire
from spdk_vhost_core import spdk_rpc
from testbed import net
from testbed import spdk_build
from testbed import spdk_dd
from testbed import spdk_target
from testbed import waiting
from tests.cinder import base
from tests.cinder.functional import imaging
from tests.cinder.functional import test_driver

MIB = test_driver.MIB
CONF = cfg.CONF
#: Peer section -> (its target id, lvstore MiB): C has the most room.
#: Each keeps a whole copy's room per copy (a rebuild writes every
#: block): B has room for three copies of a 1 GiB volume, C for three
#: and most of a fourth.
PEERS = {'spdk-b': ('storage-b', 3584), 'spdk-c': ('storage-c', 4096)}
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
        overrides.setdefault('spdk_dd_path', spdk_build.app_path('spdk_dd'))
        overrides.setdefault('spdk_image_staging_dir', self.useFixture(
            fixtures.TempDir()).path)
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
        self.configure_peer(name, target, target_id)
        return target

    @staticmethod
    def configure_peer(name, target, target_id, saved_config=''):
        """Section ``name`` of cinder.conf: how the backend reaches it."""
        peers.section(name)
        for option, value in {
                'spdk_rpc_socket': target.socket_path,
                'spdk_rpc_connect_retries': 0, 'spdk_target_id': target_id,
                'spdk_nvmf_port': net.free_port(),
                'spdk_saved_config': saved_config}.items():
            CONF.set_override(option, value, group=name)

    def restart_peer(self, name):
        self.reopen(self.peers[name])

    def reopen(self, target):
        """Start a killed target again; its lvstore's file is still there."""
        target.start()
        target.reopen_aio_lvstore(base.LVS)

    def replicated(self, copies=2, qos=None):
        """A volume type asking for ``copies`` copies of each volume."""
        return self.make_type(qos, extra_specs={
            replica_type.EXTRA_SPEC: str(copies)})

    def copies(self, volume):
        """Target id -> the volume's lvol there, on every target."""
        found = {}
        for target_id, target, name in [
                ('storage-target', self.target, volume.name)] + [
                (tid, self.peers[sec], replica_type.replica_name(volume.id))
                for sec, (tid, _size) in PEERS.items()]:
            lvols = [lvol for lvol in target.rpc(
                'bdev_lvol_get_lvols', {'lvs_name': base.LVS})
                if lvol['name'] == name]
            if lvols:
                found[target_id] = target.rpc(
                    'bdev_get_bdevs', {'name': lvols[0]['uuid']})[0]
        return found

    def peer_holding(self, volume):
        """The section of the one peer holding a 2-copy volume's copy."""
        [name] = [name for name, (tid, _size) in PEERS.items()
                  if tid in self.copies(volume)]
        return name

    def everything(self, gone=()):
        """Every lvol and subsystem on every target: [] when clean.

        ``gone``: the sections of peers killed for good, not asked.
        """
        return [(t.name, item) for t in [self.target] + [
            target for name, target in self.peers.items()
            if name not in gone]
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
            self.assertEqual(1024 * MIB + superblock.DATA_OFFSET,
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

    def test_start_removes_scratch_exports_left_on_peers(self):
        volume = self.created(vtype=self.replicated(2))
        [(peer, copy)] = self.driver.replicas.holders(volume)
        # A copy interrupted before its clean-up ran (never run here).
        dd.scratch_export(peer.exporter, copy.uuid, volume.id,
                          rollback.Rollback('an interrupted copy'))
        self.assertEqual(1, len([item for item in self.everything()
                                 if ':' in item[1]]))
        self.driver.check_for_setup_error()
        self.assertEqual([], [item for item in self.everything()
                              if ':' in item[1]])
        self.driver.delete_volume(volume)

    def test_a_dead_peer_fails_the_create_and_leaves_nothing(self):
        self.peers['spdk-b'].kill()
        volume = self.make_volume(vtype=self.replicated(3))
        self.assertRaises(exception.VolumeBackendAPIException,
                          self.driver.create_volume, volume)
        self.restart_peer('spdk-b')
        self.assertEqual([], self.everything())
        # Two copies still fit on the targets that answer.
        self.created(vtype=self.replicated(2))

    def test_peers_dying_during_a_clone_copy_leave_what_delete_removes(self):
        source = self.created(vtype=self.replicated(2))
        snapshot = self.make_snapshot(source)
        self.driver.create_snapshot(snapshot)
        write_file = dd.write_file

        def dying(*args):
            for target in self.peers.values():
                target.kill()
            return write_file(*args)

        with fixtures.MonkeyPatch('cinder_spdk_vhost.dd.write_file', dying):
            clone = self.make_volume(vtype=self.replicated(2))
            self.assertRaises(exception.VolumeBackendAPIException,
                              self.driver.create_volume_from_snapshot,
                              clone, snapshot)
        # The own target's part is undone; the staging file is gone.
        self.assertNotIn(clone.name, self.lvol_names())
        self.assertEqual([], os.listdir(
            self.driver.configuration.spdk_image_staging_dir))
        for name in PEERS:
            self.restart_peer(name)
        # The copy a dead peer could not delete is found by name: the
        # delete of the volume Cinder set to error removes it.
        self.assertEqual(1, len(self.copies(clone)))
        self.driver.delete_volume(clone)
        self.driver.delete_snapshot(snapshot)
        self.driver.delete_volume(source)
        self.assertEqual([], self.everything())

    def test_extend_and_retype_change_every_copy(self):
        volume = self.created(vtype=self.replicated(2))
        self.driver.extend_volume(volume, 2)
        volume.size = 2
        held = self.copies(volume)
        self.assertEqual({2048 * MIB + superblock.DATA_OFFSET},
                         {b['num_blocks'] * b['block_size']
                          for b in held.values()})
        host = {'host': base.HOST + '#' + base.LVS}
        faster = self.replicated(2, qos={'total_iops_sec': '7000'})
        self.assertEqual((True, None), self.driver.retype(
            self.ctxt, volume, faster, {}, host))
        self.assertEqual({7000}, {
            b['assigned_rate_limits']['rw_ios_per_sec']
            for b in self.copies(volume).values()})
        # Not while attached: Cinder keeps the status it had as
        # previous_status.
        volume.previous_status = 'in-use'
        self.assertEqual((False, None), self.driver.retype(
            self.ctxt, volume, self.make_type(), {}, host))
        self.assertEqual(2, len(self.copies(volume)))

    def test_what_would_touch_one_copy_is_refused(self):
        volume = self.created(vtype=self.replicated(2))
        for call, args in [
                # Its data starts after the superblock; a plain one's not.
                (self.driver.create_cloned_volume,
                 (self.make_volume(), volume)),
                (self.driver.unmanage, (volume,))]:
            self.assertRaises(exception.VolumeDriverException, call, *args)
        self.assertEqual(2, len(self.copies(volume)))

    def test_stats_say_how_many_copies_fit(self):
        pools = self.driver.get_volume_stats(refresh=True)['pools']
        self.assertEqual([3], [pool['spdk_max_replicas'] for pool in pools])
        self.peers['spdk-c'].kill()
        pools = self.driver.get_volume_stats(refresh=True)['pools']
        self.assertEqual([2], [pool['spdk_max_replicas'] for pool in pools])

    def test_stats_mark_the_volumes_with_a_copy_out_of_reach(self):
        two, three, plain, creating = [
            self.created(vtype=vtype) for vtype in (
                self.replicated(2), self.replicated(3), None,
                self.replicated(3))]
        for volume in (two, three, plain):
            volume.update({'status': 'available'})
            volume.save()
        self.peers['spdk-b'].kill()  # two's copy is on C, three's on both
        self.driver.get_volume_stats(refresh=True)
        self.assertEqual({}, marks(two))
        self.assertEqual({}, marks(plain))
        self.assertEqual({}, marks(creating))  # not whole yet: left alone
        self.assertEqual({
            health.STATE: health.DEGRADED,
            health.PROBLEM: '1 of its 3 copies out of reach (not answering: '
                            'storage-b (spdk-b))'}, marks(three))
        # What a user wrote is kept.
        db.volume_metadata_update(self.ctxt, three.id, {'owner': 'tenant'},
                                  False)

        self.restart_peer('spdk-b')
        self.driver.get_volume_stats(refresh=True)
        self.assertEqual({'owner': 'tenant'}, marks(three))


def marks(volume):
    """The volume's metadata, as Cinder's database holds it now."""
    return objects.Volume.get_by_id(volume._context, volume.id).metadata


class ComputeTestCase(ReplicatedTestCase):
    """Plus a compute target, where the real connector mirrors copies."""

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

    def attach(self, volume):
        props = self.driver.initialize_connection(volume, self.host)['data']
        return props, self.connector.connect_volume(props)

    def detach(self, volume, props, info):
        self.connector.disconnect_volume(props, info)
        self.driver.terminate_connection(volume, self.host)

    def wait_in_sync(self, volume):
        """Until a stats report finds every copy in sync: no mark left.

        SPDK writes the RAID superblocks that count a rebuilt copy in
        sync just after the rebuild ends, when the mirror already says
        online: a report in between still finds the copy stale.
        """
        def in_sync():
            self.driver.get_volume_stats(refresh=True)
            seen[:] = [marks(volume)]
            return not seen[0]
        seen = []
        waiting.wait_for('volume %s in sync' % volume.id, in_sync, 30,
                         interval=0.2, on_timeout=lambda: 'marks: %s' % seen)


class AttachTest(ComputeTestCase):
    """The real connector on a compute target mirrors the exports."""

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
        # The guest's disk is the volume's size: each copy has room for
        # the superblock besides.
        self.assertEqual(1024 * MIB, self.raid_bytes(volume))
        # Online extend: each copy's namespace grows, the compute host's
        # NVMe bdevs hear of it and the mirror grows with the smallest.
        self.driver.extend_volume(volume, 2)
        waiting.wait_for('the mirror to grow to 2 GiB',
                         lambda: self.raid_bytes(volume) == 2048 * MIB, 30,
                         interval=0.2)
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

    def test_attach_where_a_copy_lives_is_refused(self):
        volume = self.created(vtype=self.replicated(2))
        here = dict(self.host, spdk_target_id='storage-c')
        self.assertRaises(exception.VolumeBackendAPIException,
                          self.driver.initialize_connection, volume, here)
        # Refused before any export: no subsystem (NQNs have colons).
        self.assertEqual([], [item for item in self.everything()
                              if ':' in item[1]])


class Writer(object):
    """spdk_dd rewriting a compute target's bdev: a guest's writes.

    A shell loop runs it generation after generation, through the same
    RAID1 a guest's vhost controller would use. Each generation writes
    :data:`WRITTEN` bytes of one of two patterns, so every 4 KiB block
    read later is one or the other, whole.
    """

    WRITTEN = 8 * MIB

    def __init__(self, test, bdev):
        self.workdir = test.useFixture(fixtures.TempDir()).path
        self.dd = spdk_dd.NvmfDd(test.compute, self.workdir)
        self.bdev = bdev
        self.patterns = []
        self.commands = []
        for seed in 'AB':
            path = os.path.join(self.workdir, seed)
            with open(path, 'wb') as out:
                out.write(pattern(seed, self.WRITTEN))
            self.patterns.append(pattern(seed, self.WRITTEN))
            cmd, self.env = self.dd.command(bdev, ['--if', path,
                                                   '--ob', 'ddn1'])
            self.commands.append(shlex.join(cmd))
        self.count = os.path.join(self.workdir, 'written')
        self.process = None

    def once(self, generation=0):
        """Write one pattern: A (0) or B (1)."""
        subprocess.run(self.commands[generation], shell=True, env=self.env,
                       check=True, capture_output=True)

    def start(self):
        """Loop A, B, A... each run appending a line to the count file."""
        script = 'while :; do %s && echo >> %s || exit 1; done' % (
            ' && echo >> {0} && '.format(shlex.quote(self.count)).join(
                self.commands), shlex.quote(self.count))
        self.process = subprocess.Popen(script, shell=True, env=self.env,
                                        stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)

    def written(self):
        if not os.path.exists(self.count):
            return 0
        with open(self.count) as src:
            return len(src.read())

    def stop(self):
        if self.process is not None:
            self.process.kill()
            self.process.wait()
        self.dd.unexport(self.bdev)

    def check_blocks(self, test, data):
        """Every 4 KiB block of ``data`` is one pattern's, whole."""
        for offset in range(0, len(data), spdk_dd.BLOCK):
            block = data[offset:offset + spdk_dd.BLOCK]
            test.assertIn(block, [p[offset:offset + spdk_dd.BLOCK]
                                  for p in self.patterns], offset)


def pattern(seed, length):
    block = (b'%s-replica-pattern:' % seed.encode()) * 256
    return (block * (length // len(block) + 1))[:length]


class WrittenTestCase(ComputeTestCase):
    """A replicated volume a writer uses, and its copies' bytes."""

    # A rebuild writes every block of the copy: room for all of it.
    LVS_MIB = 1536

    def copy_bytes(self, volume, length):
        """Target id -> the first ``length`` bytes of each of its copies."""
        workdir = self.useFixture(fixtures.TempDir()).path
        targets = {'storage-target': self.target}
        targets.update({tid: self.peers[sec]
                        for sec, (tid, _size) in PEERS.items()})
        return {tid: spdk_dd.read_once(targets[tid], bdev['name'], length,
                                       workdir)
                for tid, bdev in self.copies(volume).items()}

    def assertSameBytes(self, expected, found, what=None):
        """Equal bytes; a failure names digests, not megabytes."""
        self.assertEqual(hashlib.sha256(expected).hexdigest(),
                         hashlib.sha256(found).hexdigest(), what)

    def disk(self, volume):
        """What the compute host's mirror reads of the written region."""
        return spdk_dd.read_once(self.compute, volume.id, Writer.WRITTEN,
                                 self.useFixture(fixtures.TempDir()).path)

    def written(self):
        """A 2-copy volume attached here, pattern A written through it."""
        volume = self.created(vtype=self.replicated(2))
        props, info = self.attach(volume)
        writer = Writer(self, volume.id)
        writer.once()
        return volume, props, info, writer

    def lose_copy(self, while_attached):
        """A written 2-copy volume whose other copy's target died.

        Killed under the writer, the mirror writes B on and fails the
        copy out (its superblock says so); killed after the detach, the
        superblocks name the copy as in sync. Returns the volume, the
        writer, the lost peer's section and the other's.
        """
        volume, props, info, writer = self.written()
        lost = self.peer_holding(volume)
        if while_attached:
            self.peers[lost].kill()
            writer.once(1)
        writer.dd.unexport(volume.id)
        self.detach(volume, props, info)
        if not while_attached:
            self.peers[lost].kill()
        volume.update({'status': 'available'})
        volume.save()
        [other] = set(PEERS) - {lost}
        return volume, writer, lost, other


class DetachedExtendTest(WrittenTestCase):

    def test_the_next_mirror_has_the_new_size(self):
        # Its superblocks are rewritten: a mirror assembled from them
        # takes their size, and its copies grew while none ran.
        volume, props, info, writer = self.written()
        writer.dd.unexport(volume.id)
        self.detach(volume, props, info)
        self.driver.extend_volume(volume, 2)
        volume.update({'size': 2})
        volume.save()
        props, info = self.attach(volume)
        [raid] = self.compute.rpc('bdev_get_bdevs', {'name': volume.id})
        self.assertEqual(2048 * MIB, raid['num_blocks'] * raid['block_size'])
        self.assertSameBytes(writer.patterns[0], self.disk(volume))
        self.detach(volume, props, info)
        self.driver.delete_volume(volume)
        self.assertEqual([], self.everything())


class CloneTest(WrittenTestCase):
    """Snapshots and clones of a replicated volume a writer is using."""

    def delete_all(self, snapshot, *volumes):
        """Delete them all (snapshot first): nothing left on any target."""
        self.driver.delete_snapshot(snapshot)
        for volume in volumes:
            self.driver.delete_volume(volume)
        self.assertEqual([], self.everything())

    def wait_written(self, writer, count):
        waiting.wait_for('%d writes' % count,
                         lambda: writer.written() >= count, 120, interval=0.2)

    def test_a_clone_of_a_volume_being_written_has_identical_copies(self):
        volume, props, info, writer = self.written()
        writer.start()
        self.wait_written(writer, 1)
        snapshot = self.make_snapshot(volume)
        self.driver.create_snapshot(snapshot)
        # The writer went on during the snapshot and after it.
        self.wait_written(writer, writer.written() + 1)
        writer.stop()
        self.detach(volume, props, info)

        clone = self.make_volume(vtype=self.replicated(2))
        self.driver.create_volume_from_snapshot(clone, snapshot)
        end = superblock.DATA_OFFSET + Writer.WRITTEN
        copies = self.copy_bytes(clone, end)
        self.assertEqual(2, len(copies))
        own, other = copies.pop('storage-target'), copies.popitem()[1]
        self.assertSameBytes(own, other, 'the copies of the clone differ')
        # The source's superblock is wiped: the clone's mirror is its own.
        self.assertEqual(bytes(superblock.HEAD_BYTES),
                         own[:superblock.HEAD_BYTES])
        writer.check_blocks(self, own[superblock.DATA_OFFSET:])

        # The compute host mirrors the clone afresh: the guest's disk is
        # the snapshot's, and a new superblock names the clone.
        props, info = self.attach(clone)
        [raid] = self.compute.rpc('bdev_raid_get_bdevs', {'category': 'all'})
        self.assertEqual((clone.id, 'online', 2),
                         (raid['name'], raid['state'],
                          raid['num_base_bdevs_operational']))
        disk = spdk_dd.read_once(self.compute, clone.id, Writer.WRITTEN,
                                 writer.workdir)
        self.assertSameBytes(own[superblock.DATA_OFFSET:], disk,
                             'the clone\'s disk is not its copies\' data')
        self.detach(clone, props, info)
        uuids = {tid: bdev['uuid'] for tid, bdev in self.copies(clone).items()}
        for tid, head in self.copy_bytes(clone, superblock.HEAD_BYTES).items():
            self.assertTrue(superblock.parse(head).in_sync(uuids[tid]), tid)

        self.delete_all(snapshot, clone, volume)

    def test_a_clone_of_a_snapshot_chain_has_all_of_it_in_each_copy(self):
        volume, props, info, writer = self.written()  # A, then a snapshot
        first = self.make_snapshot(volume)
        self.driver.create_snapshot(first)
        half = Writer.WRITTEN // 2
        writer.dd.write(volume.id, half, writer.patterns[1][half:])
        second = self.make_snapshot(volume)  # reads through the first
        self.driver.create_snapshot(second)
        writer.stop()
        self.detach(volume, props, info)

        clone = self.make_volume(vtype=self.replicated(2))
        self.driver.create_volume_from_snapshot(clone, second)
        wanted = writer.patterns[0][:half] + writer.patterns[1][half:]
        for tid, data in self.copy_bytes(clone, superblock.DATA_OFFSET +
                                         Writer.WRITTEN).items():
            self.assertSameBytes(wanted, data[superblock.DATA_OFFSET:], tid)
        self.driver.delete_volume(clone)
        self.driver.delete_snapshot(second)
        self.delete_all(first, volume)

    def test_a_snapshot_of_a_stale_own_copy_waits_for_the_repair(self):
        volume, props, info, writer = self.written()
        self.target.kill()
        # Degraded: the RAID fails the own copy out and writes on.
        writer.once()
        self.reopen(self.target)
        snapshot = self.make_snapshot(volume)
        err = self.assertRaises(exception.VolumeBackendAPIException,
                                self.driver.create_snapshot, snapshot)
        self.assertIn('newer RAID superblock', str(err))
        self.assertNotIn(snapshot.name, self.lvol_names())

        # Its export back (the target kept no config), then the repair.
        self.driver.check_for_setup_error()
        self.driver.initialize_connection(volume, self.host)
        client = self.connector.client
        # Repair is a no-op until the NVMe controller has reconnected.
        waiting.wait_for('the repaired mirror online',
                         lambda: mirror_repair.repair(
                             client, props, self.connector.conf)['state'] ==
                         mirror.ONLINE, 120, interval=0.2)
        # SPDK writes the superblocks that count the repaired copy in
        # sync just after the mirror says online: until then the
        # snapshot is refused as before.
        waiting.wait_for('the snapshot to be taken',
                         lambda: self.snapshot_unless_stale(snapshot), 30,
                         interval=0.2)
        self.assertIn(snapshot.name, self.lvol_names())
        writer.stop()
        self.detach(volume, props, info)
        self.delete_all(snapshot, volume)

    def snapshot_unless_stale(self, snapshot):
        """Take ``snapshot``: False if refused for a stale own copy."""
        try:
            self.driver.create_snapshot(snapshot)
        except exception.VolumeBackendAPIException as err:
            if 'newer RAID superblock' not in str(err):
                raise
            return False
        return True

    def test_two_copies_become_three_two_one_and_two_again(self):
        volume, props, info, writer = self.written()
        writer.dd.unexport(volume.id)
        self.detach(volume, props, info)
        host = {'host': base.HOST + '#' + base.LVS}

        self.assertEqual((True, None), self.driver.retype(
            self.ctxt, volume, self.replicated(3), {}, host))
        volume.volume_type_id = self.replicated(3)['id']
        self.assertEqual(3, len(self.copies(volume)))
        # The next attach mirrors all three, the data on each.
        props, info = self.attach(volume)
        [raid] = self.compute.rpc('bdev_raid_get_bdevs', {'category': 'all'})
        self.assertEqual(('online', 3), (raid['state'],
                                         raid['num_base_bdevs_operational']))
        self.assertSameBytes(writer.patterns[0], spdk_dd.read_once(
            self.compute, volume.id, Writer.WRITTEN, writer.workdir))
        self.detach(volume, props, info)
        for data in self.copy_bytes(volume, superblock.DATA_OFFSET +
                                    Writer.WRITTEN).values():
            self.assertSameBytes(writer.patterns[0],
                                 data[superblock.DATA_OFFSET:])

        self.assertEqual((True, None), self.driver.retype(
            self.ctxt, volume, self.replicated(2), {}, host))
        volume.volume_type_id = self.replicated(2)['id']
        self.assertEqual(2, len(self.copies(volume)))

        # One copy: the disk from offset 0, no room for a superblock.
        plain = self.make_type()
        self.assertEqual((True, None), self.driver.retype(
            self.ctxt, volume, plain, {}, host))
        volume.volume_type_id = plain['id']
        [own] = self.copies(volume).values()
        self.assertEqual(1024 * MIB, own['num_blocks'] * own['block_size'])
        self.assertSameBytes(writer.patterns[0], self.copy_bytes(
            volume, Writer.WRITTEN)['storage-target'])

        # Two again: the disk after the room, mirrored at the next attach.
        self.assertEqual((True, None), self.driver.retype(
            self.ctxt, volume, self.replicated(2), {}, host))
        volume.volume_type_id = self.replicated(2)['id']
        for data in self.copy_bytes(volume, superblock.DATA_OFFSET +
                                    Writer.WRITTEN).values():
            self.assertEqual(bytes(superblock.DATA_OFFSET),
                             data[:superblock.DATA_OFFSET])
            self.assertSameBytes(writer.patterns[0],
                                 data[superblock.DATA_OFFSET:])
        props, info = self.attach(volume)
        self.assertSameBytes(writer.patterns[0], spdk_dd.read_once(
            self.compute, volume.id, Writer.WRITTEN, writer.workdir))
        self.detach(volume, props, info)
        self.driver.delete_volume(volume)
        self.assertEqual([], self.everything())
        self.assertEqual([], os.listdir(
            self.driver.configuration.spdk_image_staging_dir))

    def test_revert_makes_every_copy_the_snapshot_again(self):
        volume = self.created(vtype=self.replicated(2))
        props, info = self.attach(volume)
        writer = Writer(self, volume.id)
        writer.once()  # pattern A
        snapshot = self.make_snapshot(volume)
        self.driver.create_snapshot(snapshot)
        writer.dd.write(volume.id, 0, writer.patterns[1])  # then B
        writer.stop()
        self.detach(volume, props, info)

        self.driver.revert_to_snapshot(self.ctxt, volume, snapshot)
        end = superblock.DATA_OFFSET + Writer.WRITTEN
        for tid, data in self.copy_bytes(volume, end).items():
            self.assertEqual(bytes(superblock.HEAD_BYTES),
                             data[:superblock.HEAD_BYTES], tid)
            self.assertSameBytes(writer.patterns[0],
                                 data[superblock.DATA_OFFSET:], tid)
        props, info = self.attach(volume)
        self.assertSameBytes(writer.patterns[0], spdk_dd.read_once(
            self.compute, volume.id, Writer.WRITTEN, writer.workdir))
        self.detach(volume, props, info)
        self.delete_all(snapshot, volume)


class ReplaceTest(WrittenTestCase):
    """A copy whose target is gone for good, made anew through Cinder."""

    def retire(self, *gone, added=None):
        """The operator takes peers out of spdk_replica_targets.

        ``added``: the section of a peer put in the list instead.
        """
        self.driver = self.make_driver(
            spdk_replica_targets=sorted(set(PEERS) - set(gone)) + (
                [added] if added else []),
            spdk_nvmf_port=self.driver.configuration.spdk_nvmf_port)

    def roomy_peer(self):
        """A new peer with the most room of all."""
        self.peers['spdk-d'] = self.start_peer('spdk-d', 'storage-d', 4608)
        return 'spdk-d'

    def assertMirroredAnew(self, volume, other, data):
        """Attached over the own copy and a new one on ``other``.

        A new mirror over identical copies: nothing to rebuild. Returns
        the attachment.
        """
        props, info = self.attach(volume)
        self.assertEqual(sorted(['storage-target', PEERS[other][0]]),
                         sorted(r['target_id'] for r in props['replicas']))
        [raid] = self.compute.rpc('bdev_raid_get_bdevs', {'category': 'all'})
        self.assertEqual(('online', 2, None), (
            raid['state'], raid['num_base_bdevs_operational'],
            raid.get('process')))
        self.assertSameBytes(data, self.disk(volume))
        return props, info

    def assertNewCopyHoldsAll(self, volume, data, props, info, lost):
        """Its mark gone, and the new copy alone reads back ``data``.

        The own target, holding the other original copy, is killed (and
        started again); then the volume is detached and deleted, leaving
        nothing on any target but the lost one.
        """
        self.wait_in_sync(volume)
        self.target.kill()
        self.assertSameBytes(data, self.disk(volume))
        self.reopen(self.target)
        self.detach(volume, props, info)
        self.driver.delete_volume(volume)
        self.assertEqual([], self.everything(gone=[lost]))

    def test_a_copy_lost_under_writes_is_made_anew_at_the_next_attach(self):
        volume, writer, lost, other = self.lose_copy(while_attached=True)
        self.retire(lost)
        self.driver.get_volume_stats(refresh=True)
        self.assertEqual({
            health.STATE: health.DEGRADED,
            health.PROBLEM: '1 of its 2 copies out of reach (lost: made '
                            'anew when it is next attached)'}, marks(volume))
        props, info = self.assertMirroredAnew(volume, other,
                                              writer.patterns[1])
        self.assertNewCopyHoldsAll(volume, writer.patterns[1], props, info,
                                   lost)

    def test_a_copy_lost_while_detached_is_made_anew_too(self):
        # Its superblocks say the lost copy is in sync: examine would
        # wait for it, had they not been wiped.
        volume, writer, lost, other = self.lose_copy(while_attached=False)
        self.retire(lost)
        props, info = self.assertMirroredAnew(volume, other,
                                              writer.patterns[0])
        self.detach(volume, props, info)
        self.driver.delete_volume(volume)
        self.assertEqual([], self.everything(gone=[lost]))

    def test_no_target_for_a_lost_copy_fails_the_attach_cleanly(self):
        volume = self.created(vtype=self.replicated(3))
        self.peers['spdk-b'].kill()
        self.retire('spdk-b')
        before = self.everything(gone=['spdk-b'])
        err = self.assertRaises(exception.VolumeBackendAPIException,
                                self.driver.initialize_connection, volume,
                                self.host)
        self.assertIn('needs 1 copies on other storage targets', str(err))
        # No snapshot, copy or export left behind.
        self.assertEqual(before, self.everything(gone=['spdk-b']))

    def test_a_copy_lost_in_use_is_made_empty_and_rebuilt_there(self):
        """A live migration's destination gets an empty new copy.

        The compute target stands in for the destination: the source's
        mirror goes, and the destination's starts from the copy in sync,
        leaving the new one for a rebuild once the guest runs there.
        """
        volume, props, info, writer = self.written()
        lost = self.peer_holding(volume)
        self.peers[lost].kill()
        writer.once(1)  # the mirror fails the copy out, and writes B on
        volume.update({'status': 'in-use'})
        volume.save()
        self.retire(lost, added=self.roomy_peer())
        self.driver.get_volume_stats(refresh=True)
        self.assertIn('lost: made anew when it is next attached',
                      marks(volume)[health.PROBLEM])
        moved = self.driver.initialize_connection(volume, self.host)['data']
        # On the peer with the most room: the new one.
        self.assertEqual(['storage-d', 'storage-target'],
                         sorted(r['target_id'] for r in moved['replicas']))
        self.driver.get_volume_stats(refresh=True)
        self.assertEqual({health.STATE: health.DEGRADED,
                          health.PROBLEM: 'its copies on storage-d (spdk-d) '
                                          'lack writes until its compute '
                                          'host rebuilds them'},
                         marks(volume))

        writer.dd.unexport(volume.id)
        self.connector.disconnect_volume(props, info)
        info = self.connector.connect_volume(moved)
        client = self.connector.client
        state = mirror.status(client, volume.id)
        self.assertEqual((mirror.DEGRADED, 1),
                         (state['state'], len(state['members'])))
        replicas_cmd.readd(client, volume.id)  # where the guest runs
        waiting.wait_for('the mirror online',
                         lambda: mirror.status(client, volume.id)['state'] ==
                         mirror.ONLINE, 120, interval=0.2)
        self.assertSameBytes(writer.patterns[1], self.disk(volume))
        self.assertNewCopyHoldsAll(volume, writer.patterns[1], moved, info,
                                   lost)

    def test_a_copy_lost_unnoticed_in_use_is_made_at_the_next_attach(self):
        """A mirror still counting the lost copy in sync cannot start.

        No I/O since the target died: the mirror never failed the copy
        out, so its superblock still counts it, and SPDK would wait for
        it before starting any mirror. An attach in use makes nothing;
        the next where the volume is attached nowhere else makes it anew.
        """
        volume, props, info, writer = self.written()
        lost = self.peer_holding(volume)
        [other] = set(PEERS) - {lost}
        writer.dd.unexport(volume.id)
        self.peers[lost].kill()
        volume.update({'status': 'in-use'})
        volume.save()
        self.retire(lost)
        before = self.everything(gone=[lost])
        self.assertEqual(['storage-target'],
                         self.copies_exported(volume))
        self.assertEqual(before, self.everything(gone=[lost]))
        self.connector.disconnect_volume(props, info)
        self.driver.terminate_connection(volume, self.host)
        volume.update({'status': 'available'})
        volume.save()
        props, info = self.assertMirroredAnew(volume, other,
                                              writer.patterns[0])
        self.detach(volume, props, info)
        self.driver.delete_volume(volume)
        self.assertEqual([], self.everything(gone=[lost]))

    def test_no_target_for_a_copy_lost_in_use_gets_the_copies_left(self):
        volume = self.created(vtype=self.replicated(3))
        self.peers['spdk-b'].kill()
        self.retire('spdk-b')
        source = objects.VolumeAttachment(
            context=self.ctxt, volume_id=volume.id, attach_status='attached',
            connector=dict(self.host, nqn=self.host['nqn'] + '-source'),
            attached_host='source')
        source.create()
        volume.refresh()
        # No target left for a new copy: rather than fail a live
        # migration, the destination mirrors the two copies left.
        self.assertEqual(['storage-c', 'storage-target'],
                         self.copies_exported(volume))
        # So for an in-use volume whose attachment Cinder did not record
        # (the os-initialize_connection action).
        source.destroy()
        volume.update({'status': 'in-use'})
        volume.save()
        volume.refresh()
        self.assertEqual(['storage-c', 'storage-target'],
                         self.copies_exported(volume))

    def copies_exported(self, volume):
        props = self.driver.initialize_connection(volume, self.host)['data']
        return sorted(r['target_id'] for r in props['replicas'])


class BackupTest(WrittenTestCase):
    """cinder-backup's staged file of a replicated volume, both ways."""

    # cinder-backup's os-brick connector: no spdk_target_id.
    BACKUP_HOST = {'host': 'backup', 'initiator': 'x'}

    def staged(self, volume, status=None):
        """The file initialize_connection stages for cinder-backup."""
        if status:
            volume.status = status
        conn = self.driver.initialize_connection(volume, self.BACKUP_HOST)
        return conn['data']['device_path']

    def assertStagedDisk(self, expected, path, volume):
        """The file is the guest's disk: its size, ``expected`` first."""
        with open(path, 'rb') as src:
            data = src.read()
        self.assertEqual(volume.size * 1024 * MIB, len(data))
        self.assertSameBytes(expected, data[:len(expected)])
        self.assertEqual(bytes(MIB), data[len(expected):][:MIB])

    def test_backup_reads_the_disk_and_restore_writes_every_copy(self):
        volume, props, info, writer = self.written()  # pattern A
        # In use: cinder-backup reads a temporary snapshot.
        snapshot = self.make_snapshot(volume)
        self.driver.create_snapshot(snapshot)
        path = self.driver.initialize_connection_snapshot(
            snapshot, self.BACKUP_HOST)['data']['device_path']
        self.assertStagedDisk(writer.patterns[0], path, volume)
        self.driver.terminate_connection_snapshot(snapshot,
                                                  self.BACKUP_HOST)
        self.driver.delete_snapshot(snapshot)
        writer.stop()
        self.detach(volume, props, info)

        # Detached: its own copy, once the superblocks prove it in sync.
        path = self.staged(volume, 'backing-up')
        self.assertStagedDisk(writer.patterns[0], path, volume)
        self.driver.terminate_connection(volume, self.BACKUP_HOST)
        self.assertFalse(os.path.exists(path))

        # Restore, as cinder-backup does: O_TRUNC, write, detach.
        path = self.staged(volume, 'restoring-backup')
        with open(path, 'wb') as out:
            out.write(writer.patterns[1])
        self.driver.terminate_connection(volume, self.BACKUP_HOST)
        end = superblock.DATA_OFFSET + Writer.WRITTEN
        copies = self.copy_bytes(volume, end)
        self.assertEqual(2, len(copies))
        for tid, data in copies.items():
            self.assertEqual(bytes(superblock.DATA_OFFSET),
                             data[:superblock.DATA_OFFSET], tid)
            self.assertSameBytes(writer.patterns[1],
                                 data[superblock.DATA_OFFSET:], tid)
        volume.status = 'available'
        props, info = self.attach(volume)
        self.assertSameBytes(writer.patterns[1], spdk_dd.read_once(
            self.compute, volume.id, Writer.WRITTEN, writer.workdir))
        self.detach(volume, props, info)
        self.driver.delete_volume(volume)
        self.assertEqual([], self.everything())
        self.assertEqual([], os.listdir(
            self.driver.configuration.spdk_image_staging_dir))

    def test_backup_of_a_stale_own_copy_is_refused(self):
        volume, props, info, writer = self.written()
        # The own target dies under the mirror: its copy misses a write.
        self.target.kill()
        writer.once()
        writer.stop()
        self.connector.disconnect_volume(props, info)
        self.reopen(self.target)
        self.assertRaises(exception.VolumeBackendAPIException,
                          self.staged, volume, 'backing-up')
        self.assertEqual([], os.listdir(
            self.driver.configuration.spdk_image_staging_dir))


class ImageTest(WrittenTestCase, imaging.ImageTestCase):
    """Images into and out of a replicated volume: the guest's disk."""

    def test_an_image_in_and_out_is_the_guests_disk(self):
        data = pattern('I', 3 * MIB)
        volume = self.created(vtype=self.replicated(2))
        self.driver.copy_image_to_volume(self.ctxt, volume, self.glance,
                                         self.add_image(data)['id'])
        end = superblock.DATA_OFFSET + len(data)
        copies = self.copy_bytes(volume, end)
        self.assertEqual(2, len(copies))
        for tid, got in copies.items():
            self.assertEqual(bytes(superblock.DATA_OFFSET),
                             got[:superblock.DATA_OFFSET], tid)
            self.assertSameBytes(data, got[superblock.DATA_OFFSET:], tid)

        props, info = self.attach(volume)
        writer = Writer(self, volume.id)
        self.assertSameBytes(data, writer.dd.read(volume.id, 0, len(data)))
        writer.once()
        writer.stop()
        self.detach(volume, props, info)
        upload = self.empty_image('raw')
        self.driver.copy_volume_to_image(self.ctxt, volume, self.glance,
                                         upload)
        got, size = self.image_bytes(upload['id'], Writer.WRITTEN, 'raw')
        self.assertEqual(volume.size * 1024 * MIB, size)
        self.assertSameBytes(writer.patterns[0], got)
        self.driver.delete_volume(volume)
        self.assertEqual([], self.everything())
        self.assertEqual([], self.staged_files())


class WatchTest(ComputeTestCase):
    """spdk-vhost-replicas watch on the compute host, on real SPDK.

    And what Cinder's users see meanwhile (:mod:`replica_health`).
    """

    def assertProblem(self, problem, volume):
        self.driver.get_volume_stats(refresh=True)
        self.assertEqual({health.STATE: health.DEGRADED,
                          health.PROBLEM: problem}, marks(volume))

    def test_a_returning_copy_is_rebuilt_and_the_watcher_tells(self):
        volume = self.created(vtype=self.replicated(2))
        props, info = self.attach(volume)
        peer = self.peer_holding(volume)
        volume.update({'status': 'in-use'})
        volume.save()
        writer = Writer(self, volume.id)
        self.peers[peer].kill()
        writer.once()  # its copy fails out; the mirror writes on
        out, seen = io.StringIO(), {}
        replicas_cmd.watch_once(self.connector.client, out, seen)
        self.assertIn('%s degraded 1/2 in sync' % volume.id, out.getvalue())
        where = '%s (%s)' % (PEERS[peer][0], peer)
        self.assertProblem('1 of its 2 copies out of reach (not answering: '
                           '%s)' % where, volume)

        # The target back with its export (it kept no config): the NVMe
        # controller reconnects by itself, the watcher adds it back.
        self.restart_peer(peer)
        self.driver.check_for_setup_error()
        self.driver.initialize_connection(volume, self.host)
        # Back, but without the writes it missed: the superblocks say so.
        stale = ('its copies on %s lack writes until its compute host '
                 'rebuilds them' % where)
        self.assertProblem(stale, volume)
        # And whether its store has room for the rebuild.
        filler = spdk_target.fill_lvstore(self.peers[peer].rpc, base.LVS,
                                          leave_mib=4)
        self.driver.get_volume_stats(refresh=True)
        problem = marks(volume)[health.PROBLEM]
        self.assertTrue(problem.startswith(
            stale + '; the copy on %s cannot be rebuilt: lvol store %s there '
            'lacks ' % (where, base.LVS)), problem)
        self.assertGreater(int(re.search(r'lacks (\d+) MiB', problem)[1]), 0)
        self.peers[peer].rpc('bdev_lvol_delete', {'name': filler})
        self.assertProblem(stale, volume)
        client = self.connector.client
        # No guest runs here (the writer is spdk_dd): the watcher leaves
        # the rebuild to the operator's repair. A guest's own watcher adds
        # it by itself (tests/nova/functional/test_live_migration.py).
        replicas_cmd.watch_once(client, out, seen)
        self.assertIn('rebuild waits for the guest to run here (no guest)',
                      out.getvalue().splitlines()[-1])
        replicas_cmd.readd(client, volume.id)
        waiting.wait_for('the watcher to bring the mirror online',
                         lambda: replicas_cmd.watch_once(client, out, seen)
                         or mirror.status(client, volume.id)['state'] ==
                         mirror.ONLINE, 120, interval=0.2)
        replicas_cmd.watch_once(client, out, seen)
        lines = out.getvalue().splitlines()
        self.assertIn('rebuilding', ' '.join(lines))
        self.assertEqual('%s online 2/2 in sync' % volume.id, lines[-1])
        # Nothing changes: nothing more is said.
        replicas_cmd.watch_once(client, out, seen)
        self.assertEqual(lines, out.getvalue().splitlines())
        self.wait_in_sync(volume)

        writer.stop()
        self.detach(volume, props, info)
        self.driver.delete_volume(volume)
        self.assertEqual([], self.everything())


class AwayPeerTest(WrittenTestCase):
    """A peer away: its volumes stay manageable, and catch up after.

    Each peer restarts from its saved config, as its unit does, with
    what it held when it died: the copies a delete missed, the old size
    of an extended one, the hosts a detach could not remove.
    """

    def start_peer(self, name, target_id, size_mib):
        saved = os.path.join(self.useFixture(fixtures.TempDir()).path,
                             '%s.json' % target_id)
        target = self.useFixture(spdk_target.SpdkTarget(
            app='nvmf_tgt', interrupt_mode=True, auto_examine=False,
            name=target_id, json_config=saved))
        target.aio_lvstore(base.LVS, size_mib=size_mib)
        self.configure_peer(name, target, target_id, saved)
        return target

    def restart_peer(self, name):
        self.peers[name].start()

    def admitted(self, volume, name):
        """The host NQNs peer ``name``'s export of the volume admits."""
        nqn = self.driver.replicas.peers[0].exporter.nqn(
            replica_type.replica_name(volume.id))
        return [host['nqn'] for sub in self.peers[name].rpc(
            'nvmf_get_subsystems') if sub['nqn'] == nqn
            for host in sub['hosts']]

    def settled(self):
        """A new 3-copy volume, available as its create left it."""
        volume = self.created(vtype=self.replicated(3))
        volume.update({'status': 'available'})
        volume.save()
        return volume

    def test_a_copy_failed_out_is_snapshotted_attached_and_rebuilt(self):
        volume = self.settled()
        props, info = self.attach(volume)
        writer = Writer(self, volume.id)
        writer.once()
        self.peers['spdk-c'].kill()
        writer.once(1)  # the mirror fails C's copy out, and writes B on
        writer.dd.unexport(volume.id)
        self.detach(volume, props, info)

        # A snapshot, proven sound by B's superblock; an attach (of an
        # evacuated guest) mirrors the two copies left.
        snapshot = self.make_snapshot(volume)
        self.driver.create_snapshot(snapshot)
        props, info = self.attach(volume)
        self.assertEqual(['storage-b', 'storage-target'],
                         sorted(r['target_id'] for r in props['replicas']))
        [raid] = self.compute.rpc('bdev_raid_get_bdevs', {'category': 'all'})
        self.assertEqual(('online', 3, 2), (
            raid['state'], raid['num_base_bdevs'],
            raid['num_base_bdevs_operational']))
        self.assertSameBytes(writer.patterns[1], self.disk(volume))
        self.detach(volume, props, info)

        # Back: the next attach has its copy, rebuilt on the compute host.
        self.restart_peer('spdk-c')
        self.assertEqual([self.host['nqn']], self.admitted(volume, 'spdk-c'))
        self.driver.sweeper.sweep()
        self.assertEqual([], self.admitted(volume, 'spdk-c'))
        props, info = self.attach(volume)
        self.assertEqual(3, len(props['replicas']))
        replicas_cmd.readd(self.connector.client, volume.id)
        waiting.wait_for('the mirror online', lambda: mirror.status(
            self.connector.client, volume.id)['state'] == mirror.ONLINE,
            120, interval=0.2)
        self.assertSameBytes(writer.patterns[1], self.disk(volume))
        self.detach(volume, props, info)
        self.driver.delete_snapshot(snapshot)
        self.driver.delete_volume(volume)
        self.assertEqual([], self.everything())

    def test_two_copies_attach_with_the_one_left(self):
        volume, writer, lost, _other = self.lose_copy(while_attached=True)
        props, info = self.attach(volume)
        self.assertEqual(['storage-target'],
                         [r['target_id'] for r in props['replicas']])
        [raid] = self.compute.rpc('bdev_raid_get_bdevs', {'category': 'all'})
        self.assertEqual(('online', 2, 1), (
            raid['state'], raid['num_base_bdevs'],
            raid['num_base_bdevs_operational']))
        self.assertSameBytes(writer.patterns[1], self.disk(volume))
        self.detach(volume, props, info)
        # Back, seen by a stats report, before any sweep: its copy is
        # still exported to this host (the detaches could not reach
        # it), and the delete removes that export with the copy.
        self.restart_peer(lost)
        self.driver.get_volume_stats(refresh=True)
        self.assertEqual([self.host['nqn']], self.admitted(volume, lost))
        self.driver.delete_volume(volume)
        self.assertEqual([], self.everything())

    def test_extend_and_delete_go_on_and_the_copy_catches_up(self):
        extended, deleted = self.settled(), self.settled()
        self.peers['spdk-c'].kill()
        self.driver.extend_volume(extended, 2)
        extended.update({'size': 2})
        extended.save()
        self.driver.delete_volume(deleted)
        deleted.destroy()
        self.assertEqual([], [item for item in self.everything(
            gone=['spdk-c']) if deleted.id in item[1]])

        self.restart_peer('spdk-c')
        self.assertEqual(['storage-c'], list(self.copies(deleted)))
        self.assertEqual({'storage-b': 2048, 'storage-c': 1024,
                          'storage-target': 2048}, self.sizes(extended))
        with locks.locked(locks.vlock(deleted.id)):
            # Busy (an operation, or a dead member's lock not expired):
            # left for a later sweep, not waited for.
            self.driver.sweeper.sweep()
            self.assertEqual(['storage-c'], list(self.copies(deleted)))
        self.driver.sweeper.sweep()
        self.assertEqual({}, self.copies(deleted))
        self.assertEqual({2048}, set(self.sizes(extended).values()))
        self.driver.delete_volume(extended)
        self.assertEqual([], self.everything())

    def sizes(self, volume):
        """Target id -> the MiB of the guest's disk its copy holds."""
        return {tid: (copy['num_blocks'] * copy['block_size'] -
                      superblock.DATA_OFFSET) // MIB
                for tid, copy in self.copies(volume).items()}

    def test_what_its_own_copy_cannot_prove_is_refused(self):
        # Detached before the peer died: the superblocks count its copy
        # in sync, so no mirror starts without it, and the own copy's
        # superblock alone cannot prove a snapshot sound.
        volume, _writer, lost, _other = self.lose_copy(while_attached=False)
        before = self.everything(gone=[lost])
        err = self.assertRaises(exception.VolumeBackendAPIException,
                                self.driver.initialize_connection, volume,
                                self.host)
        self.assertIn('counts the absent copies', str(err))
        self.assertIn(PEERS[lost][0], str(err))
        err = self.assertRaises(exception.VolumeBackendAPIException,
                                self.driver.create_snapshot,
                                self.make_snapshot(volume))
        self.assertIn('no copy but its own is left', str(err))
        self.assertEqual(before, self.everything(gone=[lost]))
        # Back: the next sweep (or stats report) finds it answers.
        self.restart_peer(lost)
        self.driver.sweeper.sweep()
        self.driver.delete_volume(volume)
        self.assertEqual([], self.everything())


class CompareTest(WrittenTestCase):
    """Copies compared on real SPDK: a silent divergence found, renewed."""

    def test_a_diverged_copy_is_found_then_rebuilt(self):
        volume, props, info, _writer = self.written()
        compare = replica_compare.Compare(self.driver.replicas)
        volume.update({'status': 'in-use'})
        volume.save()
        self.assertRaises(exception.InvalidVolume, compare.report, volume)
        self.detach(volume, props, info)
        volume.update({'status': 'available'})
        volume.save()
        # One block of the other copy changes behind the mirror's back.
        peer = self.peer_holding(volume)
        where = '%s (%s)' % (PEERS[peer][0], peer)
        copy = self.copies(volume)[PEERS[peer][0]]['name']
        behind = spdk_dd.NvmfDd(self.peers[peer],
                                self.useFixture(fixtures.TempDir()).path)
        behind.write(copy, superblock.DATA_OFFSET + 130 * MIB, b'x' * 4096)
        behind.unexport(copy)
        report = compare.report(volume)
        print('compared 2 copies of 1 GiB: %.1f s' % report.seconds)
        self.assertEqual((['storage-target', where], [], 16, [128 * MIB]),
                         (report.copies, report.stale, report.regions,
                          [offset for offset, _d in report.differ]))
        digests = report.differ[0][1]
        self.assertNotEqual(digests['storage-target'], digests[where])

        # The operator trusts the backend's copy: the other is rebuilt.
        self.assertRaises(exception.InvalidInput, compare.renew, volume,
                          'storage-x')
        compare.renew(volume, where)
        self.assertRaises(exception.InvalidInput, compare.renew, volume,
                          'storage-target')
        props, info = self.attach(volume)
        client = self.connector.client
        self.assertEqual(mirror.DEGRADED,
                         mirror.status(client, volume.id)['state'])
        replicas_cmd.readd(client, volume.id)
        waiting.wait_for('the mirror online',
                         lambda: mirror.status(client, volume.id)['state'] ==
                         mirror.ONLINE, 120, interval=0.2)
        self.wait_in_sync(volume)
        self.detach(volume, props, info)
        report = compare.report(volume)
        self.assertEqual(([], []), (report.stale, report.differ))
