"""Every public driver method on its happy path, against FakeSpdk.

Fast companions of tests/cinder/functional/test_driver.py: they check
what the driver asks of the target, the functional tests check that real SPDK
does what is asked.
"""

from unittest import mock

from cinder import exception
from cinder import objects
from cinder.objects import fields

from cinder_spdk_vhost import driver as spdk_driver
from cinder_spdk_vhost import export
from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import pools
from spdk_vhost_core import exception as rpc_exc
from tests.cinder import base
from tests.cinder.unit import driver_base as dbase

MIB = dbase.MIB
IOPS = {'total_iops_sec': '2000'}


class SetupTest(dbase.DriverTestCase):

    def test_do_setup_wires_client_exporter_and_target_id(self):
        self.assertIs(self.fake, self.driver.client)
        self.assertIs(self.fake, self.driver.exporter.client)
        self.assertEqual(dbase.TARGET_ID, self.driver.target_id)

    def test_default_target_id_from_rpc_address(self):
        drv = self.make_driver(spdk_target_id=None,
                               spdk_rpc_address='192.0.2.7',
                               spdk_rpc_port=5260)
        self.assertEqual('tcp:192.0.2.7:5260', drv.target_id)

    def test_check_creates_transport_once(self):
        self.make_driver()
        self.assertEqual(['TCP'], sorted(self.fake.transports))
        creates = [c for c in self.fake.calls
                   if c[0] == 'nvmf_create_transport']
        self.assertEqual(2, len(creates))

    def test_check_sweeps_leftovers_of_interrupted_runs(self):
        src = self.volume()
        clone = self.make_volume()
        self.driver.create_cloned_volume(clone, src)
        self.driver.delete_volume(clone)
        # A hidden snapshot with one user, and scratch lvols and an aio
        # bdev of an interrupted image transfer.
        self.fake.bdev_lvol_snapshot(self.alias(src), 'clonesnap-x')
        tmp = lvols.temp_name('import', src.id)
        self.fake.bdev_lvol_create(tmp, 4, lvs_name=dbase.LVS)
        self.fake.aio['tmp-img-x'] = {'filename': '/nonexistent',
                                      'size': MIB, 'block_size': 512,
                                      'readonly': True}
        self.make_driver()
        self.assertEqual([src.name], self.names())
        self.assertEqual({}, self.fake.aio)


class VolumeTest(dbase.DriverTestCase):

    def test_create_thin_named_after_volume(self):
        volume = self.volume(size=2)
        lvol = self.fake.lvol(self.alias(volume))
        self.assertTrue(lvol['thin'])
        self.assertEqual(2048 * MIB, lvol['size'])
        self.assertEqual(dict.fromkeys(lvol['qos'], 0), lvol['qos'])

    def test_create_thick_with_clear_method(self):
        drv = self.make_driver(spdk_thin_provision=False,
                               spdk_lvol_clear_method='write_zeroes')
        volume = self.make_volume()
        drv.create_volume(volume)
        self.assertFalse(self.fake.lvol(self.alias(volume))['thin'])
        method, params = [c for c in self.fake.calls
                          if c[0] == 'bdev_lvol_create'][-1]
        self.assertEqual('write_zeroes', params['clear_method'])

    def test_create_in_pool_of_host(self):
        self.lvstores = (dbase.LVS, 'lvs1')
        drv = self.reset()
        volume = self.make_volume(host=base.HOST + '#lvs1')
        drv.create_volume(volume)
        self.assertEqual('lvs1', self.fake.lvol('lvs1/' + volume.name)['lvs'])

    def test_create_with_qos(self):
        volume = self.volume(vtype=self.make_type(IOPS))
        self.assertEqual(2000, self.fake.lvol(
            self.alias(volume))['qos']['rw_ios_per_sec'])

    def test_delete(self):
        volume = self.volume()
        self.driver.delete_volume(volume)
        self.assertEqual([], self.names())

    def test_delete_missing_is_success(self):
        self.driver.delete_volume(self.make_volume())
        self.assertEqual([], self.names())

    def test_delete_exported_is_busy(self):
        volume = self.volume()
        self.fake.add_controller('vhost.0', self.alias(volume))
        self.assertRaises(exception.VolumeIsBusy,
                          self.driver.delete_volume, volume)
        self.assertEqual([volume.name], self.names())

    def test_extend_regrows_per_gb_qos(self):
        vtype = self.make_type({'total_iops_sec_per_gb': '1000'})
        volume = self.volume(vtype=vtype)
        self.driver.extend_volume(volume, 3)
        lvol = self.fake.lvol(self.alias(volume))
        self.assertEqual(3072 * MIB, lvol['size'])
        # Changed on an idle lvol: done through a private, removed export.
        self.assertEqual(3000, lvol['qos']['rw_ios_per_sec'])
        self.assertEqual({}, self.fake.subsystems)


class SnapshotTest(dbase.DriverTestCase):

    def test_create_and_delete_snapshot(self):
        volume = self.volume()
        snap = self.snapshot(volume)
        self.assertEqual(self.alias(snap), self.fake.state()['lvols'][
            self.alias(volume)]['parent'])
        self.driver.delete_snapshot(snap)
        self.assertEqual([volume.name], self.names())

    def test_delete_missing_snapshot_is_success(self):
        volume = self.volume()
        self.driver.delete_snapshot(self.make_snapshot(volume))
        self.assertEqual([volume.name], self.names())

    def marker(self, snap):
        return lvols.retired_marker_name(
            self.fake.lvol(self.alias(snap))['uuid'])

    def test_snapshot_with_clones_is_marked_deleted_at_once(self):
        volume, snap, clones = self.snapshot_with_clones()
        marker = self.marker(snap)
        with self.assertLogs(pools.LOG.logger, 'INFO') as logs:
            self.driver.delete_snapshot(snap)
        self.assertIn('marked deleted by %s/%s' % (dbase.LVS, marker),
                      logs.output[0])
        self.assertEqual(sorted([volume.name, snap.name, marker] +
                                [c.name for c in clones]), self.names())
        # The snapshot is untouched: every clone still reads it.
        for lvol in [volume] + clones:
            self.assertEqual(self.alias(snap), self.fake.state()[
                'lvols'][self.alias(lvol)]['parent'])
        # A retry (the answer was lost) changes nothing.
        before = self.fake.state()
        self.driver.delete_snapshot(snap)
        self.assertEqual(before, self.fake.state())

    def test_deleted_snapshot_goes_with_its_second_last_dependent(self):
        volume, snap, clones = self.snapshot_with_clones()
        self.driver.delete_snapshot(snap)
        self.driver.delete_volume(clones[0])
        self.assertEqual(4, len(self.names()))
        # Cinder's cascade: the volume goes after its snapshots.
        self.driver.delete_volume(volume)
        self.assertEqual([clones[1].name], self.names())
        self.assertIsNone(self.fake.state()['lvols'][
            self.alias(clones[1])]['parent'])
        self.driver.delete_volume(clones[1])
        self.assertEqual([], self.names())

    def test_spdk_refusing_the_delete_marks_the_snapshot(self):
        volume = self.volume()
        snap = self.snapshot(volume)
        self.fake.fail('bdev_lvol_delete', rpc_exc.NotPermitted)
        self.driver.delete_snapshot(snap)
        self.assertEqual(sorted([volume.name, snap.name, self.marker(snap)]),
                         self.names())

    def test_start_sweeps_snapshots_no_longer_needed(self):
        volume, snap, clones = self.snapshot_with_clones()
        self.driver.delete_snapshot(snap)
        # Dependents deleted behind the driver's back (or while
        # cinder-volume was down).
        for clone in clones:
            self.fake.bdev_lvol_delete(self.alias(clone))
        self.make_driver()
        self.assertEqual([volume.name], self.names())
        # A hidden snapshot without any clone, a marker of nothing.
        other = self.volume()
        hidden = lvols.HIDDEN_PREFIX + 'orphan'
        self.fake.bdev_lvol_snapshot(self.alias(other), hidden)
        self.fake.bdev_lvol_delete(self.alias(other))
        marker = lvols.retired_marker_name('gone')
        self.fake.bdev_lvol_create(marker, 1, lvs_name=dbase.LVS)
        self.assertEqual(sorted([hidden, marker, volume.name]), self.names())
        self.make_driver()
        self.assertEqual([volume.name], self.names())

    def test_volume_from_snapshot_is_a_grown_clone(self):
        snap = self.snapshot(self.volume())
        clone = self.make_volume(size=2, vtype=self.make_type(IOPS))
        self.driver.create_volume_from_snapshot(clone, snap)
        state = self.fake.state()['lvols'][self.alias(clone)]
        self.assertEqual(self.alias(snap), state['parent'])
        self.assertEqual(2048 * MIB, state['size'])
        self.assertEqual(2000, state['qos']['rw_ios_per_sec'])

    def test_cloned_volume_and_its_hidden_snapshot(self):
        src = self.volume()
        clone = self.make_volume()
        self.driver.create_cloned_volume(clone, src)
        hidden = lvols.hidden_snapshot_name(clone.id)
        self.assertEqual(sorted([src.name, clone.name, hidden]),
                         self.names())
        self.driver.delete_volume(clone)
        # The hidden snapshot goes with its last second user.
        self.assertEqual([src.name], self.names())

    def test_revert_swaps_in_a_clone_of_the_snapshot(self):
        volume = self.volume()
        snap = self.snapshot(volume)
        old_uuid = self.fake.lvol(self.alias(volume))['uuid']
        self.driver.revert_to_snapshot(self.ctxt, volume, snap)
        new = self.fake.lvol(self.alias(volume))
        self.assertNotEqual(old_uuid, new['uuid'])
        self.assertEqual(sorted([volume.name, snap.name]), self.names())
        self.assertEqual(self.alias(snap), self.fake.state()['lvols'][
            self.alias(volume)]['parent'])


class ManageTest(dbase.DriverTestCase):

    def setUp(self):
        super().setUp()
        self.fake.bdev_lvol_create('legacy', 1500, lvs_name=dbase.LVS,
                                   thin_provision=True)

    def test_get_size_rounds_up(self):
        for ref in ({'source-name': 'lvs0/legacy'},
                    {'source-name': 'legacy'},
                    {'source-id': self.fake.lvol('lvs0/legacy')['uuid']}):
            self.assertEqual(2, self.driver.manage_existing_get_size(
                self.make_volume(), ref))

    def test_manage_renames_and_grows(self):
        volume = self.make_volume(size=2)
        self.driver.manage_existing(volume, {'source-name': 'lvs0/legacy'})
        self.assertEqual([volume.name], self.names())
        self.assertEqual(2048, self.size_mib(self.alias(volume)))

    def test_invalid_references(self):
        self.fake.bdev_lvol_snapshot('lvs0/legacy', 'snap')
        self.fake.add_controller('vhost.0', 'lvs0/legacy')
        volume = self.make_volume(size=2)
        for ref in ({}, {'source-name': 'lvs0/nope'},
                    {'source-name': 'lvs9/legacy'},
                    {'source-name': 'lvs0/snap'}):
            self.assertRaises(exception.ManageExistingInvalidReference,
                              self.driver.manage_existing_get_size,
                              volume, ref)
        self.assertRaises(exception.ManageExistingInvalidReference,
                          self.driver.manage_existing, volume,
                          {'source-name': 'lvs0/legacy'})
        self.assertEqual(['legacy', 'snap'], self.names())

    def test_unmanage_keeps_lvol_renamed(self):
        volume = self.volume()
        self.driver.unmanage(volume)
        self.assertEqual(['legacy', 'unmanaged-' + volume.name],
                         self.names())


class RetypeTest(dbase.DriverTestCase):

    def test_retype_changes_qos_in_place(self):
        volume = self.volume(vtype=self.make_type(IOPS))
        new = self.make_type({'total_bytes_sec': str(50 * MIB)})
        self.assertEqual((True, None), self.driver.retype(
            self.ctxt, volume, new, {}, {'host': volume.host}))
        qos = self.fake.lvol(self.alias(volume))['qos']
        self.assertEqual((0, 50), (qos['rw_ios_per_sec'],
                                   qos['rw_mbytes_per_sec']))

    def test_retype_to_other_backend_left_to_migration(self):
        volume = self.volume()
        self.assertEqual((False, None), self.driver.retype(
            self.ctxt, volume, self.make_type(IOPS), {},
            {'host': 'other@lvm#pool'}))
        self.assertEqual(0, self.fake.lvol(
            self.alias(volume))['qos']['rw_ios_per_sec'])


class ConnectionTest(dbase.DriverTestCase):

    def test_local_attach_hands_over_the_lvol(self):
        volume = self.volume()
        info = self.driver.initialize_connection(volume, dbase.LOCAL)
        lvol = self.fake.lvol(self.alias(volume))
        self.assertEqual('spdk_vhost', info['driver_volume_type'])
        self.assertEqual({'volume_id': volume.id, 'bdev': self.alias(volume),
                          'lvol_uuid': lvol['uuid'], 'access_mode': 'rw',
                          'block_size': 512, 'transport': 'local'},
                         info['data'])
        self.driver.terminate_connection(volume, dbase.LOCAL)
        self.assertEqual({}, self.fake.subsystems)

    def test_remote_attach_one_host_subsystem(self):
        volume = self.volume()
        data = self.driver.initialize_connection(volume,
                                                 dbase.REMOTE)['data']
        nqn = self.driver.exporter.nqn(volume.name)
        self.assertEqual(('tcp', nqn, '127.0.0.1', '4420', 'ipv4', 1,
                          dbase.HOST_NQN),
                         (data['transport'], data['nqn'], data['traddr'],
                          data['trsvcid'], data['adrfam'], data['ns_id'],
                          data['host_nqn']))
        sub = self.fake.state()['subsystems'][nqn]
        self.assertEqual([dbase.HOST_NQN], sub['hosts'])
        self.assertEqual([self.alias(volume)], sub['namespaces'])
        self.assertFalse(self.fake.subsystems[nqn]['allow_any_host'])
        other = dict(dbase.REMOTE, nqn=dbase.OTHER_NQN)
        self.driver.initialize_connection(volume, other)
        self.driver.terminate_connection(volume, dbase.REMOTE)
        self.assertEqual([dbase.OTHER_NQN], self.fake.state()[
            'subsystems'][nqn]['hosts'])
        self.driver.terminate_connection(volume, other)
        self.assertEqual({}, self.fake.subsystems)

    def test_force_detach_removes_every_host(self):
        volume = self.volume()
        self.driver.initialize_connection(volume, dbase.REMOTE)
        self.driver.terminate_connection(volume, None)
        self.assertEqual({}, self.fake.subsystems)

    def test_read_only_attachment(self):
        volume = self.volume()
        volume.admin_metadata = {'readonly': 'True'}
        info = self.driver.initialize_connection(volume, dbase.LOCAL)
        self.assertEqual('ro', info['data']['access_mode'])

    def test_remote_connector_needs_nqn(self):
        volume = self.volume()
        connector = {'host': 'compute1', 'spdk_target_id': 'compute1'}
        err = self.assertRaises(exception.InvalidConnectorException,
                                self.driver.initialize_connection, volume,
                                connector)
        self.assertIn('information: nqn', str(err))
        self.driver.terminate_connection(volume, connector)
        self.assertEqual({}, self.fake.subsystems)

    def test_connector_without_spdk_identity_refused(self):
        # What a compute host sends when Nova's SPDK driver could not
        # read its identity: os-brick's own keys (an nqn among them).
        volume = self.volume()
        connector = {'host': 'compute1', 'nqn': dbase.HOST_NQN}
        err = self.assertRaises(exception.InvalidConnectorException,
                                self.driver.initialize_connection, volume,
                                connector)
        self.assertIn('reported no SPDK identity', str(err))
        self.assertIn('nova-compute-spdk-vhost', str(err))
        self.assertIn('spdk_vhost.LibvirtVhostUserDriver', str(err))
        self.assertEqual({}, self.fake.subsystems)
        # Detaching an old attachment of such a connector still works.
        self.driver.terminate_connection(volume, connector)

    def attachment(self, volume, connector,
                   status=fields.VolumeAttachStatus.ATTACHED):
        """An attachment record as Cinder keeps it; the volume refreshed."""
        att = objects.VolumeAttachment(
            context=self.ctxt, volume_id=volume.id, attach_status=status,
            connector=connector, attached_host=connector['host'])
        att.create()
        volume.refresh()
        return att

    def test_multiattach_two_guests_of_one_host_share_its_admission(self):
        volume = self.volume()
        nqn = self.driver.exporter.nqn(volume.name)
        self.driver.initialize_connection(volume, dbase.REMOTE)
        first = self.attachment(volume, dbase.REMOTE)
        self.driver.initialize_connection(volume, dbase.REMOTE)
        second = self.attachment(volume, dbase.REMOTE)
        self.assertEqual([dbase.HOST_NQN],
                         self.fake.state()['subsystems'][nqn]['hosts'])
        # Detach either one first: the host stays admitted for the other.
        self.assertTrue(self.driver.terminate_connection(volume,
                                                         dbase.REMOTE))
        self.assertEqual([dbase.HOST_NQN],
                         self.fake.state()['subsystems'][nqn]['hosts'])
        second.destroy()
        volume.refresh()
        self.assertFalse(self.driver.terminate_connection(volume,
                                                          dbase.REMOTE))
        first.destroy()
        self.assertEqual({}, self.fake.subsystems)

    def test_multiattach_two_hosts(self):
        volume = self.volume()
        nqn = self.driver.exporter.nqn(volume.name)
        other = dict(dbase.REMOTE, host='compute2', nqn=dbase.OTHER_NQN)
        for connector in (dbase.REMOTE, other):
            self.driver.initialize_connection(volume, connector)
            self.attachment(volume, connector)
        self.assertEqual(sorted([dbase.HOST_NQN, dbase.OTHER_NQN]),
                         sorted(self.fake.state()['subsystems'][nqn][
                             'hosts']))
        # One attachment per host: each detach removes its own host.
        self.assertFalse(self.driver.terminate_connection(volume, other))
        self.assertEqual([dbase.HOST_NQN],
                         self.fake.state()['subsystems'][nqn]['hosts'])
        self.assertFalse(self.driver.terminate_connection(volume,
                                                          dbase.REMOTE))
        self.assertEqual({}, self.fake.subsystems)

    def test_detached_and_reserved_attachments_do_not_share(self):
        volume = self.volume()
        self.driver.initialize_connection(volume, dbase.REMOTE)
        self.attachment(volume, dbase.REMOTE)
        self.attachment(volume, dbase.REMOTE,
                        fields.VolumeAttachStatus.DETACHED)
        objects.VolumeAttachment(
            context=self.ctxt, volume_id=volume.id,
            attach_status=fields.VolumeAttachStatus.RESERVED).create()
        volume.refresh()
        self.assertFalse(self.driver.terminate_connection(volume,
                                                          dbase.REMOTE))
        self.assertEqual({}, self.fake.subsystems)

    def test_force_detach_ignores_other_attachments(self):
        volume = self.volume()
        self.driver.initialize_connection(volume, dbase.REMOTE)
        self.attachment(volume, dbase.REMOTE)
        self.attachment(volume, dbase.REMOTE)
        self.driver.terminate_connection(volume, None)
        self.assertEqual({}, self.fake.subsystems)

    def test_export_hooks_change_nothing(self):
        volume = self.volume()
        before = self.fake.state()
        self.driver.create_export(self.ctxt, volume, dbase.REMOTE)
        self.driver.ensure_export(self.ctxt, volume)
        self.driver.remove_export(self.ctxt, volume)
        self.assertEqual(before, self.fake.state())


class RekeyTest(base.CinderTestCase):
    """DH-HMAC-CHAP secrets of a host that still uses them are kept."""

    def exporter(self, hosts):
        conf = mock.Mock(spdk_nvmf_transport='tcp',
                         spdk_nvmf_address='192.0.2.1', spdk_nvmf_port=4420,
                         spdk_nvmf_nqn_prefix='nqn.2016-06.io.spdk:cinder',
                         spdk_nvmf_auth='dhchap', spdk_nvmf_key_dir='/keys')
        client = mock.Mock(through_agent=False)
        client.nvmf_get_subsystems.return_value = [{
            'nqn': 'n', 'hosts': [{'nqn': host} for host in hosts],
            'namespaces': [{'nsid': 1}]}]
        return export.NvmfExport(client, conf), client

    def test_admitted_host_in_use_keeps_its_secrets(self):
        exporter, client = self.exporter([dbase.HOST_NQN])
        data = exporter.export('volume-1', mock.Mock(), dbase.HOST_NQN,
                               mock.Mock(), rekey=False)
        client.nvmf_subsystem_remove_host.assert_not_called()
        client.nvmf_subsystem_add_host.assert_not_called()
        self.assertNotIn('dhchap_key', data)

    @mock.patch.object(export.nvme_auth, 'register', autospec=True)
    def test_admitted_host_not_in_use_gets_new_secrets(self, register):
        exporter, client = self.exporter([dbase.HOST_NQN])
        data = exporter.export('volume-1', mock.Mock(), dbase.HOST_NQN,
                               mock.MagicMock())
        client.nvmf_subsystem_remove_host.assert_called_once_with(
            exporter.nqn('volume-1'), dbase.HOST_NQN)
        client.nvmf_subsystem_add_host.assert_called_once()
        self.assertIn('dhchap_key', data)
        self.assertEqual(2, register.call_count)


class StatsTest(dbase.DriverTestCase):

    def test_one_pool_per_lvstore(self):
        self.volume(size=3)
        snap_src = self.volume(size=2)
        self.snapshot(snap_src)
        stats = self.driver.get_volume_stats(refresh=True)
        self.assertEqual(
            {'volume_backend_name': base.BACKEND, 'vendor_name': 'SPDK',
             'driver_version': spdk_driver.VERSION,
             'storage_protocol': 'vhost-user'},
            {k: v for k, v in stats.items() if k != 'pools'})
        pool, = stats['pools']
        # A snapshot counts only the clusters it holds (none here);
        # 1024 clusters of 1 MiB.
        self.assertEqual((dbase.LVS, 5.0, 1.0, 1.0),
                         (pool['pool_name'],
                          pool['provisioned_capacity_gb'],
                          pool['total_capacity_gb'],
                          pool['free_capacity_gb']))
        self.assertTrue(pool['thin_provisioning_support'])
        self.assertFalse(pool['thick_provisioning_support'])
        self.assertTrue(pool['QoS_support'])
        self.assertTrue(pool['multiattach'])
        self.assertEqual('spdk_vhost:%s:%s' % (dbase.TARGET_ID, dbase.LVS),
                         pool['location_info'])

    def test_snapshots_count_the_clusters_they_hold(self):
        volume = self.volume()
        # Written before the snapshot: its clusters go to the snapshot.
        self.fake.lvol(self.alias(volume))['allocated'] = 300
        snap = self.snapshot(volume)
        clones = [self.make_volume(), self.make_volume()]
        for clone in clones:
            self.driver.create_volume_from_snapshot(clone, snap)
        self.driver.delete_snapshot(snap)
        # Three 1 GiB volumes, and 300 MiB only the hidden snapshot holds.
        self.assertEqual(3.29, self._provisioned())
        for vol in [volume] + clones:
            self.driver.delete_volume(vol)
        self.assertEqual(0, self._provisioned())

    def _provisioned(self):
        return self.driver.get_volume_stats(
            refresh=True)['pools'][0]['provisioned_capacity_gb']

    def test_cached_until_refresh(self):
        first = self.driver.get_volume_stats(refresh=True)
        self.volume(size=4)
        self.assertEqual(first, self.driver.get_volume_stats())
        self.assertEqual(4.0, self.driver.get_volume_stats(
            refresh=True)['pools'][0]['provisioned_capacity_gb'])
