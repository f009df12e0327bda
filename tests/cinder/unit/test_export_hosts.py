"""The export records each admitted host's reconnect settings."""

import collections
import json
import os
from unittest import mock

import fixtures

from cinder_spdk_vhost import export
from cinder_spdk_vhost import rollback
from spdk_vhost_core import exception as rpc_exc
from spdk_vhost_core import host_settings
from tests.cinder import base
from tests.cinder.unit import driver_base as dbase
from tests.cinder.unit import fake_spdk

Lvol = collections.namedtuple('Lvol', 'uuid alias')
SETTINGS = {'ctrlr_loss_timeout_sec': 120, 'reconnect_delay_sec': 2,
            'fast_io_fail_timeout_sec': 70}
SHORT = {'ctrlr_loss_timeout_sec': 60, 'reconnect_delay_sec': 2,
         'fast_io_fail_timeout_sec': 10}


def connector(nqn=dbase.HOST_NQN, settings=SETTINGS):
    props = dict(dbase.REMOTE, nqn=nqn)
    if settings is not None:
        props['spdk_nvme_reconnect'] = settings
    return props


class ExportRecordsHostsTest(base.CinderTestCase):

    def setUp(self):
        super().setUp()
        self.saved = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                  'spdk_tgt.json')
        self.fake = fake_spdk.FakeSpdk()
        uuid = self.fake.call('bdev_lvol_create', {
            'lvs_name': 'lvs0', 'lvol_name': 'volume-1', 'size_in_mib': 1})
        self.lvol = Lvol(uuid, 'lvs0/volume-1')
        self.exporter = self.make_exporter(self.saved)
        self.nqn = self.exporter.nqn('volume-1')

    def make_exporter(self, saved):
        conf = mock.Mock(spdk_nvmf_transport='tcp',
                         spdk_nvmf_address='192.0.2.1', spdk_nvmf_port=4420,
                         spdk_nvmf_nqn_prefix='nqn.2016-06.io.spdk:cinder',
                         spdk_nvmf_auth='none', spdk_nvmf_key_dir=None,
                         spdk_saved_config=saved)
        return export.NvmfExport(self.fake, conf)

    def export(self, props, rekey=True, mirrored=False):
        with rollback.Rollback('attach') as rb:
            return self.exporter.export('volume-1', self.lvol, props['nqn'],
                                        rb, rekey=rekey, connector=props,
                                        mirrored=mirrored)

    def recorded(self):
        return host_settings.read(self.saved)

    def test_admitted_host_recorded_per_subsystem(self):
        data = self.export(connector())
        self.export(connector(dbase.OTHER_NQN, SHORT))
        self.assertEqual({dbase.HOST_NQN: {self.nqn: SETTINGS},
                          dbase.OTHER_NQN: {self.nqn: SHORT}},
                         self.recorded())
        # The wire format to the compute host is unchanged.
        self.assertNotIn('spdk_nvme_reconnect', data)

    def test_a_copy_of_a_replicated_volume_is_recorded_as_mirrored(self):
        self.export(connector(), mirrored=True)
        self.assertEqual({dbase.HOST_NQN: {self.nqn: host_settings.MIRRORED}},
                         self.recorded())

    def test_host_already_admitted_keeps_its_record(self):
        # Its guest's connection was made with the settings recorded
        # then; a second attachment reuses that connection.
        self.export(connector())
        self.export(connector(settings=SHORT), rekey=False)
        self.assertEqual({dbase.HOST_NQN: {self.nqn: SETTINGS}},
                         self.recorded())

    def test_unreported_or_malformed_settings_are_unknown(self):
        logger = self.useFixture(fixtures.FakeLogger())
        host_settings.record(self.saved, dbase.HOST_NQN, self.nqn, SETTINGS)
        self.export(connector(settings=None))
        self.assertEqual({}, self.recorded())
        bad = dict(SETTINGS, reconnect_delay_sec=0)
        self.export(connector(dbase.OTHER_NQN, bad))
        self.assertEqual({}, self.recorded())
        self.assertIn('Host %s reported unusable NVMe-oF reconnect '
                      'settings' % dbase.OTHER_NQN, logger.output)
        self.assertIn('reconnect_delay_sec must be above 0', logger.output)

    def test_failed_admission_restores_the_record(self):
        host_settings.record(self.saved, dbase.HOST_NQN, self.nqn, SHORT)
        self.fake.call('nvmf_create_subsystem', {'nqn': self.nqn})
        self.fake.fail('nvmf_subsystem_add_host', rpc_exc.NoSpace)
        self.assertRaises(rpc_exc.SpdkRpcError, self.export, connector())
        self.assertEqual({dbase.HOST_NQN: {self.nqn: SHORT}},
                         self.recorded())

    def test_unexport_forgets_only_the_leaving_host(self):
        self.export(connector())
        self.export(connector(dbase.OTHER_NQN, SHORT))
        self.exporter.unexport('volume-1', dbase.HOST_NQN)
        self.assertEqual({dbase.OTHER_NQN: {self.nqn: SHORT}},
                         self.recorded())
        self.exporter.unexport('volume-1', None)
        self.assertEqual({}, self.recorded())
        with open(host_settings.path(self.saved)) as src:
            self.assertEqual({'hosts': {}}, json.load(src))

    def test_without_a_saved_config_nothing_is_written(self):
        self.exporter = self.make_exporter('')
        self.export(connector())
        self.exporter.unexport('volume-1', None)
        self.assertEqual([], os.listdir(os.path.dirname(self.saved)))

    def test_unwritable_record_leaves_the_host_unknown(self):
        logger = self.useFixture(fixtures.FakeLogger())
        self.exporter = self.make_exporter('/no/such/dir/spdk_tgt.json')
        self.export(connector())
        self.assertEqual([dbase.HOST_NQN],
                         self.fake.state()['subsystems'][self.nqn]['hosts'])
        self.assertIn('Cannot record the NVMe-oF reconnect settings',
                      logger.output)

    def test_driver_own_one_off_hosts_not_recorded(self):
        # A dd copy's scratch export has no connector: no lock, no file.
        with rollback.Cleanup('copy') as rb:
            self.exporter.export('volume-1', self.lvol, dbase.HOST_NQN, rb)
        self.assertFalse(os.path.exists(host_settings.path(self.saved)))


class DriverPassesTheConnectorTest(dbase.DriverTestCase):

    def test_attach_records_the_settings_the_connector_reports(self):
        volume = self.volume()
        with mock.patch.object(export.host_settings, 'record',
                               autospec=True, return_value=None) as record:
            info = self.driver.initialize_connection(volume, connector())
        record.assert_called_once_with(
            '', dbase.HOST_NQN, self.driver.exporter.nqn(volume.name),
            SETTINGS)
        self.assertEqual('tcp', info['data']['transport'])
