"""Front-end QoS: Cinder specs to SPDK limits, and applying them."""

from os_brick_connector import connector_errors as errors
from os_brick_connector import frontend_qos
from spdk_vhost_core import exception as spdk_exc
from tests import base

MIB = 1024 * 1024
OFF = {'rw_ios_per_sec': 0, 'rw_mbytes_per_sec': 0,
       'r_mbytes_per_sec': 0, 'w_mbytes_per_sec': 0}


class FakeBdevTarget(object):
    """One bdev with SPDK v26's QoS rule on changes.

    After the first limit is set, changes fail with EAGAIN while no I/O
    channel is open.
    """

    def __init__(self, channel_open=False):
        self.limits = dict(OFF)
        self.channel_open = channel_open
        self.calls = 0

    def bdev_get_bdevs(self, name):
        return [{'name': name, 'assigned_rate_limits': dict(self.limits)}]

    def bdev_set_qos_limit(self, name, **limits):
        self.calls += 1
        if any(self.limits.values()) and not self.channel_open:
            raise spdk_exc.TryAgain('bdev_set_qos_limit', limits, -32602,
                                    'Failed to configure rate limit: '
                                    'Resource temporarily unavailable')
        self.limits.update(limits)
        return True


class TestSpdkLimits(base.TestCase):

    def test_every_supported_key(self):
        self.assertEqual(
            {'rw_ios_per_sec': 20000, 'rw_mbytes_per_sec': 100,
             'r_mbytes_per_sec': 50, 'w_mbytes_per_sec': 20},
            frontend_qos.spdk_limits({
                'total_iops_sec': '20000', 'total_bytes_sec': 100 * MIB,
                'read_bytes_sec': 50 * MIB, 'write_bytes_sec': 20 * MIB}))

    def test_rounds_to_nearest_but_never_to_off(self):
        self.assertEqual({'rw_ios_per_sec': 2000, 'r_mbytes_per_sec': 1},
                         frontend_qos.spdk_limits({'total_iops_sec': 1600,
                                                   'read_bytes_sec': 10}))
        self.assertEqual({'rw_ios_per_sec': 0},
                         frontend_qos.spdk_limits({'total_iops_sec': 0}))

    def test_refuses_what_spdk_cannot_do(self):
        for spec in ({'read_iops_sec': 1000}, {'total_iops_sec_max': 1},
                     {'total_iops_sec': 'lots'},
                     {'total_bytes_sec': -1}):
            self.assertRaises(errors.InvalidQoSSpec,
                              frontend_qos.spdk_limits, spec)

    def test_empty(self):
        self.assertEqual({}, frontend_qos.spdk_limits(None))


class TestApply(base.TestCase):

    def test_first_set_applies(self):
        target = FakeBdevTarget()
        frontend_qos.apply(target, 'b', {'total_iops_sec': 3000})
        self.assertEqual(3000, target.limits['rw_ios_per_sec'])

    def test_limits_in_force_are_not_sent_again(self):
        target = FakeBdevTarget()
        target.limits['rw_ios_per_sec'] = 3000
        frontend_qos.apply(target, 'b', {'total_iops_sec': 3000})
        self.assertEqual(0, target.calls)

    def test_other_limits_are_left_alone(self):
        target = FakeBdevTarget(channel_open=True)
        target.limits['w_mbytes_per_sec'] = 7
        frontend_qos.apply(target, 'b', {'total_iops_sec': 3000})
        self.assertEqual(7, target.limits['w_mbytes_per_sec'])

    def test_spdk_refusal_is_a_clear_error(self):
        target = FakeBdevTarget()
        target.limits['rw_ios_per_sec'] = 1000
        err = self.assertRaises(errors.QoSNotApplied, frontend_qos.apply,
                                target, 'b', {'total_iops_sec': 3000})
        self.assertIsInstance(err.__cause__, spdk_exc.TryAgain)
        self.assertEqual(1000, target.limits['rw_ios_per_sec'])

    def test_no_specs_no_calls(self):
        target = FakeBdevTarget()
        self.assertEqual({}, frontend_qos.apply(target, 'b', {}))
        self.assertEqual(0, target.calls)
