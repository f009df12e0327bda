"""A multiattach volume shared by two servers, through Nova's API.

A volume type with ``multiattach='<is> True'`` is scheduled to the SPDK
backend only because its pools report multiattach. Two servers of the
compute host attach the same volume: each gets its own vhost controller
on the one bdev, both see the volume id as the disk serial, and what one
writes (raw, no file system) the other reads. Detaching one leaves the
other reading and writing; after both, nothing of it is on the target.
On two compute hosts (:mod:`migration_computes`, attaching over
NVMe/TCP) the volume's export admits both host NQNs, and detaching one
server removes its host only.
"""

import testtools

from tests.deployment import migration_computes
from tests.deployment import nova_base

try:
    import libvirt
except ImportError:  # NovaTestCase's setUp reports it
    libvirt = None

MIB = 1024 * 1024
FIRST = (MIB, MIB)
SECOND = (4 * MIB, MIB)


class TestMultiattach(nova_base.NovaTestCase):

    def attachments(self, volume_id):
        return len(self.cinder.volumes.get(volume_id).attachments)

    def volume_controllers(self, volume_id):
        return sorted(name for name in self.controllers()
                      if name.startswith('vhost-%s.' % volume_id))

    def test_two_servers_one_volume(self):
        shared = self.make_type(extra_specs={'multiattach': '<is> True'})
        data = self.create_volume(1, volume_type=shared.id)
        self.assertTrue(self.cinder.volumes.get(data.id).multiattach)
        servers = [self.boot_from_volume(self.boot_volume().id)
                   for _server in range(2)]
        shells = [self.console(server) for server in servers]

        for count, server in enumerate(servers, 1):
            self.nova.volumes.create_server_volume(server.id, data.id)
            self.wait_for(lambda: self.attachments(data.id) == count,
                          '%d attachments of %s' % (count, data.id))
        self.wait_status(self.cinder.volumes, data.id, 'in-use')
        for shell in shells:
            self.wait_disk(shell, 'vdb')
            self.assertEqual(data.id[:20], self.serial(shell, 'vdb'))
        self.assertEqual(2, len(self.volume_controllers(data.id)))

        # One writes, the other reads it back (O_DIRECT on both sides).
        wrote = shells[0].execute('gt_write vdb %d %d first' % FIRST)
        got = shells[1].execute('gt_read vdb %d %d' % FIRST)
        self.assertEqual(wrote['vdb.wrote@%d' % FIRST[0]],
                         got['vdb.read@%d' % FIRST[0]])

        # Detach the first: the second keeps its disk and works on.
        self.nova.volumes.delete_server_volume(servers[0].id, data.id)
        self.wait_for(lambda: self.attachments(data.id) == 1,
                      'the first server to detach %s' % data.id)
        self.wait_for(lambda: not self.has_disk(shells[0], 'vdb'),
                      'vdb to leave the first guest')
        self.wait_for(lambda: len(self.volume_controllers(data.id)) == 1,
                      'the first guest\'s controller to go')
        wrote_2 = shells[1].execute('gt_write vdb %d %d second' % SECOND)
        for (offset, length), sha in ((FIRST, wrote['vdb.wrote@%d'
                                                    % FIRST[0]]),
                                      (SECOND, wrote_2['vdb.wrote@%d'
                                                       % SECOND[0]])):
            got = shells[1].execute('gt_read vdb %d %d' % (offset, length))
            self.assertEqual(sha, got['vdb.read@%d' % offset])

        self.nova.volumes.delete_server_volume(servers[1].id, data.id)
        self.wait_status(self.cinder.volumes, data.id, 'available')
        self.wait_for(lambda: not self.has_disk(shells[1], 'vdb'),
                      'vdb to leave the second guest')
        self.assertEqual([], self.volume_controllers(data.id))
        self.assertNotIn(data.id, [
            b['name'] for b in self.compute_rpc('bdev_get_bdevs')])


class TestMultiattachTwoHosts(nova_base.NovaTestCase):

    def setUp(self):
        super().setUp()
        self.computes = self.useFixture(
            migration_computes.MigrationComputes(self.cloud))
        self.addOnException(self._attach_compute_logs)
        self.hosts = [self.computes.hosts[name]
                      for name in sorted(migration_computes.HOSTS)]

    def _attach_compute_logs(self, exc_info):
        for name, text in self.computes.logs(8000).items():
            self.addDetail(name, testtools.content.text_content(text))

    def shell_on(self, server, host):
        conn = libvirt.open(host.uri)
        self.addCleanup(conn.close)
        return self.console(server, conn)

    def attachments(self, volume_id):
        return len(self.cinder.volumes.get(volume_id).attachments)

    def test_one_volume_on_two_hosts(self):
        shared = self.make_type(extra_specs={'multiattach': '<is> True'})
        data = self.create_volume(1, volume_type=shared.id)
        servers = [self.boot_from_volume(self.boot_volume().id,
                                         host=host.name)
                   for host in self.hosts]
        shells = [self.shell_on(server, host)
                  for server, host in zip(servers, self.hosts)]
        for count, server in enumerate(servers, 1):
            self.nova.volumes.create_server_volume(server.id, data.id)
            self.wait_for(lambda: self.attachments(data.id) == count,
                          '%d attachments of %s' % (count, data.id))
        for shell in shells:
            self.wait_disk(shell, 'vdb')
            self.assertEqual(data.id[:20], self.serial(shell, 'vdb'))
        self.assertEqual(sorted(h.host_nqn for h in self.hosts),
                         self.admitted(data.id))

        wrote = shells[0].execute('gt_write vdb %d %d first' % FIRST)
        got = shells[1].execute('gt_read vdb %d %d' % FIRST)
        self.assertEqual(wrote['vdb.wrote@%d' % FIRST[0]],
                         got['vdb.read@%d' % FIRST[0]])

        # Detach on the first host: only that host leaves the export.
        self.nova.volumes.delete_server_volume(servers[0].id, data.id)
        self.wait_for(lambda: self.attachments(data.id) == 1,
                      'the first server to detach %s' % data.id)
        self.wait_for(lambda: not self.has_disk(shells[0], 'vdb'),
                      'vdb to leave the first guest')
        self.assertEqual([self.hosts[1].host_nqn], self.admitted(data.id))
        self.assertEqual(1, len(self.hosts[0].rpc(
            'bdev_nvme_get_controllers')))   # the boot volume's only
        wrote_2 = shells[1].execute('gt_write vdb %d %d second' % SECOND)
        got = shells[1].execute('gt_read vdb %d %d' % SECOND)
        self.assertEqual(wrote_2['vdb.wrote@%d' % SECOND[0]],
                         got['vdb.read@%d' % SECOND[0]])
        got = shells[1].execute('gt_read vdb %d %d' % FIRST)
        self.assertEqual(wrote['vdb.wrote@%d' % FIRST[0]],
                         got['vdb.read@%d' % FIRST[0]])

        self.nova.volumes.delete_server_volume(servers[1].id, data.id)
        self.wait_status(self.cinder.volumes, data.id, 'available')
        self.assertEqual([], self.admitted(data.id))
