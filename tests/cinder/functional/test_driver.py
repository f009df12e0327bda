"""The driver's whole lifecycle against a real SPDK target."""

import time

from cinder import exception
import fixtures

from cinder_spdk_vhost import driver as spdk_driver
from cinder_spdk_vhost import lvols
from testbed import spdk_dd
from tests.cinder import base

NQN = 'nqn.2014-08.org.nvmexpress:uuid:1b4e28ba-2fa1-11d2-883f-00163e00000%d'
HOST_NQN = NQN % 1
OTHER_NQN = NQN % 2
REMOTE = {'host': 'compute1', 'nqn': HOST_NQN, 'spdk_target_id': 'compute1'}
MIB = 1024 * 1024


class DriverTestCase(base.TargetTestCase):

    def setUp(self):
        super().setUp()
        self.driver = self.make_driver()

    def bdev(self, name):
        return self.rpc('bdev_get_bdevs', {'name': name})[0]

    def lvol_info(self, name):
        return self.bdev(name)['driver_specific']['lvol']

    def limits(self, name):
        return self.bdev(name)['assigned_rate_limits']

    def size_mib(self, name):
        bdev = self.bdev(name)
        return bdev['num_blocks'] * bdev['block_size'] // MIB

    def alias(self, obj):
        return '%s/%s' % (base.LVS, obj.name)

    def created(self, size=1, vtype=None):
        volume = self.make_volume(size=size, vtype=vtype)
        self.driver.create_volume(volume)
        return volume


class SetupTest(DriverTestCase):

    def test_unreachable_target(self):
        err = self.assertRaises(
            exception.VolumeDriverException, self.make_driver,
            spdk_rpc_socket=self.target.socket_path + '.missing')
        self.assertIn('unreachable', str(err))

    def test_missing_lvstore(self):
        err = self.assertRaises(exception.VolumeDriverException,
                                self.make_driver, spdk_lvstores=['nope'])
        self.assertIn('lvol store nope', str(err))

    def test_transport_created_once(self):
        self.make_driver()
        transports = self.rpc('nvmf_get_transports')
        self.assertEqual(['TCP'], [t['trtype'] for t in transports])

    def test_stats(self):
        self.created(size=3)
        stats = self.driver.get_volume_stats(refresh=True)
        self.assertEqual('vhost-user', stats['storage_protocol'])
        self.assertEqual(spdk_driver.VERSION, stats['driver_version'])
        pool, = stats['pools']
        self.assertEqual(base.LVS, pool['pool_name'])
        self.assertEqual(3.0, pool['provisioned_capacity_gb'])
        store = self.rpc('bdev_lvol_get_lvstores', {'lvs_name': base.LVS})[0]
        self.assertEqual(
            round(store['free_clusters'] * store['cluster_size'] /
                  lvols.GIB, 2), pool['free_capacity_gb'])
        self.assertTrue(pool['thin_provisioning_support'])
        self.assertTrue(pool['QoS_support'])
        self.assertTrue(pool['multiattach'])


class VolumeTest(DriverTestCase):

    def test_create_thin_named_after_volume(self):
        volume = self.created(size=2)
        info = self.lvol_info(self.alias(volume))
        self.assertTrue(info['thin_provision'])
        self.assertEqual(2048, self.size_mib(self.alias(volume)))

    def test_create_with_backend_qos_rounds(self):
        vtype = self.make_type({'total_iops_sec': '2600',
                                'total_bytes_sec': str(100 * MIB),
                                'write_bytes_sec': '1000'})
        volume = self.created(vtype=vtype)
        self.assertEqual({'rw_ios_per_sec': 3000, 'rw_mbytes_per_sec': 100,
                          'r_mbytes_per_sec': 0, 'w_mbytes_per_sec': 1},
                         self.limits(self.alias(volume)))

    def test_backend_qos_holds_io_to_the_limit(self):
        """SPDK's own I/O counters show the limit in force, not just set.

        spdk_dd reads the volume over NVMe/TCP as fast as it can: the
        reads SPDK counted on the lvol over the whole copy (its start-up
        included, which only lowers the rate) stay within the limit.
        """
        vtype = self.make_type({'total_iops_sec': '1000'})
        volume = self.created(vtype=vtype)
        alias = self.alias(volume)
        ops = 3072   # 4 KiB reads: at least three seconds at 1,000/s

        def reads():
            stats = self.rpc('bdev_get_iostat', {'names': [alias]})
            return stats['bdevs'][0]['num_read_ops']
        before = reads()
        started = time.monotonic()
        spdk_dd.read_once(self.target, alias, ops * 4096,
                          self.useFixture(fixtures.TempDir()).path)
        elapsed = time.monotonic() - started
        done = reads() - before
        self.assertGreaterEqual(done, ops)
        self.assertLessEqual(done / elapsed, 1000 * 1.05)

    def test_front_end_qos_not_applied_in_backend(self):
        vtype = self.make_type({'read_iops_sec': '500'},
                               consumer='front-end')
        volume = self.created(vtype=vtype)
        self.assertEqual(0, self.limits(self.alias(volume))['rw_ios_per_sec'])

    def test_unsupported_qos_key_refused_by_name(self):
        vtype = self.make_type({'read_iops_sec': '500'}, consumer='both')
        volume = self.make_volume(vtype=vtype)
        err = self.assertRaises(exception.InvalidQoSSpecs,
                                self.driver.create_volume, volume)
        self.assertIn('read_iops_sec', str(err))
        self.assertEqual([], self.lvol_names())

    def test_delete_is_idempotent(self):
        volume = self.created()
        self.driver.delete_volume(volume)
        self.driver.delete_volume(volume)
        self.assertEqual([], self.lvol_names())

    def test_delete_refused_while_vhost_exported(self):
        """A local attachment: the connector's layer claims the lvol."""
        volume = self.created()
        self.rpc('bdev_raid_create', {
            'name': volume.id, 'raid_level': 'raid0', 'strip_size_kb': 4,
            'base_bdevs': [self.alias(volume)]})
        self.addCleanup(self.target.call, 'bdev_raid_delete',
                        {'name': volume.id})
        self.rpc('vhost_create_blk_controller',
                 {'ctrlr': 'vhost-' + volume.id, 'dev_name': volume.id})
        self.addCleanup(self.target.call, 'vhost_delete_controller',
                        {'ctrlr': 'vhost-' + volume.id})
        self.assertRaises(exception.VolumeIsBusy,
                          self.driver.delete_volume, volume)
        self.assertEqual([volume.name], self.lvol_names())

    def test_delete_refused_under_a_controller_without_layer(self):
        """An older attachment: the controller opened the lvol itself.

        It does not claim the lvol, and SPDK would delete it from under
        the guest: the driver finds the controller by its name.
        """
        volume = self.created()
        self.rpc('vhost_create_blk_controller',
                 {'ctrlr': 'vhost-' + volume.id,
                  'dev_name': self.alias(volume)})
        self.addCleanup(self.target.call, 'vhost_delete_controller',
                        {'ctrlr': 'vhost-' + volume.id})
        self.assertRaises(exception.VolumeIsBusy,
                          self.driver.delete_volume, volume)
        self.assertEqual([volume.name], self.lvol_names())

    def test_delete_refused_while_nvmf_exported(self):
        volume = self.created()
        self.driver.initialize_connection(volume, REMOTE)
        self.assertRaises(exception.VolumeIsBusy,
                          self.driver.delete_volume, volume)
        self.driver.terminate_connection(volume, REMOTE)
        self.driver.delete_volume(volume)
        self.assertEqual([], self.lvol_names())

    def test_extend_updates_per_gb_qos_on_idle_lvol(self):
        vtype = self.make_type({'total_iops_sec_per_gb': '1000'})
        volume = self.created(size=2, vtype=vtype)
        self.assertEqual(2000, self.limits(self.alias(volume))[
            'rw_ios_per_sec'])
        self.driver.extend_volume(volume, 5)
        self.assertEqual(5120, self.size_mib(self.alias(volume)))
        # SPDK refuses the change with EAGAIN on an idle lvol: the driver
        # must still converge, and leave no helper export behind.
        self.assertEqual(5000, self.limits(self.alias(volume))[
            'rw_ios_per_sec'])
        self.assertEqual([], self.subsystems())

    def test_retype_changes_qos_in_place(self):
        old = self.make_type({'total_iops_sec': '4000'})
        new = self.make_type({'read_bytes_sec': str(20 * MIB)})
        volume = self.created(vtype=old)
        host = {'host': base.HOST + '#' + base.LVS}
        self.assertEqual((True, None), self.driver.retype(
            self.ctxt, volume, new, {}, host))
        self.assertEqual({'rw_ios_per_sec': 0, 'rw_mbytes_per_sec': 0,
                          'r_mbytes_per_sec': 20, 'w_mbytes_per_sec': 0},
                         self.limits(self.alias(volume)))

    def test_retype_to_other_backend_needs_migration(self):
        volume = self.created()
        self.assertEqual((False, None), self.driver.retype(
            self.ctxt, volume, self.make_type(), {},
            {'host': 'other@spdk#' + base.LVS}))

    def test_manage_and_unmanage(self):
        self.rpc('bdev_lvol_create', {'lvol_name': 'legacy',
                                      'size_in_mib': 1500,
                                      'lvs_name': base.LVS,
                                      'thin_provision': True})
        ref = {'source-name': base.LVS + '/legacy'}
        volume = self.make_volume(size=1)
        self.assertEqual(2, self.driver.manage_existing_get_size(volume, ref))
        volume.size = 2
        self.driver.manage_existing(volume, ref)
        self.assertEqual([volume.name], self.lvol_names())
        self.assertEqual(2048, self.size_mib(self.alias(volume)))
        self.driver.unmanage(volume)
        self.assertEqual(['unmanaged-' + volume.name], self.lvol_names())

    def test_manage_refuses_bad_refs(self):
        volume = self.make_volume()
        for ref in ({'source-name': 'nope'}, {'x': 1},
                    {'source-id': '00000000-0000-0000-0000-000000000000'}):
            self.assertRaises(exception.ManageExistingInvalidReference,
                              self.driver.manage_existing_get_size,
                              volume, ref)


class SnapshotCloneTest(DriverTestCase):

    def test_volume_from_snapshot_is_a_thin_clone(self):
        volume = self.created()
        snapshot = self.make_snapshot(volume)
        self.driver.create_snapshot(snapshot)
        clone = self.make_volume(size=3)
        self.driver.create_volume_from_snapshot(clone, snapshot)
        info = self.lvol_info(self.alias(clone))
        self.assertTrue(info['clone'])
        self.assertEqual(snapshot.name, info['base_snapshot'])
        self.assertEqual(0, info['num_allocated_clusters'])
        self.assertEqual(3072, self.size_mib(self.alias(clone)))

        # Two clones (the source and the new volume): kept for them,
        # marked deleted, not inflated; gone with the second-last.
        self.driver.delete_snapshot(snapshot)
        self.driver.delete_volume(clone)
        self.driver.delete_snapshot(snapshot)
        self.assertEqual([volume.name], self.lvol_names())

    def test_cloned_volume_hidden_snapshot_goes_with_last_user(self):
        source = self.created()
        clone = self.make_volume(size=2)
        self.driver.create_cloned_volume(clone, source)
        hidden = lvols.hidden_snapshot_name(clone.id)
        self.assertEqual(sorted([source.name, clone.name, hidden]),
                         self.lvol_names())
        self.assertEqual(0, self.lvol_info(self.alias(clone))[
            'num_allocated_clusters'])
        self.driver.delete_volume(clone)
        self.assertEqual([source.name], self.lvol_names())

    def test_cloned_volume_outlives_its_source(self):
        source = self.created()
        clone = self.make_volume()
        self.driver.create_cloned_volume(clone, source)
        self.driver.delete_volume(source)
        self.assertEqual([clone.name], self.lvol_names())
        self.driver.delete_volume(clone)
        self.assertEqual([], self.lvol_names())

    def test_revert_to_snapshot(self):
        vtype = self.make_type({'total_iops_sec': '2000'})
        volume = self.created(vtype=vtype)
        snapshot = self.make_snapshot(volume)
        self.driver.create_snapshot(snapshot)
        before = self.bdev(self.alias(volume))['name']
        self.driver.revert_to_snapshot(self.ctxt, volume, snapshot)
        after = self.bdev(self.alias(volume))
        self.assertNotEqual(before, after['name'])
        self.assertEqual(snapshot.name,
                         after['driver_specific']['lvol']['base_snapshot'])
        self.assertEqual(2000, after['assigned_rate_limits'][
            'rw_ios_per_sec'])
        self.assertEqual(sorted([volume.name, snapshot.name]),
                         self.lvol_names())


class ConnectionTest(DriverTestCase):

    def subsystem(self, volume):
        nqn = 'nqn.2016-06.io.spdk:cinder:' + volume.name
        return self.rpc('nvmf_get_subsystems', {'nqn': nqn})[0]

    def test_local_when_same_target(self):
        volume = self.created()
        info = self.driver.initialize_connection(
            volume, {'spdk_target_id': 'storage-target', 'host': 'h'})
        self.assertEqual('spdk_vhost', info['driver_volume_type'])
        data = info['data']
        self.assertEqual('local', data['transport'])
        self.assertEqual(self.alias(volume), data['bdev'])
        self.assertEqual(self.bdev(self.alias(volume))['uuid'],
                         data['lvol_uuid'])
        self.assertEqual(4096, data['block_size'])
        self.assertEqual('rw', data['access_mode'])
        self.assertEqual([], self.subsystems())
        self.driver.terminate_connection(
            volume, {'spdk_target_id': 'storage-target'})

    def test_nvmf_subsystem_admits_only_the_host(self):
        volume = self.created()
        port = str(self.driver.configuration.spdk_nvmf_port)
        data = self.driver.initialize_connection(volume, REMOTE)['data']
        self.assertEqual({'transport': 'tcp', 'traddr': '127.0.0.1',
                          'trsvcid': port, 'adrfam': 'ipv4', 'ns_id': 1,
                          'host_nqn': HOST_NQN},
                         {k: data[k] for k in ('transport', 'traddr',
                                               'trsvcid', 'adrfam', 'ns_id',
                                               'host_nqn')})
        sub = self.subsystem(volume)
        self.assertEqual(data['nqn'], sub['nqn'])
        self.assertFalse(sub['allow_any_host'])
        self.assertEqual([HOST_NQN], [h['nqn'] for h in sub['hosts']])
        self.assertEqual(data['lvol_uuid'],
                         sub['namespaces'][0]['bdev_name'])

    def test_second_host_then_detach_one_by_one(self):
        volume = self.created()
        self.driver.initialize_connection(volume, REMOTE)
        self.driver.initialize_connection(volume, REMOTE)
        other = dict(REMOTE, nqn=OTHER_NQN)
        self.driver.initialize_connection(volume, other)
        self.assertEqual(sorted([HOST_NQN, OTHER_NQN]), sorted(
            h['nqn'] for h in self.subsystem(volume)['hosts']))
        self.driver.terminate_connection(volume, REMOTE)
        self.assertEqual([OTHER_NQN], [
            h['nqn'] for h in self.subsystem(volume)['hosts']])
        self.driver.terminate_connection(volume, other)
        self.assertEqual([], self.subsystems())
        self.driver.terminate_connection(volume, other)

    def test_force_detach_removes_everything(self):
        volume = self.created()
        self.driver.initialize_connection(volume, REMOTE)
        self.driver.terminate_connection(volume, None, force=True)
        self.assertEqual([], self.subsystems())

    def test_connector_without_nqn(self):
        volume = self.created()
        self.assertRaises(exception.InvalidConnectorException,
                          self.driver.initialize_connection, volume,
                          {'host': 'compute1'})
        self.assertEqual([], self.subsystems())

    def test_read_only_volume(self):
        volume = self.created()
        volume.admin_metadata = {'readonly': 'True'}
        data = self.driver.initialize_connection(volume, REMOTE)['data']
        self.assertEqual('ro', data['access_mode'])
