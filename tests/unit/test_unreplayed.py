"""What a restarted target could not replay stays in its saved config."""

import json
import os

import fixtures

from spdk_vhost_core import saved_config
from spdk_vhost_core import unreplayed
from tests import base
from tests.unit import test_saved_config

VOLUME = 'vol-a'
ATTACH = {'method': 'bdev_nvme_attach_controller',
          'params': {'name': VOLUME, 'traddr': '10.0.0.2', 'trsvcid': '4420',
                     'subnqn': 'nqn.2016-06.io.spdk:cinder:' + VOLUME}}
QOS = {'method': 'bdev_set_qos_limit',
       'params': {'name': VOLUME + 'n1', 'rw_ios_per_sec': 1000}}
CREATE = {'method': 'vhost_create_blk_controller',
          'params': {'ctrlr': 'vhost-' + VOLUME, 'dev_name': VOLUME + 'n1'}}
COALESCE = {'method': 'vhost_controller_set_coalescing',
            'params': {'ctrlr': 'vhost-' + VOLUME, 'delay_base_us': 10}}
LAYER = {'method': 'bdev_passthru_create',
         'params': {'name': 'vol-b', 'base_bdev_name': 'lvol-b'}}
LOCAL = {'method': 'vhost_create_blk_controller',
         'params': {'ctrlr': 'vhost-vol-b', 'dev_name': 'vol-b'}}


def doc(bdev, vhost):
    return {'subsystems': [{'subsystem': 'bdev', 'config': list(bdev)},
                           {'subsystem': 'vhost_blk', 'config': list(vhost)}]}


SAVED = doc([LAYER, ATTACH, QOS], [LOCAL, CREATE, COALESCE])
MEMBER_A = {'method': 'bdev_nvme_attach_controller',
            'params': {'name': 'vol-m.0a0a', 'traddr': '10.0.0.3'}}
MEMBER_B = {'method': 'bdev_nvme_attach_controller',
            'params': {'name': 'vol-m.0b0b', 'traddr': '10.0.0.4'}}
MIRROR_QOS = {'method': 'bdev_set_qos_limit',
              'params': {'name': 'vol-m', 'rw_ios_per_sec': 500}}
MIRROR = {'method': 'vhost_create_blk_controller',
          'params': {'ctrlr': 'vhost-vol-m', 'dev_name': 'vol-m'}}
MIRRORED = doc([MEMBER_A, MEMBER_B, MIRROR_QOS], [MIRROR])
# The target after a restart with the storage node down.
LIVE = doc([LAYER], [LOCAL])


class TestChains(base.TestCase):

    def test_a_remote_controller_is_a_chain(self):
        [chain] = unreplayed.chains(SAVED)
        self.assertEqual(('vhost-' + VOLUME, VOLUME + 'n1', [ATTACH], [QOS],
                          [CREATE, COALESCE], None), tuple(chain))

    def test_a_mirror_is_a_chain_of_its_members(self):
        [chain] = unreplayed.chains(MIRRORED)
        self.assertEqual(('vhost-vol-m', 'vol-m', [MEMBER_A, MEMBER_B],
                          [MIRROR_QOS], [MIRROR], 'vol-m'), tuple(chain))

    def test_namespace_owner(self):
        self.assertEqual(VOLUME, unreplayed.namespace_owner(VOLUME + 'n1'))
        self.assertIsNone(unreplayed.namespace_owner('lvol-b'))
        self.assertIsNone(unreplayed.namespace_owner(None))


class TestKeep(base.TestCase):

    def kept(self, new, reread=None):
        return unreplayed.keep(SAVED, json.loads(json.dumps(new)), reread)

    def test_whole_save_keeps_the_unreplayed_chain(self):
        self.assertEqual(doc([LAYER, ATTACH, QOS], [LOCAL, CREATE, COALESCE]),
                         self.kept(LIVE))

    def test_bdev_reread_keeps_it_while_its_controller_is_saved(self):
        edited = doc([LAYER], [LOCAL, CREATE, COALESCE])
        self.assertEqual(doc([LAYER, ATTACH, QOS],
                             [LOCAL, CREATE, COALESCE]),
                         self.kept(edited, ('bdev',)))

    def test_a_detach_drops_it(self):
        # The connector took its controller out of the file on purpose.
        edited = doc([LAYER], [LOCAL])
        self.assertEqual(edited, self.kept(edited, ('bdev',)))

    def test_an_attached_controller_is_the_target_s_to_say(self):
        live = doc([LAYER, dict(ATTACH, params={'name': VOLUME})], [LOCAL])
        self.assertEqual(live, self.kept(live))

    def test_nothing_read_from_the_target_nothing_to_keep(self):
        edited = doc([LAYER], [LOCAL])
        self.assertEqual(edited, self.kept(edited, ('nvmf',)))

    def test_a_target_without_vhost_gets_the_subsystem(self):
        live = {'subsystems': [{'subsystem': 'bdev', 'config': None}]}
        kept = self.kept(live)
        self.assertEqual([ATTACH, QOS], unreplayed.config(kept, 'bdev'))
        self.assertEqual([CREATE, COALESCE],
                         unreplayed.config(kept, 'vhost_blk'))

    def test_no_old_file(self):
        self.assertEqual(LIVE, unreplayed.keep(None, LIVE))


class Raids(object):
    """A client that only answers bdev_raid_get_bdevs."""

    def __init__(self, *raids):
        self.raids = list(raids)

    def bdev_raid_get_bdevs(self):
        return self.raids


def raid(*members):
    """Mirror vol-m as SPDK lists it: a lost member's slot has no name."""
    return {'name': 'vol-m', 'base_bdevs_list': [
        {'name': member, 'is_configured': bool(member)}
        for member in members]}


class TestKeepMirror(base.TestCase):

    def kept(self, new, *raids):
        return unreplayed.keep(MIRRORED, json.loads(json.dumps(new)),
                               None, Raids(*raids))

    def test_lost_member_kept_while_the_mirror_lacks_it(self):
        live = doc([MEMBER_A, MIRROR_QOS], [MIRROR])
        self.assertEqual(doc([MEMBER_A, MIRROR_QOS, MEMBER_B], [MIRROR]),
                         self.kept(live, raid('vol-m.0a0an1', None)))

    def test_unassembled_mirror_keeps_its_controller_and_limits(self):
        live = doc([MEMBER_A], [])
        self.assertEqual(doc([MEMBER_A, MEMBER_B, MIRROR_QOS], [MIRROR]),
                         self.kept(live))

    def test_a_replaced_member_goes(self):
        member_c = dict(MEMBER_B, params={'name': 'vol-m.0c0c'})
        live = doc([MEMBER_A, member_c, MIRROR_QOS], [MIRROR])
        self.assertEqual(live, self.kept(
            live, raid('vol-m.0a0an1', 'vol-m.0c0cn1')))


class TestSaverKeeps(base.TestCase):
    """Every kind of save the drivers and the units make keeps it."""

    def setUp(self):
        super().setUp()
        self.path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                 'spdk_tgt.json')
        saved_config.write_atomic(self.path, SAVED)
        self.client = test_saved_config.FakeClient(LIVE)
        self.saver = saved_config.ConfigSaver(self.client, self.path)

    def saved_chains(self):
        with open(self.path) as f:
            return unreplayed.chains(json.load(f))

    def test_whole_save(self):
        self.saver.save()
        self.assertEqual(unreplayed.chains(SAVED), self.saved_chains())

    def test_save_that_reads_bdev_again(self):
        self.saver.save(('bdev',))
        self.assertEqual(['bdev'], self.client.read)
        self.assertEqual(unreplayed.chains(SAVED), self.saved_chains())

    def test_detach_edits_it_out(self):
        def without(config):
            return [c for c in config
                    if c['params'].get('ctrlr') != 'vhost-' + VOLUME]
        self.saver.save(('bdev',), {'vhost_blk': without})
        self.assertEqual([], self.saved_chains())

    def test_save_by_a_caller_holding_the_lock(self):
        with saved_config.file_lock(self.path):
            self.saver.save_locked()
        self.assertEqual(unreplayed.chains(SAVED), self.saved_chains())
