"""Live migration through Nova's API, between two compute hosts.

The hosts (:mod:`migration_computes`) attach the deployment's volumes
over NVMe/TCP with their own SPDK targets. A server booted from a volume
on one, with a second, replicated volume hot-attached (three copies, one
on each storage node: the compute host mirrors them) and a writer in the
guest on it, goes to the other with ``nova live-migration``; the same
guest keeps running there (its boot id, its writer), no write fails, the
data reads back, and the SPDK side moved: the destination's target has
the controllers, NVMe-oF connections and mirror, the source's has none,
and the export of each volume and copy admits only the destination's
host NQN. Then the storage
node of one of the replicated volume's copies dies whole under the
guest's writer (:meth:`TestNovaLiveMigration.lose_the_copy_node`), and
the boot volume's storage target crashes and restarts under another
(:meth:`TestNovaLiveMigration.restart_the_boot_target`), then is
upgraded on its node (:meth:`TestNovaLiveMigration.upgrade_the_boot_node`).
"""

import hashlib
import time

import testtools

from spdk_vhost_core import host_settings
from testbed.guest import qemu
from testbed.guest import writer
from testbed import target_upgrade
from tests.deployment import cloud_guest
from tests.deployment import migration_computes
from tests.deployment import nova_base
from tests.deployment import test_replicated

try:
    import libvirt
except ImportError:  # NovaTestCase's setUp reports it
    libvirt = None

MIB = 1024 * 1024
GIB = 1024 * MIB
SOURCE, DESTINATION = sorted(migration_computes.HOSTS)
# Written once before the migration, rewritten all along by the writer.
BASE = (0, MIB, 'before-migration')
WRITER = (4 * MIB, 256 * 1024, 'while-migrating')
# On the boot volume, far past the root image the guest reads.
BOOT_WRITER = (512 * MIB, 256 * 1024, 'while-restarting')
MIGRATION_TIMEOUT = 300


class TestNovaLiveMigration(nova_base.NovaTestCase):

    def setUp(self):
        super().setUp()
        self.computes = self.useFixture(
            migration_computes.MigrationComputes(self.cloud))
        self.addOnException(self._attach_compute_logs)
        print('MIGRATION computes started in %.1f s'
              % self.computes.startup_seconds)
        self.hosts = self.computes.hosts

    def _attach_compute_logs(self, exc_info):
        for name, text in self.computes.logs(8000).items():
            self.addDetail(name, testtools.content.text_content(text))

    def libvirt_of(self, host):
        conn = libvirt.open(host.uri)
        self.addCleanup(conn.close)
        return conn

    def host_of(self, server_id):
        return getattr(self.nova.servers.get(server_id),
                       'OS-EXT-SRV-ATTR:host')

    def exports(self, boot, data):
        """(volume id, target) of the boot volume's and each copy's export."""
        return [(boot.id, None), (data.id, None)] + [
            (data.id, target)
            for target, _agent, _lvs in self.deployment.storage[1:]]

    def migration_done(self, server_id):
        """True once completed; a failed migration fails the test."""
        statuses = [m.status for m in self.nova.migrations.list(
            instance_uuid=server_id)]
        failed = set(statuses) & {'error', 'failed', 'cancelled'}
        if failed:
            self.fail('live migration %s: %s' % (
                ', '.join(sorted(failed)),
                getattr(self.nova.servers.get(server_id), 'fault', None)))
        return statuses == ['completed']

    def assert_written(self, shell, dev, spec):
        """The guest reads pattern ``spec`` (offset, length, token)."""
        offset, length, token = spec
        self.assertEqual(
            hashlib.sha256(qemu.pattern_bytes(token, length)).hexdigest(),
            shell.execute(qemu.read_back(dev, offset, length))[
                '%s.read@%d' % (dev, offset)])

    def assert_root_intact(self, shell):
        self.assertEqual(cloud_guest.root_sha256(), shell.execute(
            qemu.read_back('vda', 0, cloud_guest.ROOT_BYTES))['vda.read@0'])

    @staticmethod
    def attached(host):
        """(vhost controllers, NVMe-oF controllers, mirrors) of a host."""
        return (sorted(c['ctrlr'] for c in host.rpc('vhost_get_controllers')),
                len(host.rpc('bdev_nvme_get_controllers')),
                sorted((raid['name'], raid['state'],
                        raid['num_base_bdevs_operational'])
                       for raid in host.rpc('bdev_raid_get_bdevs',
                                            {'category': 'all'})))

    def test_live_migrate_writing_guest(self):
        src, dst = self.hosts[SOURCE], self.hosts[DESTINATION]
        boot = self.boot_volume()
        data = self.create_volume(1, volume_type=self.make_type(
            extra_specs=test_replicated.THREE_COPIES).id)
        server = self.boot_from_volume(boot.id, host=SOURCE)
        self.assertEqual(SOURCE, self.host_of(server.id))
        self.nova.volumes.create_server_volume(server.id, data.id)
        self.wait_status(self.cinder.volumes, data.id, 'in-use')
        shell = self.console(server, self.libvirt_of(src))
        self.wait_disk(shell, 'vdb')
        boot_id = shell.execute(
            'gt_result b "$(cat /proc/sys/kernel/random/boot_id)"')['b']
        wrote = shell.execute(qemu.write_pattern('vdb', *BASE))
        shell.execute(qemu.writer_start('vdb', *WRITER))

        controllers = sorted('vhost-' + v.id for v in (boot, data))
        # One NVMe controller for the boot volume, one per copy.
        on_host = (controllers, 4, [(data.id, 'online', 3)])
        self.assertEqual(on_host, self.attached(src))
        for volume_id, target in self.exports(boot, data):
            self.assertEqual([src.host_nqn],
                             self.admitted(volume_id, target))

        started = time.monotonic()
        self.nova.servers.live_migrate(server, host=DESTINATION,
                                       block_migration=False)
        self.wait_for(lambda: self.migration_done(server.id),
                      'the live migration', MIGRATION_TIMEOUT)
        self.wait_server(server.id, 'ACTIVE', MIGRATION_TIMEOUT)
        print('MIGRATION through Nova API: %.1f s from the request to '
              'ACTIVE on the destination' % (time.monotonic() - started))
        self.assertEqual(DESTINATION, self.host_of(server.id))

        # The same guest, on the destination's libvirtd, still writing.
        shell = self.console(server, self.libvirt_of(dst))
        self.assertEqual(boot_id, shell.execute(
            'gt_result b "$(cat /proc/sys/kernel/random/boot_id)"')['b'])
        # Still writing, here.
        writer.writes_after(shell)
        result = shell.execute(qemu.writer_stop(), timeout=60)
        self.assertEqual('0', result['writer.failures'])
        offset, length, token = BASE
        self.assertEqual(wrote['vdb.wrote@%d' % offset], shell.execute(
            qemu.read_back('vdb', offset, length))['vdb.read@%d' % offset])
        self.assert_written(shell, 'vdb', WRITER)
        self.assert_root_intact(shell)

        # The SPDK side moved with it.
        self.assertEqual(on_host, self.attached(dst))
        self.assertEqual(([], 0, []), self.attached(src))
        for volume_id, target in self.exports(boot, data):
            self.assertEqual([dst.host_nqn],
                             self.admitted(volume_id, target))
        self.assertRaises(libvirt.libvirtError,
                          self.libvirt_of(src).lookupByUUIDString, server.id)
        # The same guest, to lose the node of its data volume's copy,
        # then to see the boot volume's storage target crash.
        self.lose_the_copy_node(server, shell, data, dst)
        self.restart_the_boot_target(shell, boot, dst)
        self.upgrade_the_boot_node(shell, boot, dst)

    def lose_the_copy_node(self, server, shell, data, host):
        """Its replica's storage node dies whole under the writing guest.

        The guest writes on through the two copies left, and the volume
        grows, is snapshotted (those copies prove the snapshot sound),
        detached, attached again and deleted while the node is away.
        Back, the node's target holds what its own saved config says
        (the copy, exported to ``host``), and cinder-volume's next sweep
        catches it up: the deleted volume's copy and export go.
        """
        dep = self.deployment
        node = (dep.replica_target, dep.replica_agent)
        copy = 'replica-%s' % data.id
        shell.execute(qemu.writer_start('vdb', *WRITER))
        writer.writes_after(shell)
        dep.kill_storage_node(*node)
        self.addCleanup(dep.start_storage_node, *node)
        writer.writes_after(shell)
        result = shell.execute(qemu.writer_stop(), timeout=60)
        self.assertEqual('0', result['writer.failures'])
        print('STORAGE NODE LOST under the writer: the guest stalled at '
              'most %s ms' % result['writer.max_gap_ms'])
        self.assertEqual([(data.id, 'online', 2)], self.attached(host)[2])

        self.cinder.volumes.extend(data, 2)
        self.wait_for(lambda: self.guest_size(shell, 'vdb') == 2 * GIB,
                      'the guest to see vdb grow to 2 GiB')
        self.wait_status(self.cinder.volumes, data.id, 'in-use')
        self.delete_snapshot(self.create_snapshot(data.id, force=True).id)
        started = time.monotonic()
        self.detach(server.id, data.id)
        self.wait_status(self.cinder.volumes, data.id, 'available')
        detached = time.monotonic()
        self.wait_for(lambda: not self.has_disk(shell, 'vdb'),
                      'vdb to leave the guest')
        attaching = time.monotonic()
        self.nova.volumes.create_server_volume(server.id, data.id)
        self.wait_status(self.cinder.volumes, data.id, 'in-use')
        self.wait_disk(shell, 'vdb')
        print('STORAGE NODE AWAY: detach %.1f s, attach until the guest '
              'sees the disk %.1f s' % (detached - started,
                                        time.monotonic() - attaching))
        self.assertEqual(2 * GIB, self.guest_size(shell, 'vdb'))
        self.assert_written(shell, 'vdb', WRITER)
        self.assertEqual([(data.id, 'online', 2)], self.attached(host)[2])
        self.detach(server.id, data.id)
        self.wait_status(self.cinder.volumes, data.id, 'available')
        self.delete_volume(data.id)

        target, node_agent = node
        target.start()
        self.assertIn(copy, self.lvols(target=target))
        self.assertEqual([host.host_nqn], self.admitted(data.id, target))
        node_agent.start()
        started = time.monotonic()
        self.wait_for(lambda: copy not in self.lvols(target=target) and
                      not self.admitted(data.id, target),
                      'storage-b to be caught up')
        print('STORAGE NODE BACK: caught up in %.1f s'
              % (time.monotonic() - started))

    def restart_the_boot_target(self, shell, boot, host):
        """The boot volume's storage target crashes and restarts.

        A single-copy volume under the guest's writer: its writes wait
        while the node's ``nvmf_tgt`` is down (SIGKILL), which starts
        again from the config its agent saved on the node (the export,
        ``host`` admitted, its DH-HMAC-CHAP keys); the compute host's
        NVMe-oF controller reconnects and no write fails.
        """
        dep = self.deployment

        def restart():
            dep.target.kill()
            self.addCleanup(dep.start_storage_node, dep.target, dep.agent)
            started = time.monotonic()
            dep.target.start()
            return time.monotonic() - started
        took, stall = self.boot_writes_across(shell, boot, host, restart)
        print('STORAGE TARGET RESTARTED under a single-copy volume\'s '
              'writer: back in %.1f s, the guest stalled at most %s ms'
              % (took, stall))
        self.assert_root_intact(shell)

    def upgrade_the_boot_node(self, shell, boot, host):
        """``spdk-vhost-upgrade`` on the boot volume's storage node.

        Run on the node under the guest's writer, as its operator would,
        it reads the node's own record of connected hosts (its agent
        wrote it there, beside the node's saved config), finds that
        ``host`` rides out the upgrade's window, so needs no ``--force``,
        and replaces the node's ``nvmf_tgt`` (by the same build: the
        deployment's others go on beside it) with one that loads that
        saved config. No write fails, and Cinder still manages the
        volume, through the agent and the new target.
        """
        dep = self.deployment
        record = host_settings.read(
            dep.target.host.path(dep.agent.saved_config))
        self.assertEqual([host.host_nqn], sorted(record))
        said, stall = self.boot_writes_across(
            shell, boot, host,
            lambda: target_upgrade.upgrade(dep.target, dep.agent.saved_config))
        self.assertIn('every connected NVMe-oF host rides out',
                      '\n'.join(said))
        print('STORAGE NODE UPGRADED under a single-copy volume\'s writer '
              '(the command: "%s"): the guest stalled at most %s ms'
              % (said[-1], stall))
        self.delete_snapshot(self.create_snapshot(boot.id, force=True).id)

    def boot_writes_across(self, shell, boot, host, disrupt):
        """``disrupt()`` under the guest's writer on its boot volume.

        Then the boot volume's export admits ``host`` alone, the writer
        wrote on, no write failed and what it wrote reads back. Returns
        what ``disrupt`` returned and the guest's longest stall (ms).
        """
        shell.execute(qemu.writer_start('vda', *BOOT_WRITER))
        writer.writes_after(shell)
        value = disrupt()
        self.assertEqual([host.host_nqn], self.admitted(boot.id))
        writer.writes_after(shell)
        result = shell.execute(qemu.writer_stop(), timeout=60)
        self.assertEqual('0', result['writer.failures'])
        self.assert_written(shell, 'vda', BOOT_WRITER)
        return value, result['writer.max_gap_ms']
