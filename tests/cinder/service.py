"""The Cinder side of :mod:`testbed.service_process`: a real volume manager.

cinder-volume's own ``VolumeManager`` loads ``SpdkVhostDriver`` from its
configuration and does what it does in a cloud: create flows, snapshots,
and ``initialize_connection`` with the connection options it adds itself
(front-end QoS specs, access mode). Only the surroundings are in-process:
a sqlite database in the state directory, oslo.messaging's fake transport
and a file-based coordination backend.
"""

import os

from cinder import context
from cinder import coordination
from cinder.db import migration
from cinder import objects
from cinder import rpc
from cinder.volume import configuration
from cinder.volume import qos_specs
from cinder.volume import volume_types
from oslo_concurrency import lockutils
from oslo_config import cfg
from oslo_log import log
from oslo_messaging import conffixture as messaging_conffixture

from cinder_spdk_vhost import peers
from testbed import spdk_build

CONF = cfg.CONF
BACKEND = 'spdk'
HOST = 'storage@%s' % BACKEND


class CinderSide(object):
    """One backend ``spdk`` on a host ``storage``, and its records."""

    def __init__(self, state_dir):
        objects.register_all()
        log.register_options(CONF)
        CONF([], project='cinder', default_config_files=[])
        log.setup(CONF, 'cinder')
        lockutils.set_defaults(os.path.join(state_dir, 'locks'))
        CONF.set_override('connection', 'sqlite:///%s' % os.path.join(
            state_dir, 'cinder.sqlite'), group='database')
        for name in ('alembic', 'cinder.db.migration'):
            log.getLogger(name).logger.setLevel(log.WARNING)
        migration.db_sync()
        # Lives as long as the process: nothing to clean up after it.
        messaging = messaging_conffixture.ConfFixture(CONF)
        messaging.setUp()
        messaging.transport_url = 'fake:/'
        CONF.set_override('driver', ['noop'],
                          group='oslo_messaging_notifications')
        rpc.init(CONF)
        CONF.set_override('backend_url', 'file://%s' % os.path.join(
            state_dir, 'coordination'), group='coordination')
        coordination.COORDINATOR.start()
        self.ctxt = context.get_admin_context()
        self.manager = None

    def close(self):
        if self.manager is not None:
            self.manager.driver.client.close()
        coordination.COORDINATOR.stop()

    def dispatch(self, method, args):
        return getattr(self, 'do_' + method)(**args)

    # -- set-up ------------------------------------------------------------

    def do_start(self, rpc_socket, target_id, lvstore='lvs0',
                 nvmf_address='127.0.0.1', nvmf_port=4420, replica_targets=()):
        """Start cinder-volume's manager on the backend, as configured.

        ``replica_targets``: [{name, rpc_socket, target_id, nvmf_port}]
        of the storage targets holding replicated volumes' other copies.
        """
        # Imported once the objects are registered: it annotates with them.
        from cinder.volume import manager as volume_manager
        configuration.Configuration(volume_manager.volume_backend_opts,
                                    config_group=BACKEND)
        CONF.set_override('volume_driver',
                          'cinder_spdk_vhost.driver.SpdkVhostDriver',
                          group=BACKEND)
        CONF.set_override('enabled_backends', [BACKEND])
        CONF.set_override('host', 'storage')
        self.manager = volume_manager.VolumeManager(service_name=BACKEND,
                                                    host=HOST)
        for name, value in (('spdk_rpc_socket', rpc_socket),
                            ('spdk_target_id', target_id),
                            ('spdk_lvstores', [lvstore]),
                            ('spdk_nvmf_address', nvmf_address),
                            ('spdk_nvmf_port', nvmf_port),
                            ('spdk_dd_path', spdk_build.app_path('spdk_dd')),
                            ('volume_backend_name', BACKEND),
                            ('spdk_replica_targets',
                             [peer['name'] for peer in replica_targets])):
            CONF.set_override(name, value, group=BACKEND)
        for peer in replica_targets:
            peers.section(peer['name'])
            for name, value in (('spdk_rpc_socket', peer['rpc_socket']),
                                ('spdk_target_id', peer['target_id']),
                                ('spdk_nvmf_address', nvmf_address),
                                ('spdk_nvmf_port', peer['nvmf_port']),
                                ('spdk_saved_config', '')):
                CONF.set_override(name, value, group=peer['name'])
        self.started = dict(rpc_socket=rpc_socket, target_id=target_id,
                            lvstore=lvstore, nvmf_address=nvmf_address,
                            nvmf_port=nvmf_port)
        self.manager.init_host(service_id=None)
        if not self.manager.driver.initialized:
            raise RuntimeError('the SPDK driver did not initialize: see '
                               'the Cinder log')
        self.lvstore = lvstore
        return {'driver': type(self.manager.driver).__name__}

    def do_restart(self, replica_targets):
        """cinder-volume restarted with other ``spdk_replica_targets``.

        As an operator retires a storage target, or adds one.
        """
        self.manager.driver.client.close()
        return self.do_start(replica_targets=replica_targets,
                             **self.started)

    def do_create_type(self, name, qos=None, consumer='back-end',
                       extra_specs=None):
        """A volume type, with a QoS spec associated when qos is given."""
        vtype = volume_types.create(self.ctxt, name, dict(
            extra_specs or {}, volume_backend_name=BACKEND))
        if qos:
            spec = qos_specs.create(self.ctxt, name + '-qos',
                                    dict(qos, consumer=consumer))
            qos_specs.associate_qos_with_type(self.ctxt, spec['id'],
                                              vtype['id'])
        return vtype['id']

    # -- volumes -----------------------------------------------------------

    def _new_volume(self, size, type_id, **kwargs):
        volume = objects.Volume(
            context=self.ctxt, size=size, status='creating',
            host='%s#%s' % (HOST, self.lvstore), volume_type_id=type_id,
            project_id=self.ctxt.project_id, user_id=self.ctxt.user_id,
            availability_zone='nova', **kwargs)
        volume.create()
        return volume

    def _volume(self, volume_id):
        return objects.Volume.get_by_id(self.ctxt, volume_id)

    def _describe(self, volume):
        volume = self._volume(volume.id)
        if volume.status != 'available':
            raise RuntimeError('volume %s is %s' % (volume.id,
                                                    volume.status))
        return {'id': volume.id, 'name': volume.name, 'size': volume.size}

    def do_create_volume(self, size, type_id=None):
        volume = self._new_volume(size, type_id)
        self.manager.create_volume(self.ctxt, volume)
        return self._describe(volume)

    def do_create_snapshot(self, volume_id):
        volume = self._volume(volume_id)
        snap = objects.Snapshot(
            context=self.ctxt, volume_id=volume.id,
            volume_size=volume.size, status='creating',
            project_id=self.ctxt.project_id, user_id=self.ctxt.user_id,
            volume_type_id=volume.volume_type_id)
        snap.create()
        self.manager.create_snapshot(self.ctxt, snap)
        snap = objects.Snapshot.get_by_id(self.ctxt, snap.id)
        if snap.status != 'available':
            raise RuntimeError('snapshot %s is %s' % (snap.id, snap.status))
        return {'id': snap.id, 'name': snap.name}

    def do_create_volume_from_snapshot(self, snapshot_id, type_id=None):
        snap = objects.Snapshot.get_by_id(self.ctxt, snapshot_id)
        volume = self._new_volume(snap.volume_size, type_id,
                                  snapshot_id=snap.id)
        self.manager.create_volume(self.ctxt, volume)
        return self._describe(volume)

    def do_delete_volume(self, volume_id):
        self.manager.delete_volume(self.ctxt, self._volume(volume_id))

    def do_delete_snapshot(self, snapshot_id):
        self.manager.delete_snapshot(
            self.ctxt, objects.Snapshot.get_by_id(self.ctxt, snapshot_id))

    # -- attachments -------------------------------------------------------

    def do_initialize_connection(self, volume_id, connector):
        """The connection_info a compute host gets for ``connector``."""
        return self.manager.initialize_connection(
            self.ctxt, self._volume(volume_id), connector)

    def do_attach_complete(self, volume_id):
        """The volume in-use, as Cinder's attachment_complete leaves it."""
        volume = self._volume(volume_id)
        volume.update({'status': 'in-use'})
        volume.save()

    def do_terminate_connection(self, volume_id, connector):
        self.manager.terminate_connection(self.ctxt, volume_id, connector)
