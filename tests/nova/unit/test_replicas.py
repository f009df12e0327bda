"""The replicated volume's names and states, as SPDK's raid answers.

The answers below have the shape ``bdev_raid_get_bdevs`` gives on v26.01
and v26.05 (``module/bdev/raid/bdev_raid.c``): a failed member keeps its
slot with ``name`` null. The functional tests check them on real SPDK.
"""

from os_brick_connector import replicas
from tests import base

VOLUME = '6a1c7b8e-0d2f-4c3e-9a51-0a2b3c4d5e6f'


class RaidAnswers(object):
    """A client that only answers bdev_raid_get_bdevs."""

    def __init__(self, *raids):
        self.raids = list(raids)

    def call(self, method, params=None):
        assert method == 'bdev_raid_get_bdevs', method
        return self.raids


def raid(*members, state='online', total=2):
    return {'name': VOLUME, 'raid_level': 'raid1', 'superblock': True,
            'state': state, 'num_base_bdevs': total,
            'base_bdevs_list': [
                {'name': name, 'is_configured': name is not None}
                for name in members]}


class TestNames(base.TestCase):

    def test_member_controller_stable_and_safe(self):
        one = replicas.member_controller(VOLUME, 'tcp:192.0.2.1:4420')
        self.assertEqual(one, replicas.member_controller(
            VOLUME, 'tcp:192.0.2.1:4420'))
        self.assertNotEqual(one, replicas.member_controller(
            VOLUME, 'tcp:192.0.2.2:4420'))
        self.assertRegex(one, '^%s\\.[0-9a-f]{8}$' % VOLUME)


class TestStatus(base.TestCase):

    def test_states(self):
        self.assertEqual(
            {'state': 'online', 'members': ['a', 'b'], 'replicas': 2},
            replicas.status(RaidAnswers(raid('a', 'b')), VOLUME))
        self.assertEqual(
            {'state': 'degraded', 'members': ['a'], 'replicas': 2},
            replicas.status(RaidAnswers(raid('a', None)), VOLUME))
        self.assertEqual(
            'degraded',
            replicas.status(RaidAnswers(raid('a', 'b', None, total=3)),
                            VOLUME)['state'])
        self.assertEqual(
            'offline',
            replicas.status(RaidAnswers(raid('a', None, state='configuring')),
                            VOLUME)['state'])
        self.assertIsNone(replicas.status(RaidAnswers(), VOLUME))
