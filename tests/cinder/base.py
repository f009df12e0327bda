"""Test bases for the Cinder side: a real Cinder DB, objects and config.

Only this tree imports cinder (nova registers clashing global options).
Cinder's own ``Database`` fixture gives each test a fresh sqlite schema
(migrated once per process), so volume types, QoS specs and volumes are
real DB records, not mocks.
"""

import uuid

from cinder import context
from cinder import objects
from cinder.tests.unit import test as cinder_test
from cinder.volume import qos_specs
from cinder.volume import volume_types
from oslo_config import cfg

from testbed import cinder_standalone as standalone
from testbed import net
from tests import base
from tests.emulator import fixture as emulator_fixture

objects.register_all()
CONF = cfg.CONF
BACKEND = standalone.BACKEND
HOST = 'storage@%s' % BACKEND
LVS = 'lvs0'


class CinderTestCase(base.TestCase):
    """A Cinder DB and admin context per test."""

    def setUp(self):
        super().setUp()
        CONF.set_default('connection', 'sqlite://', 'database')
        self.addCleanup(CONF.reset)
        self.useFixture(cinder_test.Database())
        self.ctxt = context.get_admin_context()

    def make_type(self, qos=None, consumer='back-end', name=None):
        """A volume type, with QoS specs associated when ``qos`` is given."""
        vtype = volume_types.create(self.ctxt, name or uuid.uuid4().hex, {})
        if qos is not None:
            specs = dict(qos, consumer=consumer)
            spec = qos_specs.create(self.ctxt, uuid.uuid4().hex, specs)
            qos_specs.associate_qos_with_type(self.ctxt, spec['id'],
                                              vtype['id'])
        return vtype

    def make_volume(self, size=1, vtype=None, host=HOST + '#' + LVS,
                    **kwargs):
        volume = objects.Volume(
            context=self.ctxt, size=size, host=host, status='creating',
            volume_type_id=vtype['id'] if vtype else None,
            project_id=self.ctxt.project_id, user_id=self.ctxt.user_id,
            **kwargs)
        volume.create()
        return volume

    def make_snapshot(self, volume):
        snap = objects.Snapshot(
            context=self.ctxt, volume_id=volume.id, volume_size=volume.size,
            status='creating', project_id=self.ctxt.project_id,
            user_id=self.ctxt.user_id,
            volume_type_id=volume.volume_type_id)
        snap.create()
        return objects.Snapshot.get_by_id(self.ctxt, snap.id)


class EmulatorTestCase(CinderTestCase):
    """Plus an SPDK target emulator holding lvol store ``lvs0``."""

    def setUp(self):
        super().setUp()
        self.target = self.useFixture(emulator_fixture.EmulatorFixture())
        self.rpc('bdev_malloc_create', {'name': 'Malloc0',
                                        'num_blocks': 131072,
                                        'block_size': 512})
        self.rpc('bdev_lvol_create_lvstore', {'bdev_name': 'Malloc0',
                                              'lvs_name': LVS,
                                              'cluster_sz': 1048576})

    def rpc(self, method, params=None):
        """One call on the target; fail the test on an error reply."""
        reply = self.target.call(method, params)
        if 'error' in reply:
            self.fail('%s %s: %s' % (method, params, reply['error']))
        return reply['result']

    def rpc_error(self, method, params=None):
        return self.target.call(method, params).get('error')

    def make_driver(self, **overrides):
        """A set-up SpdkVhostDriver talking to the emulator."""
        settings = {'spdk_rpc_socket': self.target.socket_path,
                    'spdk_rpc_connect_retries': 0,
                    'spdk_rpc_timeout': 10.0,
                    'spdk_target_id': 'storage-target',
                    'spdk_nvmf_port': net.free_port()}
        settings.update(overrides)
        drv = standalone.make_driver(HOST, **settings)
        self.addCleanup(drv.client.close)
        return drv

    def lvol_names(self):
        return sorted(item['name'] for item in self.rpc(
            'bdev_lvol_get_lvols', {'lvs_name': LVS}))

    def subsystems(self):
        return sorted(s['nqn'] for s in self.rpc('nvmf_get_subsystems')
                      if s['subtype'] == 'NVMe')
