"""Cinder QoS specs to SPDK limits: units, rounding, refusals."""

from cinder import exception
import fixtures

from cinder_spdk_vhost import qos
from tests import base

MIB = 1024 * 1024


class ToLimitsTest(base.TestCase):

    def test_each_key_maps_to_its_spdk_limit(self):
        self.assertEqual(
            {'rw_ios_per_sec': 5000, 'rw_mbytes_per_sec': 100,
             'r_mbytes_per_sec': 30, 'w_mbytes_per_sec': 20},
            qos.to_limits({'total_iops_sec': '5000',
                           'total_bytes_sec': str(100 * MIB),
                           'read_bytes_sec': str(30 * MIB),
                           'write_bytes_sec': str(20 * MIB)}, 1))

    def test_per_gb_scales_with_size(self):
        self.assertEqual(
            {'rw_ios_per_sec': 10000, 'rw_mbytes_per_sec': 0,
             'r_mbytes_per_sec': 0, 'w_mbytes_per_sec': 20},
            qos.to_limits({'total_iops_sec_per_gb': '1000',
                           'write_bytes_sec_per_gb': str(2 * MIB)}, 10))

    def test_rounding_is_logged_and_never_reaches_zero(self):
        logs = self.useFixture(fixtures.FakeLogger())
        limits = qos.to_limits({'total_iops_sec': '10',
                                'read_bytes_sec': '1'}, 1)
        self.assertEqual(1000, limits['rw_ios_per_sec'])
        self.assertEqual(1, limits['r_mbytes_per_sec'])
        self.assertIn('total_iops_sec=10.0 rounded to SPDK '
                      'rw_ios_per_sec=1000',
                      logs.output)

    def test_rounding_to_nearest_step(self):
        self.assertEqual(3000, qos.to_limits({'total_iops_sec': '2600'},
                                             1)['rw_ios_per_sec'])
        self.assertEqual(2000, qos.to_limits({'total_iops_sec': '2400'},
                                             1)['rw_ios_per_sec'])

    def test_unsupported_keys_named(self):
        for key in ('read_iops_sec', 'write_iops_sec', 'total_iops_sec_max',
                    'size_iops_sec'):
            err = self.assertRaises(exception.InvalidQoSSpecs,
                                    qos.to_limits, {key: '1000'}, 1)
            self.assertIn(key, str(err))

    def test_same_limit_twice_refused(self):
        err = self.assertRaises(
            exception.InvalidQoSSpecs, qos.to_limits,
            {'total_iops_sec': '1000', 'total_iops_sec_per_gb': '10'}, 1)
        self.assertIn('total_iops_sec_per_gb', str(err))

    def test_bad_values_named(self):
        for value in ('fast', '-1'):
            err = self.assertRaises(exception.InvalidQoSSpecs,
                                    qos.to_limits,
                                    {'total_bytes_sec': value}, 1)
            self.assertIn('total_bytes_sec', str(err))

    def test_consumers(self):
        specs = {'total_iops_sec': '1000'}
        for consumer, expected in (('back-end', specs), ('both', specs),
                                   ('front-end', {})):
            self.assertEqual(expected, qos.backend_specs(
                {'consumer': consumer, 'specs': specs}))
        self.assertEqual({}, qos.backend_specs(None))

    def test_no_specs_turns_limits_off(self):
        self.assertEqual(qos.NO_LIMITS, qos.to_limits({}, 5))
