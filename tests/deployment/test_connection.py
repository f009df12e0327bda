"""os-initialize_connection / os-terminate_connection through the API.

The connector is shaped like the one nova-compute sends (os-brick's
properties plus the SPDK vhost connector's ``spdk_target_id``), and the
answer must be the wire format's ``spdk_vhost`` connection_info.
"""

import json
import os
import uuid

from tests.deployment import base
from tests.deployment import deployment
from tests.deployment import test_lifecycle

lvol_name = test_lifecycle.lvol_name


def nova_connector(target_id='compute-1-target', host_nqn=None):
    host_uuid = str(uuid.uuid4())
    return {
        'platform': 'x86_64', 'os_type': 'linux', 'ip': '127.0.0.1',
        'host': 'compute-1', 'multipath': False, 'do_local_attach': False,
        'initiator': 'iqn.1993-08.org.debian:01:compute-1',
        'uuid': host_uuid, 'system uuid': host_uuid,
        'nqn': host_nqn or 'nqn.2014-08.org.nvmexpress:uuid:' + host_uuid,
        'spdk_target_id': target_id,
    }


# What Cinder's volume manager adds to every driver's connection data.
CINDER_KEYS = {'cacheable', 'encrypted', 'enforce_multipath', 'discard',
               'qos_specs'}


class TestConnection(base.DeploymentTestCase):

    def attach(self, vol, connector):
        """os-initialize_connection, undone at the end of the test."""
        info = self.cinder.volumes.initialize_connection(vol, connector)
        self.addCleanup(self.cinder.volumes.terminate_connection, vol,
                        connector)
        self.assertEqual('spdk_vhost', info['driver_volume_type'])
        return info['data']

    def assertData(self, expected, data):
        """The wire format's keys as expected; others only Cinder's own."""
        self.assertEqual(expected, {k: data.get(k) for k in expected})
        self.assertEqual(set(), set(data) - set(expected) - CINDER_KEYS)

    def _subsystems(self):
        return {s['nqn']: s for s in self.rpc('nvmf_get_subsystems')
                if s['subtype'] == 'NVMe'}

    def test_remote_host_gets_nvmf_export(self):
        vol = self.create_volume(1)
        lvol = self.lvol(lvol_name(vol))
        connector = nova_connector()
        data = self.attach(vol, connector)
        nqn = data.get('nqn', '')
        self.assertData({
            'volume_id': vol.id, 'bdev': 'lvs0/' + lvol_name(vol),
            'lvol_uuid': lvol['uuid'], 'transport': 'tcp', 'nqn': nqn,
            'traddr': self.deployment.nvmf_address,
            'trsvcid': str(self.deployment.nvmf_port), 'adrfam': 'ipv4',
            'ns_id': 1, 'host_nqn': connector['nqn'], 'access_mode': 'rw',
            'block_size': lvol['block_size'],
            'dhchap_key': data.get('dhchap_key'),
            'dhchap_ctrlr_key': data.get('dhchap_ctrlr_key')}, data)
        self.assertTrue(nqn.endswith(lvol_name(vol)))
        for field in ('dhchap_key', 'dhchap_ctrlr_key'):
            self.assertTrue(data[field].startswith('DHHC-1:'), field)
        subsystem = self._subsystems()[nqn]
        self.assertEqual([connector['nqn']],
                         [h['nqn'] for h in subsystem['hosts']])
        self.assertFalse(subsystem['allow_any_host'])

        self.cinder.volumes.terminate_connection(vol, connector)
        self.assertEqual({}, self._subsystems())

    def test_an_export_is_written_on_its_storage_node_only(self):
        vol = self.create_volume(1)
        connector = nova_connector()
        nqn = self.attach(vol, connector)['nqn']
        node = self.deployment.target.host
        # SPDK's keyring reads the attachment's keys on its own host.
        keys = [key['path'] for key in self.rpc('keyring_get_keys')]
        self.assertEqual(2, len(keys))
        for path in keys:
            self.assertTrue(node.exists(path), path)
            self.assertFalse(os.path.exists(path), path)
        # The config the node restarts with holds the export, and only
        # that node's; the controller keeps no SPDK config of its own.
        self.assertEqual([nqn], self.saved_exports(self.deployment.agent))
        self.assertEqual([], self.saved_exports(
            self.deployment.replica_agent))
        self.assertEqual([], [name for _dir, _subdirs, names in os.walk(
            self.deployment.workdir) for name in names
            if name.endswith('.json')])

        self.cinder.volumes.terminate_connection(vol, connector)
        self.assertEqual([], self.rpc('keyring_get_keys'))
        self.assertEqual([], self.saved_exports(self.deployment.agent))
        for path in keys:
            self.assertFalse(node.exists(path), path)

    @staticmethod
    def saved_exports(node_agent):
        """The NQNs of the exports in a node's own saved config."""
        host = node_agent.target.host
        try:
            with open(host.path(node_agent.saved_config)) as saved:
                config = json.load(saved)
        except FileNotFoundError:
            return []
        return [call['params']['nqn']
                for subsystem in config['subsystems']
                if subsystem['subsystem'] == 'nvmf'
                for call in subsystem['config'] or ()
                if call['method'] == 'nvmf_create_subsystem']

    def test_hyperconverged_host_gets_the_lvol(self):
        vol = self.create_volume(1)
        connector = nova_connector(target_id=deployment.TARGET_ID)
        data = self.attach(vol, connector)
        lvol = self.lvol(lvol_name(vol))
        self.assertData({'volume_id': vol.id,
                         'bdev': 'lvs0/' + lvol_name(vol),
                         'lvol_uuid': lvol['uuid'], 'transport': 'local',
                         'access_mode': 'rw',
                         'block_size': lvol['block_size']}, data)
        self.assertNotIn('nqn', data)
        self.assertEqual({}, self._subsystems())

    def test_exported_volume_is_not_deleted(self):
        vol = self.create_volume(1)
        connector = nova_connector()
        self.cinder.volumes.initialize_connection(vol, connector)
        self.cinder.volumes.delete(vol)
        self.wait_status(self.cinder.volumes, vol.id, 'available')
        self.assertIn(lvol_name(vol), self.lvols())
        self.cinder.volumes.terminate_connection(vol, connector)
        self.delete_volume(vol.id)
