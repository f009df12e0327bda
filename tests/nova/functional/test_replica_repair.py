"""Replicated volumes on real SPDK: repair, rebuild and replacement.

The replicas attach with their own reconnect settings
(``nvme_replica_*``, 1 s fast-fail) while the single-copy ``nvme_*``
ones keep their defaults (70 s): a guest writing through the mirror
still sees no I/O error when a storage target is SIGKILLed. What it
wrote while degraded must then be readable from the replica that was
lost: brought back (``spdk-vhost-replicas repair``) and rebuilt, or
replaced by a fresh lvol on a third storage target, and then the *other*
original storage target is killed, so that every read comes from it.
"""

import hashlib
import io
import json
import os
import time

import fixtures
from testtools import content

from nova_vhost_user import rebuild_failures
from nova_vhost_user import replicas_cmd
from os_brick_connector import connector
from os_brick_connector import mirror
from os_brick_connector import mirror_repair
from spdk_vhost_core import reconnect
from spdk_vhost_core import saved_config
from spdk_vhost_core import unreplayed
from testbed.guest import qemu
from testbed.guest import writer
from testbed import spdk_target
from testbed import waiting
from tests.nova.functional import targets
from tests.nova.functional import test_replicas as base

GROUP = base.GROUP
VOLUME = base.VOLUME
KIB = base.KIB
#: Written while a replica is lost: only a rebuild puts it there.
DEGRADED = (2048 * KIB, 1024 * KIB)


def member(volume_id, target):
    return mirror.member_controller(volume_id, target) + 'n1'


def sha(token, length):
    return hashlib.sha256(qemu.pattern_bytes(token, length)).hexdigest()


class RepairCase(base.StorageRestartCase):
    """Replica settings of their own; storage-b can come back."""

    auto_examine = False

    def setUp(self):
        super().setUp()
        self.addOnException(self.attach_logs)
        # Single-copy volumes keep riding out upgrades: only the
        # replicas' own settings make the failover fast.
        self.assertEqual(
            {reconnect.LOSS: reconnect.DEFAULT_LOSS,
             reconnect.DELAY: reconnect.DEFAULT_DELAY,
             reconnect.FAST_FAIL: reconnect.DEFAULT_FAST_FAIL},
            reconnect.from_conf(self.conf))

    def attach_logs(self, _exc_info):
        """What SPDK said: a hang or a lost member is told there."""
        for name, target in (('compute', self.target),
                             ('storage-b', self.second_target)):
            self.addDetail('%s-log' % name,
                           content.text_content(target.log()))

    def command(self, *argv):
        out = io.StringIO()
        code = replicas_cmd.main(list(argv), client=self.client,
                                 conf=self.conf, out=out)
        return code, out.getvalue()

    def props_file(self, props):
        """The connection_info an operator hands to the command."""
        path = self.useFixture(fixtures.TempDir()).join('props.json')
        with open(path, 'w') as sink:
            json.dump({'data': props}, sink)
        return path

    def guest_on(self, props):
        info = self.connect(props)
        guest = self.useFixture(qemu.GuestFixture(
            [qemu.VhostUserDisk(info['path'], 1)])).guest
        guest.execute(qemu.write_pattern('vda', base.KEPT[0], base.KEPT[1],
                                         'kept'))
        return info, guest

    def lose_second(self, guest):
        """Kill storage-b under the writer; write more while degraded."""
        guest.execute(qemu.writer_start('vda', base.WRITER[0],
                                        base.WRITER[1], 'mirror',
                                        blocks=base.BLOCKS))
        before = writer.writes(writer.writes_after(guest, 5, timeout=180))
        self.second_target.kill()
        writer.writes_after(guest, before + base.BLOCKS + 10, timeout=180)
        stopped = guest.execute(qemu.writer_stop())
        self.assertEqual('0', stopped['writer.failures'])
        print('replica loss (nvme_replica_fast_io_fail_timeout_sec=%d): '
              'longest guest write stall %s ms, %s writes'
              % (self.conf.nvme_replica_fast_io_fail_timeout_sec,
                 stopped['writer.max_gap_ms'], stopped['writer.writes']))
        guest.execute(qemu.write_pattern('vda', DEGRADED[0], DEGRADED[1],
                                         'degraded'))
        code, out = self.command('list')
        self.assertEqual(1, code, out)
        self.assertIn('%s degraded 1/2 in sync' % VOLUME, out)

    def wait_online(self, timeout=120):
        """Until the rebuild ends; prints how long it took."""
        start = time.monotonic()

        def online():
            state = mirror.status(self.client, VOLUME)
            return state if state['state'] == mirror.ONLINE else None
        state = waiting.wait_for(
            'the rebuild to end', online, timeout, interval=0.1,
            on_timeout=lambda: mirror.status(self.client, VOLUME))
        print('rebuild of %d MiB: %.2f s (polled every 0.1 s)'
              % (self.volume_mib(), time.monotonic() - start))
        return state

    def volume_mib(self):
        raid = self.client.bdev_get_bdevs(name=VOLUME)[0]
        return raid['num_blocks'] * raid['block_size'] // (1024 * KIB)

    def kill_first_and_read(self, guest, survivor):
        """The other original replica dies: all reads from ``survivor``."""
        self.storage_target.kill()
        block = qemu.pattern_bytes('mirror', base.BLOCK)
        self.assertEqual(hashlib.sha256(block * base.BLOCKS).hexdigest(),
                         self.read_sha(guest, base.WRITER[0],
                                       base.BLOCK * base.BLOCKS))
        self.assertEqual(sha('kept', base.KEPT[1]),
                         self.read_sha(guest, *base.KEPT))
        self.assertEqual(sha('degraded', DEGRADED[1]),
                         self.read_sha(guest, *DEGRADED))
        state = mirror.status(self.client, VOLUME)
        self.assertEqual(('degraded', [survivor + 'n1']),
                         (state['state'], state['members']))


class TestRepair(RepairCase):

    def test_returning_target_rebuilt_then_other_lost(self):
        props = self.replicated()
        saved_config.ConfigSaver(self.second, self.second_saved).save()
        info, guest = self.guest_on(props)
        self.lose_second(guest)
        second = mirror.member_controller(VOLUME, 'storage-b')
        # Its storage target still away: nothing to do, still degraded.
        code, out = self.command('repair', VOLUME, '--properties',
                                 self.props_file(props))
        self.assertEqual((1, 'degraded'), (code, out.split()[1]), out)
        self.second.close()
        self.second_target.start()
        # nvme_replica_ctrlr_loss_timeout_sec=-1: the controller stayed
        # and reconnects; its namespace is out of the RAID until repaired.
        spdk_target.wait_nvme_enabled(self.client, second)
        self.assertEqual('degraded',
                         mirror.status(self.client, VOLUME)['state'])
        code, out = self.command('repair', VOLUME)
        self.assertEqual(0, code, out)
        self.wait_online()
        self.assertEqual((0, '%s online 2/2 in sync\n' % VOLUME),
                         self.command('list'))
        # Idempotent: nothing more to do, nothing added.
        self.assertEqual(0, self.command('repair', VOLUME)[0])
        self.assertEqual(2, len(self.nvme_names()))

        self.kill_first_and_read(guest, second)
        guest.stop()
        self.connector.disconnect_volume(props, info)
        self.assert_nothing_left()

    def test_controller_given_up_attached_again(self):
        """A short replica loss timeout: repair needs the properties."""
        self.cfg.config(group=GROUP, nvme_replica_ctrlr_loss_timeout_sec=2)
        props = self.replicated()
        saved_config.ConfigSaver(self.second, self.second_saved).save()
        info = self.connect(props)
        self.second_target.kill()
        second = mirror.member_controller(VOLUME, 'storage-b')
        waiting.wait_for('SPDK to give up %s' % second,
                         lambda: second not in self.nvme_names(), 30)
        # No I/O since the loss: SPDK still counts the member until the
        # controller goes, then the slot is empty.
        self.assertEqual('degraded',
                         mirror.status(self.client, VOLUME)['state'])
        self.second.close()
        self.second_target.start()
        code, out = self.command('repair', VOLUME, '--properties',
                                 self.props_file(props))
        self.assertEqual(0, code, out)
        self.wait_online()
        self.assertEqual(2, len(self.nvme_names()))
        self.connector.disconnect_volume(props, info)
        self.assert_nothing_left()


class TestReplace(RepairCase):

    def third_member(self):
        """A fresh lvol of the volume, exported by a third target."""
        third = targets.client_of(self, targets.storage(self, 'storage-c'))
        export = self.export(VOLUME, storage=third)
        member = {key: export[key] for key in
                  ('transport', 'nqn', 'traddr', 'trsvcid', 'adrfam',
                   'ns_id', 'host_nqn')}
        member['target_id'] = 'storage-c'
        return member

    def test_healthy_replica_moved(self):
        """The old replica still in sync leaves the RAID first."""
        props = self.replicated()
        info = self.connect(props)
        new_props = mirror_repair.replace(self.client, props, 'storage-b',
                                          self.third_member(), self.conf)
        self.wait_online()
        self.assertEqual(
            sorted(member(VOLUME, target)
                   for target in ('storage-a', 'storage-c')),
            sorted(mirror.status(self.client, VOLUME)['members']))
        self.assertNotIn(mirror.member_controller(VOLUME, 'storage-b'),
                         self.nvme_names())
        self.connector.disconnect_volume(new_props, info)
        self.assert_nothing_left()

    def test_third_target_replaces_lost_then_other_lost(self):
        props = self.replicated()
        info, guest = self.guest_on(props)
        self.lose_second(guest)
        new_props = mirror_repair.replace(self.client, props, 'storage-b',
                                          self.third_member(), self.conf)
        self.assertEqual(['storage-a', 'storage-c'],
                         [r['target_id'] for r in new_props['replicas']])
        self.wait_online()
        new = mirror.member_controller(VOLUME, 'storage-c')
        self.assertEqual(
            sorted([mirror.member_controller(VOLUME, 'storage-a'), new]),
            sorted(self.nvme_names()))

        self.kill_first_and_read(guest, new)
        guest.stop()
        self.connector.disconnect_volume(new_props, info)
        self.assert_nothing_left()


class TestComputeRestartDegraded(RepairCase):
    """The compute target restarts while a copy's storage node is down.

    It comes back degraded on the copy left, the guest's disk with it;
    the saved config keeps the lost member's attach through every save,
    and once the node is back the watcher attaches it again and adds it
    back, and the mirror rebuilds.
    """

    def start_compute(self):
        self.saved = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'compute.json')
        return targets.remote_compute(self, json_config=self.saved)

    def setUp(self):
        super().setUp()
        self.cfg.config(group=GROUP, spdk_saved_config=self.saved)
        self.connector = connector.SpdkVhostConnector(
            None, conf=self.conf, client=self.client)
        self.locks = self.useFixture(fixtures.TempDir()).path

    def saved_attaches(self):
        doc = saved_config.ConfigSaver(self.client, self.saved).read()
        return saved_config.names(doc, unreplayed.ATTACH, 'name')

    def restore(self):
        out = io.StringIO()
        replicas_cmd.restore_once(self.client, out, {}, self.saved,
                                  self.locks)
        return out.getvalue()

    def test_degraded_mirror_comes_back_then_rebuilds(self):
        props = self.replicated()
        saved_config.ConfigSaver(self.second, self.second_saved).save()
        info = self.connect(props)
        guest = self.useFixture(qemu.GuestFixture(
            [qemu.VhostUserDisk(info['path'], 1, reconnect=1)])).guest
        guest.execute(qemu.write_pattern('vda', base.KEPT[0], base.KEPT[1],
                                         'kept'))
        self.lose_second(guest)
        second = mirror.member_controller(VOLUME, 'storage-b')
        self.client.close()
        self.target.restart(crash=True)
        state = mirror.status(self.client, VOLUME)
        self.assertEqual(('degraded', [member(VOLUME, 'storage-a')]),
                         (state['state'], state['members']))
        self.assertEqual(sha('degraded', DEGRADED[1]),
                         self.read_sha(guest, *DEGRADED))
        # A save that reads the target again keeps the lost member.
        saved_config.ConfigSaver(self.client, self.saved).save()
        self.assertIn(second, self.saved_attaches())
        self.assertIn('vhost-%s waits: its NVMe-oF subsystem' % VOLUME,
                      self.restore())
        self.second.close()
        self.second_target.start()
        self.assertIn('vhost-%s restored from the saved config' % VOLUME,
                      self.restore())
        spdk_target.wait_nvme_enabled(self.client, second)
        replicas_cmd.watch_once(self.client, io.StringIO(), {}, self.locks)
        self.wait_online()
        self.kill_first_and_read(guest, second)


class TestRebuildWithoutRoom(RepairCase):
    """A copy whose lvol store has no room for its rebuild.

    A rebuild writes every block: a thin copy needs its whole size. Out
    of room, SPDK fails the rebuild and drops the member, whose NVMe
    controller is connected again at once; the watcher says so and holds
    the member off instead of copying the volume over and over.
    """

    def test_held_off_until_room_is_made(self):
        props = self.replicated()
        info, guest = self.guest_on(props)
        kept, lost = member(VOLUME, 'storage-a'), member(VOLUME, 'storage-b')
        self.client.bdev_raid_remove_base_bdev(lost)
        filler = spdk_target.fill_lvstore(self.second.call, targets.LVS,
                                          leave_mib=2)
        now = [0.0]
        failures = rebuild_failures.RebuildFailures(clock=lambda: now[0])
        out, seen = io.StringIO(), {}
        locks = self.useFixture(fixtures.TempDir()).path

        def watch():
            replicas_cmd.watch_once(self.client, out, seen, locks, failures)
            return mirror.status(self.client, VOLUME)

        def said(text):
            return out.getvalue().count(text)

        def dropped():
            # The rebuild over and its member out: SPDK ends a failed
            # rebuild a moment before it drops the member.
            state = mirror.status(self.client, VOLUME)
            return not state['rebuilding'] and lost not in state['members']

        watch()
        waiting.wait_for('the rebuild to fail', dropped, 60, interval=0.1,
                         on_timeout=lambda: mirror.status(self.client,
                                                          VOLUME))
        state = watch()
        self.assertEqual(('degraded', [kept]),
                         (state['state'], state['members']), out.getvalue())
        self.assertEqual(1, said('the rebuild of %s failed' % lost),
                         out.getvalue())
        self.assertEqual(1, said('%s held after a failed rebuild' % lost))
        # Connected again (raid reset it): only the hold keeps it out.
        spdk_target.wait_nvme_enabled(
            self.client, mirror.member_controller(VOLUME, 'storage-b'))
        state = watch()
        self.assertEqual((None, [kept]),
                         (state['rebuilding'], state['members']))
        self.assertEqual(1, said('the rebuild of %s failed' % lost))

        self.second.bdev_lvol_delete(filler)
        now[0] += rebuild_failures.FIRST_WAIT + 1
        watch()
        self.wait_online()
        watch()
        self.assertTrue(out.getvalue().endswith(
            '%s online 2/2 in sync\n' % VOLUME), out.getvalue())
        # The rebuilt copy holds what the guest wrote.
        self.storage_target.kill()
        self.assertEqual(sha('kept', base.KEPT[1]),
                         self.read_sha(guest, *base.KEPT))
        guest.stop()
        self.connector.disconnect_volume(props, info)
        self.assert_nothing_left()
