"""Unit tests of the scale and attach-memory figures, and reply bytes."""

import json

from tests import base
from tests.unit import test_bench
from tools.bench import attach_memory
from tools.bench import scale


def _op(seconds, calls, replies):
    return {'seconds_median': seconds, 'rpc_calls': calls,
            'reply_bytes': sum(replies.values()),
            'rpc_reply_bytes': replies}


class ReplyBytesTest(base.TestCase):

    def test_reply_bytes_are_counted_by_method(self):
        counter, client = test_bench.relayed_client(self)
        with counter.measure() as calls:
            client.sendall(json.dumps({'id': 7, 'method': 'bdev_get_bdevs'})
                           .encode())
            reply = b''
            while not reply.endswith(b'}'):
                reply += client.recv(4096)
        self.assertEqual({'bdev_get_bdevs': 1}, dict(calls))
        self.assertEqual({'bdev_get_bdevs': len(reply)},
                         dict(calls.reply_bytes))


class CompareTest(base.TestCase):

    def test_ratios_and_the_replies_that_grew(self):
        small = _op(0.010, 2, {'bdev_get_bdevs': 1000, 'x': 100})
        large = _op(0.030, 2, {'bdev_get_bdevs': 20000, 'x': 110,
                               'new': 5})
        got = scale.compare(small, large)
        self.assertAlmostEqual(3.0, got['seconds_median'])
        self.assertEqual(1.0, got['rpc_calls'])
        self.assertAlmostEqual(20115 / 1100.0, got['reply_bytes'])
        self.assertEqual({'bdev_get_bdevs': [1000, 20000], 'new': [0, 5]},
                         got['growing_calls'])

    def test_no_calls_at_either_size_is_flat(self):
        got = scale.compare(_op(0.0, 0, {}), _op(0.0, 0, {}))
        self.assertEqual(1.0, got['rpc_calls'])
        self.assertEqual(1.0, got['reply_bytes'])


class VerdictsTest(base.TestCase):

    def test_baseline_holds_until_the_limit_is_met(self):
        table = {'flat': {'rpc_calls': 1.0, 'reply_bytes': 1.1},
                 'grows': {'rpc_calls': 1.0, 'reply_bytes': 13.0},
                 'worse': {'rpc_calls': 1.5, 'reply_bytes': 1.0}}
        got = scale.verdicts(table, {'grows': {'reply_bytes': 13.5}})
        self.assertTrue(got['flat']['within_limit'])
        self.assertEqual([], got['flat']['over_enforced'])
        self.assertFalse(got['grows']['within_limit'])
        self.assertEqual([], got['grows']['over_enforced'])
        self.assertEqual(['rpc_calls'], got['worse']['over_enforced'])

    def test_enforced_never_looser_than_needed(self):
        # A baseline is today's figure, above the limit: else it is moot.
        for op, held in scale.ENFORCED.items():
            for figure, value in held.items():
                self.assertIn(figure, scale.FIGURES, op)
                self.assertGreater(value, scale.LIMIT, (op, figure))


class MemTableTest(base.TestCase):

    def test_gap_after_the_memory_table_and_its_start(self):
        lines = [(10.0, 'x) read message VHOST_USER_GET_FEATURES'),
                 (10.5, 'x) read message VHOST_USER_SET_MEM_TABLE'),
                 (10.6, 'x) guest memory region size: 0x20000000'),
                 (11.25, 'x) read message VHOST_USER_SET_VRING_NUM')]
        self.assertEqual((0.75, 0.5),
                         attach_memory.mem_table_seconds(lines, 10.0))

    def test_no_memory_table_yet(self):
        lines = [(1.0, 'read message VHOST_USER_SET_MEM_TABLE')]
        self.assertEqual((None, None),
                         attach_memory.mem_table_seconds(lines, 0.0))
