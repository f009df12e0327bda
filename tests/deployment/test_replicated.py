"""Replicated volumes through the real Cinder API and scheduler.

The deployment's backend keeps second copies on its replica target (an
idle ``nvmf_tgt``, ``spdk_replica_targets``). A tenant's volume type
with ``spdk:replicas`` = 2 gets a copy on each target, scheduled by the
backend's ``spdk_max_replicas``; extend reaches both copies, a volume
made from a snapshot gets both copies too, cinder-backup backs up and
restores the guest's disk (not a copy's bytes), and delete leaves
nothing anywhere.
"""

import os
import subprocess
import sys

from cinder_spdk_vhost import copies_cmd
from cinder_spdk_vhost import replica_health as health
from cinder_spdk_vhost import superblock
from testbed import waiting
from tests.deployment import base
from tests.deployment import cinder_conf
from tests.deployment import deployment
from tests.deployment import test_backup

QOS = {'total_iops_sec': '6000'}
GIB = 1024 ** 3
# The compute host's RAID superblock and its data offset, in each copy
# (the test lvstores have 1 MiB clusters: no rounding).
ROOM = superblock.DATA_OFFSET
LENGTH = test_backup.LENGTH
# What an operator sets on a replicated type: the copies, and a filter
# so the scheduler only picks a backend that can hold them now.
TWO_COPIES = {'spdk:replicas': '2', 'capabilities:spdk_max_replicas': '>= 2'}
THREE_COPIES = {'spdk:replicas': '3',
                'capabilities:spdk_max_replicas': '>= 3'}


class TestReplicated(test_backup.Backups, base.DeploymentTestCase):

    def replica_rpc(self, method, params=None):
        return self.deployment.replica_target.rpc(method, params)

    def copy_of(self, volume):
        """The volume's lvol bdev on the replica target, or None."""
        name = 'replica-%s' % volume.id
        for lvol in self.replica_rpc('bdev_lvol_get_lvols', {
                'lvs_name': deployment.REPLICA_LVSTORE}):
            if lvol['name'] == name:
                return self.replica_rpc('bdev_get_bdevs',
                                        {'name': lvol['uuid']})[0]
        return None

    def size(self, bdev):
        return bdev['num_blocks'] * bdev['block_size']

    def test_two_copies_through_the_api(self):
        pools = self.admin_client().pools.list(detailed=True)
        self.assertEqual({2}, {getattr(p, 'spdk_max_replicas', None)
                               for p in pools})
        vtype = self.make_type(qos=QOS, extra_specs=TWO_COPIES)
        vol = self.create_volume(1, volume_type=vtype.id)
        own = self.lvol('volume-%s' % vol.id)
        copy = self.copy_of(vol)
        self.assertIsNotNone(copy, 'no copy on the replica target')
        # Each copy holds the volume and the compute host's superblock.
        for bdev in (own, copy):
            self.assertEqual(GIB + ROOM, self.size(bdev))
            self.assertEqual(6000, bdev['assigned_rate_limits'][
                'rw_ios_per_sec'])

        self.cinder.volumes.extend(vol, 2)
        self.wait_status(self.cinder.volumes, vol.id, 'available')
        self.assertEqual(2 * GIB + ROOM, self.size(self.copy_of(vol)))
        self.assertEqual(2 * GIB + ROOM,
                         self.size(self.lvol('volume-%s' % vol.id)))

        # A snapshot is its own copy's; a volume made from it (of the
        # snapshot's type, as Cinder's API has it) gets both copies from
        # that one snapshot.
        snap = self.create_snapshot(vol.id)
        clone = self.create_volume(2, snapshot_id=snap.id)
        self.assertEqual(2 * GIB + ROOM, self.size(self.copy_of(clone)))

        self.delete_volume(clone.id)
        self.delete_snapshot(snap.id)
        self.delete_volume(vol.id)
        self.assertIsNone(self.copy_of(vol))
        self.assertIsNone(self.copy_of(clone))
        self.assertEqual([],
                         self.exported(self.deployment.replica_target))

    def test_backup_and_restore_of_two_copies(self):
        vtype = self.make_type(extra_specs=TWO_COPIES)
        vol = self.create_volume(1, volume_type=vtype.id)
        data = os.urandom(LENGTH)
        # The guest's first MiB, as a compute host's mirror writes it:
        # in each copy, after the superblock's room.
        self.write_copies(vol, data)
        full = self.backup(vol)
        # Restored (Cinder's new volumes get the default type: onto one
        # of the replicated type) where its copies hold other data.
        restored = self.create_volume(1, volume_type=vtype.id)
        self.write_copies(restored, os.urandom(LENGTH), LENGTH)
        self.restore(full, restored)
        wanted = bytes(ROOM) + data + bytes(LENGTH)
        self.assertEqual({'own': wanted, 'copy': wanted},
                         self.read_copies(restored, len(wanted)))
        self._delete_backups(full)

    def test_a_copy_out_of_reach_shows_in_the_volume_metadata(self):
        vtype = self.make_type(extra_specs=TWO_COPIES)
        vol = self.create_volume(1, volume_type=vtype.id)
        degraded = {health.STATE: health.DEGRADED}
        dep = self.deployment
        node = (dep.replica_target, dep.replica_agent)
        dep.kill_storage_node(*node)
        try:
            meta = self.wait_metadata(vol.id, health.STATE)
        finally:
            dep.start_storage_node(*node)
        problem = '1 of its 2 copies out of reach (not answering: %s (%s))' % (
            deployment.REPLICA_TARGET_ID, cinder_conf.REPLICA_SECTION)
        self.assertEqual(dict(degraded, **{health.PROBLEM: problem}), meta)
        # The operator's list of degraded volumes: a metadata filter.
        admin = self.admin_client()
        self.assertEqual([vol.id], [v.id for v in admin.volumes.list(
            search_opts={'all_tenants': 1, 'metadata': degraded})])
        # Back, and never written while away: whole again.
        self.assertEqual({}, self.wait_metadata(vol.id, None))
        self.delete_volume(vol.id)

    def wait_metadata(self, volume_id, key):
        """The volume's metadata once ``key`` is in it (None: once empty).

        The volume service looks at every stats report.
        """
        seen = []

        def reached():
            meta = self.cinder.volumes.get(volume_id).metadata
            seen[:] = [meta]
            # A tuple: an empty metadata is what is waited for too.
            return (meta,) if (key in meta if key else not meta) else None
        [meta] = waiting.wait_for(
            'volume %s metadata with %s' % (volume_id, key or 'nothing'),
            reached, base.TIMEOUT, on_timeout=lambda: 'metadata: %s' % seen)
        return meta

    def _copies(self, volume):
        """name -> (lvol alias, target) of each of the volume's copies."""
        return {'own': ('%s/volume-%s' % (base.LVS, volume.id), None),
                'copy': ('%s/replica-%s' % (deployment.REPLICA_LVSTORE,
                                            volume.id),
                         self.deployment.replica_target)}

    def write_copies(self, volume, data, offset=0):
        for alias, target in self._copies(volume).values():
            self.dd(alias, ROOM + offset, data=data, target=target)

    def read_copies(self, volume, length):
        return {name: self.dd(alias, 0, length, target=target)
                for name, (alias, target) in self._copies(volume).items()}

    def copies_command(self, *argv):
        """``spdk-vhost-copies`` where cinder-volume runs, with its conf."""
        done = subprocess.run(
            [sys.executable, '-m', copies_cmd.__name__, '--config-file',
             self.deployment.conf_path, '--backend', cinder_conf.BACKEND] +
            list(argv), capture_output=True, text=True, timeout=600)
        return done.returncode, done.stdout + done.stderr

    def test_copies_compared_by_the_operators_command(self):
        vtype = self.make_type(extra_specs=TWO_COPIES)
        vol = self.create_volume(1, volume_type=vtype.id)
        self.write_copies(vol, os.urandom(LENGTH))
        code, said = self.copies_command('compare', vol.id)
        self.assertEqual(0, code, said)
        self.assertIn('16 regions of 64 MiB compared, 0 differ\n', said)
        print('spdk-vhost-copies compare, 2 copies of 1 GiB: %s'
              % said.splitlines()[-1])

        # One block of the replica target's copy changes behind Cinder.
        alias, target = self._copies(vol)['copy']
        self.dd(alias, ROOM + 130 * 1024 ** 2, data=os.urandom(4096),
                target=target)
        code, said = self.copies_command('compare', vol.id)
        self.assertEqual(1, code, said)
        self.assertIn('1 differ\n  at 128 MiB: ', said)
        # Never attached: no copy is known sound, none is renewed.
        code, said = self.copies_command('renew', vol.id, '--copy',
                                         deployment.TARGET_ID)
        self.assertEqual((3, True), (code, 'never attached' in said), said)
        self.delete_volume(vol.id)

    def test_more_copies_than_targets_never_schedules(self):
        vtype = self.make_type(extra_specs=THREE_COPIES)
        vol = self.create_volume(1, status='error', volume_type=vtype.id)
        self.assertIsNone(getattr(vol, 'os-vol-host-attr:host'))
        self.assertIsNone(self.copy_of(vol))
