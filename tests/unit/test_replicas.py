"""The wire format of a replicated volume, checked before any RPC."""

from spdk_vhost_core import exception
from spdk_vhost_core import properties
from spdk_vhost_core import replicas
from tests import base
from tests import fuzz

VOLUME = fuzz.VOLUME_ID


def replica(target_id, traddr, **extra):
    data = {'target_id': target_id, 'transport': 'tcp',
            'nqn': 'nqn.2016-06.io.spdk:' + VOLUME, 'traddr': traddr,
            'trsvcid': '4420', 'adrfam': 'ipv4', 'ns_id': 1,
            'host_nqn': fuzz.GOOD_NQN}
    data.update(extra)
    return data


def props(*members, **extra):
    data = {'volume_id': VOLUME, 'transport': replicas.REPLICATED,
            'replicas': list(members) or [replica('storage-a', '192.0.2.1'),
                                          replica('storage-b', '192.0.2.2')],
            'access_mode': 'rw', 'block_size': 512}
    data.update(extra)
    return data


class TestReplicatedProperties(base.TestCase):

    def refused(self, data, *words):
        err = self.assertRaises(exception.InvalidProperties,
                                properties.ConnectionProperties, data)
        for word in words:
            self.assertIn(word, str(err))
        return err

    def test_two_and_three_replicas(self):
        parsed = properties.ConnectionProperties(props())
        self.assertEqual(['storage-a', 'storage-b'],
                         [r.target_id for r in parsed.replicas])
        self.assertFalse(parsed.is_remote)
        self.assertFalse(parsed.is_local)
        three = props(replica('a', '192.0.2.1'), replica('b', '192.0.2.2'),
                      replica('tcp:192.0.2.3:5260', '192.0.2.3',
                              trsvcid=4421))
        self.assertEqual(3, len(
            properties.ConnectionProperties(three).replicas))

    def test_unreplicated_volumes_have_none(self):
        data = {'volume_id': VOLUME, 'transport': 'local', 'bdev': 'lvs/v'}
        self.assertIsNone(properties.ConnectionProperties(data).replicas)
        # A stray key does not make a volume replicated.
        data['replicas'] = [replica('a', '192.0.2.1')]
        self.assertIsNone(properties.ConnectionProperties(data).replicas)

    def test_count(self):
        # One: a 2-copy volume attached while the other's target is away.
        self.assertEqual(1, len(properties.ConnectionProperties(
            props(replica('a', '192.0.2.1'))).replicas))
        self.refused(dict(props(), replicas=[]), 'has 0 entries', '1 to 3')
        four = [replica(t, '192.0.2.%d' % i)
                for i, t in enumerate('abcd', 1)]
        self.refused(props(*four), 'has 4 entries')
        self.refused(dict(props(), replicas={'a': 1}), 'must be a list')
        missing = props()
        del missing['replicas']
        self.refused(missing, 'must be a list')

    def test_each_replica_checked_as_a_remote_volume(self):
        """The single remote volume's check, naming the replica."""
        for bad, words in (
                ({'traddr': 'storage-b'}, ('replicas[1]', 'traddr',
                                           'not an IP address')),
                ({'nqn': 'iqn.x'}, ('replicas[1]', 'nqn')),
                ({'trsvcid': '0'}, ('replicas[1]', 'trsvcid')),
                ({'adrfam': 'ipv6'}, ('replicas[1]', 'does not match')),
                ({'ns_id': 0}, ('replicas[1]', 'ns_id')),
                ({'dhchap_ctrlr_key': 'x'}, ('replicas[1]',
                                             'dhchap_ctrlr_key')),
                ({'transport': 'local'}, ('replicas[1].transport',
                                          'tcp, rdma')),
                ({'target_id': ''}, ('replicas[1].target_id',)),
                ({'target_id': 'a b'}, ('replicas[1].target_id',)),
                ({'target_id': None}, ('replicas[1].target_id',))):
            second = dict(replica('storage-b', '192.0.2.2'), **bad)
            self.refused(props(replica('storage-a', '192.0.2.1'), second),
                         *words)
        self.refused(props(replica('a', '192.0.2.1'), 'b'),
                     'replicas[1] must be a dict')

    def test_one_failure_domain_per_replica(self):
        self.refused(props(replica('storage-a', '192.0.2.1'),
                           replica('storage-a', '192.0.2.2')),
                     "replicas[1].target_id='storage-a'",
                     'replicas[0]', 'fail together')
        self.refused(props(replica('a', '192.0.2.1'),
                           replica('b', '192.0.2.1', trsvcid=4420)),
                     'replicas[1] is the same export as replicas[0]')

    def test_remote_keys_belong_to_the_replicas(self):
        self.refused(props(nqn='nqn.2016-06.io.spdk:x', traddr='192.0.2.9'),
                     'nqn, traddr', 'not at the top level')

    def test_volume_keys_still_checked(self):
        self.refused(props(access_mode='rwx'), 'access_mode')
        self.refused(props(volume_id='../x'), 'volume_id')

    def test_secrets_never_echoed(self):
        secret = 'DHHC-1:00:' + 'A' * 10 + ':'
        err = self.refused(props(replica('a', '192.0.2.1'),
                                 replica('b', '192.0.2.2',
                                         dhchap_key=secret)),
                           'replicas[1]', 'dhchap_key')
        self.assertNotIn(secret, str(err))

    def test_lenient_parse_keeps_the_replicas(self):
        """A disconnect (strict=False) still finds what to take apart."""
        data = props(replica('a', '192.0.2.1'))
        parsed = properties.ConnectionProperties(data, strict=False)
        self.assertEqual(1, len(parsed.replicas))
