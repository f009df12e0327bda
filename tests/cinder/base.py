"""Test bases for the Cinder side: a real Cinder DB, objects and config.

Only this tree imports cinder (nova registers clashing global options).
Cinder's own ``Database`` fixture gives each test a fresh sqlite schema
(migrated once per process), so volume types, QoS specs and volumes are
real DB records, not mocks.
"""

import os
import uuid

from cinder import context
from cinder import objects
from cinder.tests.unit import test as cinder_test
from cinder.volume import qos_specs
from cinder.volume import volume_types
import fixtures
from oslo_config import cfg

from testbed import agent
from testbed import cinder_standalone as standalone
from testbed import hosts
from testbed import net
from testbed import spdk_target
from testbed import tls
from tests import base

objects.register_all()
CONF = cfg.CONF
BACKEND = standalone.BACKEND
HOST = 'storage@%s' % BACKEND
LVS = 'lvs0'


class CinderTestCase(base.TestCase):
    """A Cinder DB and admin context per test.

    And ``cinder.coordination`` started on a file backend of the test's
    own, as cinder-volume starts it: the driver's locks are the
    coordinator's.
    """

    def setUp(self):
        super().setUp()
        CONF.set_default('connection', 'sqlite://', 'database')
        self.addCleanup(CONF.reset)
        self.useFixture(cinder_test.Database())
        self.useFixture(standalone.Coordination())
        self.ctxt = context.get_admin_context()

    def make_type(self, qos=None, consumer='back-end', name=None,
                  extra_specs=None):
        """A volume type, with QoS specs associated when ``qos`` is given."""
        vtype = volume_types.create(self.ctxt, name or uuid.uuid4().hex,
                                    extra_specs or {})
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


class TargetTestCase(CinderTestCase):
    """Plus a real ``spdk_tgt`` holding lvol store ``lvs0`` on an aio file.

    The lvstore is on a sparse file, so it costs no hugepages and
    survives a restart of the target as on a real storage node
    (``add_base`` re-opens it). ``json_config`` is a saved config the
    target loads at every start.
    """

    LVS_MIB = 1024
    #: Start the target with ``--json`` of ``self.saved`` when it exists.
    SAVED_CONFIG = False
    #: The SPDK application serving the storage host, and its mode.
    APP = 'spdk_tgt'
    INTERRUPT_MODE = False
    #: False: a storage target serving copies of replicated volumes.
    AUTO_EXAMINE = True
    #: True: this process is a controller, the target (an idle nvmf_tgt)
    #: runs on a storage node of its own behind its ``spdk-vhost-agent``
    #: (``self.agent``), and ``self.compute`` is a compute node; one
    #: network and both hosts per test class.
    ON_STORAGE_NODE = False

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if cls.ON_STORAGE_NODE:
            lab = hosts.Lab(('storage', 'compute'))
            lab.setUp()
            cls.addClassCleanup(lab.cleanUp)
            cls.storage, cls.compute = lab.hosts

    def setUp(self):
        super().setUp()
        self.saved = None
        if self.SAVED_CONFIG:
            self.saved = os.path.join(
                self.useFixture(fixtures.TempDir()).path, 'spdk_tgt.json')
        node = self.storage if self.ON_STORAGE_NODE else None
        self.target = self.useFixture(spdk_target.SpdkTarget(
            app='nvmf_tgt' if node else self.APP,
            interrupt_mode=bool(node) or self.INTERRUPT_MODE,
            json_config=self.saved, name='storage',
            auto_examine=self.AUTO_EXAMINE, host=node))
        self.target.aio_lvstore(LVS, size_mib=self.LVS_MIB)
        if node:
            self.agent = self.useFixture(agent.Agent(
                self.target, tls.Authority(self.useFixture(
                    fixtures.TempDir()).path)))

    def add_base(self):
        """Re-open the lvstore's file after a restart without a config."""
        self.target.reopen_aio_lvstore(LVS)

    def rpc(self, method, params=None):
        """One call on the target; fail the test on an error reply."""
        reply = self.target.call(method, params)
        if 'error' in reply:
            self.fail('%s %s: %s' % (method, params, reply['error']))
        return reply['result']

    def rpc_error(self, method, params=None):
        return self.target.call(method, params).get('error')

    def make_driver(self, **overrides):
        """A set-up SpdkVhostDriver talking to the target."""
        settings = {'spdk_rpc_socket': self.target.socket_path,
                    'spdk_rpc_connect_retries': 0,
                    'spdk_rpc_timeout': 10.0,
                    'spdk_target_id': 'storage-target',
                    'spdk_nvmf_port': net.free_port()}
        if self.ON_STORAGE_NODE:
            settings.update(self.agent.section(),
                            spdk_nvmf_address=self.storage.address,
                            spdk_nvmf_port=4420)
            del settings['spdk_rpc_socket']
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
