"""Test base for the deployment tree: one shared Cinder deployment.

The services take seconds to start, so one deployment serves every test
of the process (``tools/run-tests.sh`` runs each part of this tree
with ``--concurrency 1``: one process, one deployment). It is stopped, and
its database dropped, when the process exits. Each test removes what it
created and then checks that no SPDK target (the storage nodes', and the
compute hosts' it used) holds anything any more, so a leak fails the
test that caused it.
"""

import atexit

from cinderclient import exceptions as cinder_exc
import fixtures
import testtools

from testbed import spdk_dd
from testbed import waiting
from tests import base
from tests.deployment import deployment
from tests.deployment import processes

LVS = 'lvs0'
TIMEOUT = 90
#: What a compute host's target lists: kind -> (method, params, key).
COMPUTE_LISTS = {
    'vhost': ('vhost_get_controllers', None, 'ctrlr'),
    'raid': ('bdev_raid_get_bdevs', {'category': 'all'}, 'name'),
    'nvme': ('bdev_nvme_get_controllers', None, 'name'),
}
#: How a leftover goes, consumers first: kind -> (method, key).
PURGE = {
    'vhost': ('vhost_delete_controller', 'ctrlr'),
    'raid': ('bdev_raid_delete', 'name'),
    'nvme': ('bdev_nvme_detach_controller', 'name'),
    'subsystem': ('nvmf_delete_subsystem', 'nqn'),
}
#: clustered -> the process's deployment of that kind, or why it failed.
_shared = {}
_failed = {}


def shared_deployment(clustered=False):
    """The process's deployment of that kind, started on first use.

    ``clustered``: two cinder-volume services of one cluster, locking
    through etcd, and a third storage node. Cinder drops the pool of a
    clustered destination, so the tests that move a volume to a pool
    named by ``cinder migrate`` run on the other kind, one cinder-volume
    (also a supported layout) and two storage nodes, where a type of
    three copies never schedules.
    """
    if clustered in _failed:
        raise RuntimeError('the deployment failed to start earlier: %s'
                           % _failed[clustered])
    if clustered not in _shared:
        dep = deployment.CinderDeployment(clustered=clustered,
                                          third_node=clustered)
        try:
            with processes.process_tempdir():
                dep.setUp()
        except Exception as err:
            _failed[clustered] = err
            raise
        atexit.register(dep.cleanUp)
        _shared[clustered] = dep
    return _shared[clustered]


class DeploymentTestCase(base.TestCase):
    """A cinderclient on the shared deployment, and target checks."""

    #: Whether the tests want the clustered deployment.
    CLUSTERED = False

    def setUp(self):
        super().setUp()
        self.deployment = shared_deployment(self.CLUSTERED)
        self.cinder = self.deployment.client()
        self.addOnException(self._attach_logs)
        # Registered first, so it runs after every other cleanup.
        self.addCleanup(self.assert_target_clean)

    def _attach_logs(self, exc_info):
        for name, text in self.deployment.logs().items():
            self.addDetail(name, testtools.content.text_content(text))

    # -- waiting -------------------------------------------------------

    def wait_status(self, manager, obj_id, status, timeout=TIMEOUT):
        """Wait for ``status``; any error status fails at once."""
        kind = manager.resource_class.__name__
        seen = []

        def reached():
            obj = manager.get(obj_id)
            seen[:] = [obj.status]
            if obj.status.startswith('error') and status != obj.status:
                self.fail('%s %s went to %s (waiting for %s)'
                          % (kind, obj_id, obj.status, status))
            return obj if obj.status == status else None
        return waiting.wait_for('%s %s %s' % (kind, obj_id, status), reached,
                                timeout, interval=0.3,
                                on_timeout=lambda: 'status: %s' % seen)

    def wait_gone(self, manager, obj_id, timeout=TIMEOUT):
        seen = []

        def gone():
            try:
                obj = manager.get(obj_id)
            except cinder_exc.NotFound:
                return True
            if obj.status.startswith('error'):
                self.fail('deleting %s went to %s' % (obj_id, obj.status))
            seen[:] = [obj.status]
            return False
        waiting.wait_for('%s to be gone' % obj_id, gone, timeout,
                         interval=0.3, on_timeout=lambda: 'status: %s' % seen)

    # -- resources, removed at the end of the test -----------------------

    def _forget(self, manager, obj_id):
        """Cleanup: delete unless the test already did, wait until gone."""
        try:
            manager.delete(obj_id)
        except cinder_exc.NotFound:
            return
        self.wait_gone(manager, obj_id)

    def create_volume(self, size=1, status='available', **kwargs):
        vol = self.cinder.volumes.create(size, **kwargs)
        self.addCleanup(self._forget, self.cinder.volumes, vol.id)
        return self.wait_status(self.cinder.volumes, vol.id, status)

    def create_snapshot(self, volume_id, **kwargs):
        snap = self.cinder.volume_snapshots.create(volume_id, **kwargs)
        self.addCleanup(self._forget, self.cinder.volume_snapshots, snap.id)
        return self.wait_status(self.cinder.volume_snapshots, snap.id,
                                'available')

    def delete_volume(self, volume_id, cascade=False):
        self.cinder.volumes.delete(volume_id, cascade=cascade)
        self.wait_gone(self.cinder.volumes, volume_id)

    def delete_snapshot(self, snapshot_id):
        self.cinder.volume_snapshots.delete(snapshot_id)
        self.wait_gone(self.cinder.volume_snapshots, snapshot_id)

    def admin_client(self):
        return self.deployment.admin

    def make_type(self, name=None, qos=None, extra_specs=None):
        """A volume type (optionally with back-end QoS), removed after."""
        admin = self.admin_client()
        vtype = admin.volume_types.create(name or self.getUniqueString())
        self.addCleanup(admin.volume_types.delete, vtype.id)
        if extra_specs:
            vtype.set_keys(extra_specs)
        if qos is not None:
            spec = admin.qos_specs.create(
                self.getUniqueString(), dict(qos, consumer='back-end'))
            self.addCleanup(admin.qos_specs.delete, spec.id, True)
            admin.qos_specs.associate(spec.id, vtype.id)
            self.addCleanup(admin.qos_specs.disassociate, spec.id, vtype.id)
        return vtype

    # -- the SPDK targets ------------------------------------------------

    def rpc(self, method, params=None):
        """One call on the backend's storage target."""
        return self.deployment.rpc(method, params)

    def lvols(self, lvs=LVS, target=None):
        """Name -> lvol bdev info of every lvol in ``lvs``.

        ``target``: the backend's storage target by default.
        """
        rpc = (target or self.deployment.target).rpc
        names = {item['name']: item['uuid'] for item in rpc(
            'bdev_lvol_get_lvols', {'lvs_name': lvs})}
        bdevs = {b['name']: b for b in rpc('bdev_get_bdevs')}
        # An lvol being deleted (a revert drops the old one) may be listed
        # after its bdev is gone: only lvols with a bdev count.
        return {name: bdevs[uuid] for name, uuid in names.items()
                if uuid in bdevs}

    def lvol(self, name, lvs=LVS):
        found = self.lvols(lvs)
        self.assertIn(name, found, 'lvol %s not on %s' % (name, lvs))
        return found[name]

    def dd(self, bdev, offset, length=None, data=None, target=None):
        """Write ``data`` at ``offset`` of lvol ``bdev``, or read ``length``.

        Over NVMe/TCP with spdk_dd, as a host would see the volume;
        ``target``: the backend's by default.
        """
        dd = spdk_dd.NvmfDd(target or self.deployment.target,
                            self.useFixture(fixtures.TempDir()).path)
        try:
            if data is None:
                return dd.read(bdev, offset, length)
            dd.write(bdev, offset, data)
        finally:
            dd.unexport(bdev)

    def rate_limits(self, name):
        limits = self.lvol(name).get('assigned_rate_limits', {})
        return {key: value for key, value in limits.items() if value}

    def compute_targets(self):
        """The compute hosts' targets the test may have used: none here."""
        return []

    def _storage_targets(self):
        return [(target, lvstores)
                for target, _agent, lvstores in self.deployment.storage]

    @staticmethod
    def exported(target):
        """NQNs of the NVMe-oF subsystems (not discovery) on ``target``."""
        return [s['nqn'] for s in target.rpc('nvmf_get_subsystems')
                if s['subtype'] == 'NVMe']

    def admitted(self, volume_id, target=None):
        """Host NQNs a storage target's export of the volume admits.

        ``target``: a replica node (its copy's export); the backend's
        own by default.
        """
        rpc = target.rpc if target else self.rpc
        for sub in rpc('nvmf_get_subsystems'):
            if sub['nqn'].endswith(volume_id):
                return sorted(h['nqn'] for h in sub['hosts'])
        return []

    def _leftovers(self):
        """What is left on any target: {(target, kind): names}."""
        found = {}
        for target, lvstores in self._storage_targets():
            for lvs in lvstores:
                found[target, lvs] = sorted(self.lvols(lvs, target))
            found[target, 'subsystem'] = self.exported(target)
        for target in self.compute_targets():
            for kind, (method, params, key) in COMPUTE_LISTS.items():
                found[target, kind] = sorted(
                    item[key] for item in target.rpc(method, params))
        return {where: names for where, names in found.items() if names}

    def _purge(self, leftovers):
        """Empty the targets behind Cinder's back, for the next tests.

        Consumers before what they sit on; clones before their
        snapshots, so a few rounds delete every lvol.
        """
        for kind, (method, key) in PURGE.items():
            for (target, found_kind), names in leftovers.items():
                if found_kind == kind:
                    for name in names:
                        target.call(method, {key: name})
        for _round in range(5):
            for target, lvstores in self._storage_targets():
                for lvs in lvstores:
                    for name in self.lvols(lvs, target):
                        target.call('bdev_lvol_delete',
                                    {'name': '%s/%s' % (lvs, name)})

    def assert_target_clean(self):
        """No lvol, export, vhost or NVMe controller or raid is left."""
        leftovers = self._leftovers()
        if leftovers:
            self._purge(leftovers)
        self.assertEqual({}, {'%s %s' % (target.name, kind): names
                              for (target, kind), names in leftovers.items()},
                         'left on the SPDK targets')
