"""What a guest writer that stamps its passes leaves in its blocks."""

from testbed.guest import qemu
from testbed.guest import writer
from tests import base


def block(token):
    return qemu.pattern_bytes(token, 16)


class ExpectedTest(base.TestCase):

    def test_first_pass_unfinished_is_unknown(self):
        self.assertIsNone(writer.expected('t', 16, 4, 3))

    def test_whole_passes(self):
        self.assertEqual(block('t.0') * 4, writer.expected('t', 16, 4, 4))
        self.assertEqual(block('t.2') * 4, writer.expected('t', 16, 4, 12))

    def test_a_pass_under_way(self):
        self.assertEqual(block('t.2') * 2 + block('t.1') * 2,
                         writer.expected('t', 16, 4, 10))

    def test_the_writers_command(self):
        self.assertEqual('gt_writer_start vda 0 16 t 4 passes',
                         qemu.writer_start('vda', 0, 16, 't', blocks=4,
                                           passes=True))
        self.assertEqual('gt_writer_start vda 0 16 t 4',
                         qemu.writer_start('vda', 0, 16, 't', blocks=4))
