"""Where a replicated volume's other copies go: room for a rebuild."""

from cinder import exception

from cinder_spdk_vhost import peers
from cinder_spdk_vhost import replica_type
from cinder_spdk_vhost import replication
from cinder_spdk_vhost import rollback
from tests.cinder.unit import driver_base as dbase

#: A copy of a 1 GiB volume: its size and the superblock's room.
COPY_MIB = 1025


class RoomForARebuildTest(dbase.DriverTestCase):
    """A peer takes a copy only where every copy it holds can be whole.

    Copies are thin, but the compute host rebuilds a lost one by writing
    every block: the rebuild of a copy placed where only free clusters
    were counted would fail where the store runs out, every time.
    """

    clusters = 2 * COPY_MIB + 500  # room for two whole copies, not three

    def setUp(self):
        super().setUp()
        self.replicas = replication.Replicas(
            self.driver.pools, [peers.Peer('spdk-b', peers.section('spdk-b'))],
            'here')
        self.vtype = self.make_type(extra_specs={
            replica_type.EXTRA_SPEC: '2'})

    def place(self):
        volume = self.make_volume(vtype=self.vtype)
        with rollback.Rollback('create') as rb:
            return volume, self.replicas.place(volume, {}, rb)

    def test_unwritten_copies_keep_their_room(self):
        self.place()
        self.place()
        # Nothing is written: every cluster is free, but promised.
        store, = self.fake.bdev_lvol_get_lvstores()
        self.assertEqual(self.clusters, store['free_clusters'])
        err = self.assertRaises(exception.VolumeBackendAPIException,
                                self.place)
        self.assertIn('only 0 of spdk_replica_targets', str(err))
        self.assertEqual(1, self.replicas.available())

    def test_a_written_copy_holds_its_room_itself(self):
        _first, made = self.place()
        (_peer, alias), = made
        self.fake.lvol(alias)['allocated'] = COPY_MIB
        self.place()
        self.assertRaises(exception.VolumeBackendAPIException, self.place)

    def test_a_deleted_copy_gives_its_room_back(self):
        self.place()
        _second, made = self.place()
        (peer, alias), = made
        self.replicas.delete_copy(peer, peer.find(alias.split('/')[1]),
                                  'second')
        self.place()

    def test_a_copy_grows_only_where_its_rebuild_still_fits(self):
        driver = self.make_driver(spdk_replica_targets=['spdk-b'])
        volume = self.make_volume(vtype=self.vtype)
        driver.create_volume(volume)
        self.place()  # 500 MiB of room left
        err = self.assertRaises(exception.VolumeBackendAPIException,
                                driver.extend_volume, volume, 2)
        self.assertIn('would need 1024 MiB more room in lvol store lvs0',
                      str(err))
        # Nothing grew: the own copy is back to its size.
        self.assertEqual(COPY_MIB * dbase.MIB,
                         self.fake.lvol(self.alias(volume))['size'])
