"""Deleting a family of volumes and snapshots in every order a tenant can.

The family: a volume ``V``, its snapshot ``S``, a volume ``F`` made from
``S`` and a clone ``C`` of ``V``. Cinder itself refuses to delete ``V``
while ``S`` exists (unless cascading); the driver refuses nothing (a
snapshot ``F`` still needs is kept, marked deleted, until ``F`` or ``V``
goes), so every order with ``S`` before ``V`` succeeds, plus a cascading
delete of ``V`` (which takes ``S`` with it) at any point. After each
step what remains must still be ``available``; after the last nothing
may be left on the SPDK target (checked by the base class).
"""

import itertools

from tests.deployment import base


def _orders():
    for order in itertools.permutations('CFSV'):
        if order.index('S') < order.index('V'):
            yield ''.join(order)
    for order in itertools.permutations('CFv'):
        yield ''.join(order)


class TestDeleteOrder(base.DeploymentTestCase):

    def _family(self):
        vol = self.create_volume(1)
        snap = self.create_snapshot(vol.id)
        return {'V': vol.id, 'S': snap.id,
                'F': self.create_volume(1, snapshot_id=snap.id).id,
                'C': self.create_volume(1, source_volid=vol.id).id}

    def _check_left(self, family, deleted):
        for key, obj_id in family.items():
            if key in deleted:
                continue
            manager = (self.cinder.volume_snapshots if key == 'S'
                       else self.cinder.volumes)
            self.assertEqual('available', manager.get(obj_id).status)

    def _delete_in_order(self, order):
        family = self._family()
        deleted = set()
        for step in order:
            if step == 'S':
                self.delete_snapshot(family['S'])
            else:
                cascade = step == 'v'
                self.delete_volume(family[step.upper()], cascade=cascade)
                if cascade:
                    deleted.add('S')
            deleted.add(step.upper())
            self._check_left(family, deleted)


def _make_test(order):
    def test(self):
        self._delete_in_order(order)
    test.__doc__ = 'Delete in the order %s (v: cascading).' % order
    return test


for _order in _orders():
    setattr(TestDeleteOrder, 'test_delete_%s' % _order, _make_test(_order))
