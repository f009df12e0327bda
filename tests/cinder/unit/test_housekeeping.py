"""What a second cinder-volume of the cluster must not break.

Sweeps leave a running copy's scratch objects alone (its volume's or
snapshot's lock is held, here by this test as another member would);
a restore whose staged file is on another member's host is refused; a
cluster's reports count every lvol and survey every member's volumes;
a cluster's members reach the target through its agent.
"""

from unittest import mock
import uuid

from cinder import exception
from cinder.volume import configuration
from cinder.volume import driver as cinder_driver
from oslo_config import cfg

from cinder_spdk_vhost import driver as spdk_driver
from cinder_spdk_vhost import housekeeping
from cinder_spdk_vhost import locks
from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import peers
from cinder_spdk_vhost import replica_catchup
from cinder_spdk_vhost import replica_type
from cinder_spdk_vhost import replication
from spdk_vhost_core import exception as rpc_exc
from tests.cinder import base
from tests.cinder.unit import driver_base as dbase

CONF = cfg.CONF
CLUSTER = 'controllers@%s' % base.BACKEND
ETCD = 'etcd3+http://192.0.2.12:2379?api_version=v3'


class SweepTest(dbase.DriverTestCase):

    def leave(self, kind, obj_id):
        """What an interrupted copy of ``obj_id`` leaves: lvol and export."""
        name = lvols.temp_name(kind, obj_id)
        self.fake.call('bdev_lvol_create', {
            'lvs_name': dbase.LVS, 'lvol_name': name, 'size_in_mib': 4,
            'thin_provision': True})
        self.fake.call('nvmf_create_subsystem', {
            'nqn': self.driver.exporter.nqn(lvols.temp_name('dd', obj_id)),
            'allow_any_host': False})
        return name

    def subsystems(self):
        return sorted(self.fake.subsystems)

    def test_what_a_running_copy_uses_waits_for_a_later_round(self):
        running, dead = str(uuid.uuid4()), str(uuid.uuid4())
        kept = self.leave('export', running)
        self.leave('export', dead)
        with locks.locked(locks.vlock(running)):
            self.driver.sweeper.sweep()
            self.assertEqual([kept], self.names())
            self.assertEqual([self.driver.exporter.nqn(
                lvols.temp_name('dd', running))], self.subsystems())
        self.driver.sweeper.sweep()
        self.assertEqual([], self.names())
        self.assertEqual([], self.subsystems())

    def test_a_snapshot_copy_is_known_by_its_snapshot_lock(self):
        snapshot_id = str(uuid.uuid4())
        kept = self.leave('bk', snapshot_id)
        snapshot_name = CONF.snapshot_name_template % snapshot_id
        with locks.locked(locks.slock(snapshot_name)):
            self.driver.sweeper.sweep()
            self.assertEqual([kept], self.names())
        self.driver.sweeper.sweep()
        self.assertEqual([], self.names())

    def test_a_failing_round_is_logged_and_the_next_goes_on(self):
        self.leave('flat', str(uuid.uuid4()))
        self.fake.fail('bdev_lvol_get_lvols', rpc_exc.Timeout)
        self.driver.sweeper.sweep()   # logged, not raised
        self.assertEqual(1, len(self.names()))
        self.driver.sweeper.sweep()
        self.assertEqual([], self.names())

    def test_the_task_runs_only_with_an_interval(self):
        sweeper = housekeeping.Sweeper(None, None, [], None)
        sweeper.start(0)
        self.assertIsNone(sweeper._task)
        sweeper.start(600)
        self.addCleanup(sweeper.stop)
        self.assertIsNotNone(sweeper._task)


class CopyNamesTest(dbase.DriverTestCase):
    """Which lvols on a peer the catch-up takes for a volume's copy."""

    def test_only_a_copy_named_after_a_volume_id(self):
        volume_id = str(uuid.uuid4())
        self.assertEqual(volume_id, replica_type.volume_of(
            replica_type.replica_name(volume_id)))
        for name in ('replica-%s-reverted' % volume_id,
                     'replica-%s' % volume_id.upper(), 'replica-x',
                     'volume-%s' % volume_id, ''):
            self.assertIsNone(replica_type.volume_of(name), name)


class CatchupOwnerTest(dbase.DriverTestCase):
    """Whose volumes' copies the catch-up takes: its backend's, any pool."""

    def test_a_hosts_and_a_clusters_volumes(self):
        volume = self.volume()
        volume.host = base.HOST + '#lvs1'
        volume.cluster_name = CLUSTER + '#lvs1'
        by_host = replica_catchup.Catchup(None, base.HOST)
        by_cluster = replica_catchup.Catchup(None, 'other@x', CLUSTER)
        self.assertTrue(by_host._ours(volume))
        self.assertTrue(by_cluster._ours(volume))
        volume.host = 'other@%s#lvs1' % base.BACKEND
        volume.cluster_name = 'others@%s#lvs1' % base.BACKEND
        self.assertFalse(by_host._ours(volume))
        self.assertFalse(by_cluster._ours(volume))


class AwayTest(dbase.DriverTestCase):
    """A peer that did not answer is not asked again for a while."""

    clusters = 2048  # room for a whole copy of a 1 GiB volume

    def test_away_until_it_answers_or_the_time_is_up(self):
        peer = peers.Peer('spdk-b', peers.section('spdk-b'))
        self.fake.fail('bdev_get_bdevs', rpc_exc.Timeout)
        self.assertRaises(rpc_exc.Timeout, peer.find, 'replica-x')
        self.assertTrue(peer.away)
        later = peer._away_until + 0.1
        with mock.patch('time.monotonic', autospec=True,
                        return_value=later):
            self.assertFalse(peer.away)
        self.fake.fail('bdev_lvol_get_lvols', rpc_exc.Timeout)
        self.assertRaises(rpc_exc.Timeout, peer.copies)
        self.assertTrue(peer.away)
        # The sweep asks it all the same: it answers, and is back.
        self.assertEqual([], peer.copies())
        self.assertFalse(peer.away)

    def test_no_new_copy_is_placed_on_an_away_peer(self):
        """Nor is it asked: a create fails at once, not after retries."""
        peer = peers.Peer('spdk-b', peers.section('spdk-b'))
        replicas = replication.Replicas(self.driver.pools, [peer], 'here')
        self.assertEqual(2, replicas.available())
        self.fake.fail('bdev_lvol_get_lvstores', rpc_exc.TargetUnreachable)
        self.assertEqual(1, replicas.available())
        self.assertTrue(peer.away)
        volume = self.make_volume(vtype=self.make_type(
            extra_specs={'spdk:replicas': '2'}))
        del self.fake.calls[:]
        err = self.assertRaises(exception.VolumeBackendAPIException,
                                replicas.place, volume, {}, None)
        self.assertIn('only 0 of spdk_replica_targets', str(err))
        self.assertEqual([], self.fake.calls)


class RestoreElsewhereTest(dbase.DriverTestCase):

    def test_a_restore_staged_on_another_host_is_refused(self):
        volume = self.volume()
        volume.status = 'restoring-backup'
        err = self.assertRaises(exception.VolumeBackendAPIException,
                                self.driver.backups.unstage_volume,
                                volume, 'restore')
        self.assertIn('spdk_image_staging_dir', str(err))
        # Nothing staged, nothing restored: a backup's end is no error.
        self.driver.backups.unstage_volume(volume, 'backup')


class ClusterTest(dbase.DriverTestCase):

    def clustered(self, **overrides):
        conf = configuration.Configuration(cinder_driver.volume_opts,
                                           config_group=base.BACKEND)
        drv = spdk_driver.SpdkVhostDriver(configuration=conf,
                                          host=base.HOST,
                                          cluster_name=CLUSTER)
        settings = {'spdk_lvstores': list(self.lvstores),
                    'volume_backend_name': base.BACKEND,
                    'spdk_sweep_interval': 0,
                    'spdk_target_id': None,
                    'spdk_saved_config': '',
                    'spdk_agent_url': 'https://192.0.2.11:5261',
                    'spdk_agent_password': 'secret',
                    'spdk_dd_path': 'true'}
        settings.update(overrides)
        lock_url = settings.pop('lock_url', ETCD)
        for name, value in settings.items():
            CONF.set_override(name, value, group=base.BACKEND)
        CONF.set_override('backend_url', lock_url, group='coordination')
        drv.do_setup(self.ctxt)
        return drv

    def test_members_lock_through_a_service_they_share(self):
        for local in ('file:///var/lib/cinder/locks', 'ipc://'):
            err = self.assertRaises(exception.InvalidConfigurationValue,
                                    self.clustered, lock_url=local)
            self.assertIn('[coordination] backend_url', str(err))
            self.assertIn(CLUSTER, str(err))

    def test_a_cluster_locking_through_etcd_is_accepted(self):
        self.assertEqual(CLUSTER, self.clustered().cluster_name)

    def test_members_reach_the_target_through_its_agent(self):
        err = self.assertRaises(exception.InvalidConfigurationValue,
                                self.clustered, spdk_agent_url=None)
        self.assertIn('spdk_agent_url', str(err))
        self.assertIn(CLUSTER, str(err))

    def test_every_member_names_the_target_alike(self):
        self.assertEqual('agent:192.0.2.11:5261',
                         self.clustered().target_id)

    def test_reports_count_everything_and_survey_the_cluster(self):
        drv = self.clustered()
        self.assertEqual(1, drv.pools.tally.resync_every)
        self.assertEqual({'cluster_name': CLUSTER}, drv.health.filters)
        self.assertEqual({'host': base.HOST}, self.driver.health.filters)
