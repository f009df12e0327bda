"""Volume migration and retype between pools through the real Cinder API.

``cinder migrate`` and ``cinder retype --migration-policy on-demand``
move a volume from lvol store lvs0 to lvs1 of the deployment's target
(the driver's own copy, SPDK's shallow copy); the data is read back over
NVMe/TCP with spdk_dd and the new lvol holds no more clusters than the
old one. Cinder's generic (host-assisted) migration is refused and the
volume stays where it was, unchanged. The base class checks that
nothing is left on the target.
"""

import os

from cinderclient import exceptions as cinder_exc

from testbed import waiting
from tests.deployment import base
from tests.deployment import test_connection
from tests.deployment import test_lifecycle

MIB = 1024 * 1024
LENGTH = 2 * MIB
FAR = 600 * MIB
LVS1 = 'lvs1'
lvol_name = test_lifecycle.lvol_name


def _migration(vol):
    return getattr(vol, 'os-vol-mig-status-attr:migstat')


class TestMigration(base.DeploymentTestCase):

    def _dd(self, bdev, offset, data=None):
        """Write ``data`` at ``offset`` of lvol ``bdev``, or read it."""
        return self.dd(bdev, offset, LENGTH, data)

    def _fill(self, volume):
        """Two regions of data; what reading them gives."""
        bdev = '%s/%s' % (base.LVS, lvol_name(volume))
        data = [os.urandom(LENGTH), os.urandom(LENGTH)]
        self._dd(bdev, 0, data[0])
        self._dd(bdev, FAR, data[1])
        return data, self._allocated(volume, base.LVS)

    def _allocated(self, volume, lvs):
        lvol = self.lvol(lvol_name(volume), lvs)
        return lvol['driver_specific']['lvol']['num_allocated_clusters']

    def _check_moved(self, volume, data, allocated):
        bdev = '%s/%s' % (LVS1, lvol_name(volume))
        self.assertEqual(data, [self._dd(bdev, 0), self._dd(bdev, FAR)])
        self.assertEqual(allocated, self._allocated(volume, LVS1))
        self.assertNotIn(lvol_name(volume), self.lvols(base.LVS))

    def _wait_migration(self, volume_id, timeout=base.TIMEOUT):
        """The volume once its migration ended (success or error)."""
        def ended():
            vol = self.admin_client().volumes.get(volume_id)
            if _migration(vol) in ('success', 'error') and vol.status in (
                    'available', 'in-use', 'error'):
                return vol
            return None
        return waiting.wait_for(
            'the migration of %s to end' % volume_id, ended, timeout,
            on_timeout=lambda: self._state(volume_id))

    def _state(self, volume_id):
        vol = self.admin_client().volumes.get(volume_id)
        return 'migration %s, status %s' % (_migration(vol), vol.status)

    def _host(self, volume):
        return getattr(volume, 'os-vol-host-attr:host')

    def test_migrate_to_the_other_pool(self):
        vtype = self.make_type(qos={'total_iops_sec': '3000'})
        vol = self.create_volume(1, volume_type=vtype.id)
        self.assertEqual(self.deployment.host + '#' + base.LVS,
                         self._host(vol))
        data, allocated = self._fill(vol)
        self.admin_client().volumes.migrate_volume(
            vol, self.deployment.host + '#' + LVS1, False, False)
        vol = self._wait_migration(vol.id)
        self.assertEqual(('success', 'available',
                          self.deployment.host + '#' + LVS1),
                         (_migration(vol),
                          vol.status, self._host(vol)))
        self._check_moved(vol, data, allocated)
        limits = self.lvol(lvol_name(vol), LVS1)['assigned_rate_limits']
        self.assertEqual(3000, limits['rw_ios_per_sec'])

    def test_retype_on_demand_to_a_type_of_the_other_pool(self):
        old = self.make_type(qos={'total_iops_sec': '1000'})
        new = self.make_type(qos={'total_iops_sec': '4000'},
                             extra_specs={'pool_name': LVS1})
        vol = self.create_volume(1, volume_type=old.id)
        data, allocated = self._fill(vol)
        self.cinder.volumes.retype(vol, new.id, 'on-demand')

        def retyped():
            found = self.admin_client().volumes.get(vol.id)
            if found.status == 'error':
                self.fail('retype: error, type %s' % found.volume_type)
            return found if (found.volume_type, found.status) == (
                new.name, 'available') else None
        vol = waiting.wait_for('the retype of %s' % vol.id, retyped,
                               base.TIMEOUT)
        self.assertEqual(self.deployment.host + '#' + LVS1, self._host(vol))
        self._check_moved(vol, data, allocated)
        limits = self.lvol(lvol_name(vol), LVS1)['assigned_rate_limits']
        self.assertEqual(4000, limits['rw_ios_per_sec'])

    def test_generic_migration_is_refused_before_any_copy(self):
        """force_host_copy: Cinder's own copy, which cannot attach here."""
        vol = self.create_volume(1)
        data, allocated = self._fill(vol)
        before = len(self.admin_client().volumes.list(
            search_opts={'all_tenants': 1}))
        self.admin_client().volumes.migrate_volume(
            vol, self.deployment.host + '#' + LVS1, True, False)
        vol = self._wait_migration(vol.id)
        self.assertEqual(('error', 'available',
                          self.deployment.host + '#' + base.LVS),
                         (_migration(vol),
                          vol.status, self._host(vol)))
        bdev = '%s/%s' % (base.LVS, lvol_name(vol))
        self.assertEqual(data, [self._dd(bdev, 0), self._dd(bdev, FAR)])
        self.assertEqual(allocated, self._allocated(vol, base.LVS))
        self.assertEqual({}, self.lvols(LVS1))
        # Cinder removed the volume it made for the copy.
        self.assertEqual(before, len(self.admin_client().volumes.list(
            search_opts={'all_tenants': 1})))
        with open(self.deployment.log_path('cinder-volume')) as log:
            self.assertIn('generic (host-assisted) migration cannot move',
                          log.read())

    def test_attached_volume_is_not_moved(self):
        """Cinder's generic migration for it is refused: it stays, in use."""
        vol = self.create_volume(1)
        _data, allocated = self._fill(vol)
        # No instance: Cinder would ask Nova (none here) before detaching.
        attachment = self.cinder.attachments.create(
            vol.id, test_connection.nova_connector())
        self.addCleanup(self.wait_status, self.cinder.volumes, vol.id,
                        'available')
        self.addCleanup(self.cinder.attachments.delete, attachment['id'])
        self.cinder.attachments.complete(attachment['id'])
        self.wait_status(self.cinder.volumes, vol.id, 'in-use')
        exported = self.exported(self.deployment.target)
        # A retype to a type of the other pool: the driver declines,
        # Cinder's generic migration is refused.
        new = self.make_type(extra_specs={'pool_name': LVS1})
        self.cinder.volumes.retype(vol, new.id, 'on-demand')
        self._check_stayed(vol, allocated, exported)
        self._migrate_when_taken(vol, self.deployment.host + '#' + LVS1)
        self._check_stayed(vol, allocated, exported)

    def _migrate_when_taken(self, vol, host):
        """Ask for the migration until Cinder takes it (no 400).

        Cinder writes the volume once more after a retype's failed
        migration; a migration asked before that may be refused. Once
        taken, its status is ``starting`` until it ends.
        """
        refused = []

        def taken():
            try:
                self.admin_client().volumes.migrate_volume(vol, host, False,
                                                           False)
            except cinder_exc.BadRequest as err:
                refused[:] = [err]
                return False
            return True
        waiting.wait_for('Cinder to take the migration of %s' % vol.id,
                         taken, base.TIMEOUT,
                         on_timeout=lambda: 'refused: %s' % refused)

    def _check_stayed(self, vol, allocated, exported):
        """The attached volume's migration failed; nothing moved."""
        vol = self._wait_migration(vol.id)
        self.assertEqual(('error', 'in-use', '__DEFAULT__',
                          self.deployment.host + '#' + base.LVS),
                         (_migration(vol),
                          vol.status, vol.volume_type, self._host(vol)))
        self.assertEqual({}, self.lvols(LVS1))
        self.assertEqual(allocated, self._allocated(vol, base.LVS))
        self.assertEqual(exported, self.exported(self.deployment.target))
