"""The scenario tests' view of a guest through its console report."""

import hashlib
import subprocess

from tempest_plugin import guest
from tests import base

VOLUME = '0f4c5d1e-8a2b-4c3d-9e8f-0123456789ab'
SERIAL = VOLUME[:20]
BOOT = ('[    0.000000] Linux version 6.1.0\n'
        '@@DISK vda serial= size=1073741824\n'
        '@@REPORTING\n')


def attached(name, before=guest.ZEROS_SHA256, verify='ok', size=1 << 30):
    return ('@@ATTACHED %s serial=%s size=%d before=%s verify=%s\n'
            % (name, SERIAL, size, before, verify))


class FakeServers(object):
    """Nova's console output: the next text on each call, then the last."""

    def __init__(self, *outputs):
        self.outputs = list(outputs)

    def get_console_output(self, server_id):
        text = self.outputs.pop(0) if len(self.outputs) > 1 else \
            self.outputs[0]
        return {'output': text}


class PatternTest(base.TestCase):

    def test_same_bytes_as_the_guest_writes(self):
        # The guest writes `yes SERIAL | head -c 1M`: the same command
        # here gives the bytes the host-side hash must describe.
        data = subprocess.run('yes %s | head -c %d' % (
            SERIAL, guest.PATTERN_BYTES), shell=True, check=True,
            capture_output=True).stdout
        self.assertEqual(hashlib.sha256(data).hexdigest(),
                         guest.pattern_sha256(SERIAL))

    def test_serial_is_the_id_cut_to_virtio_length(self):
        self.assertEqual('0f4c5d1e-8a2b-4c3d-9', guest.serial_of(VOLUME))


class ParseReportTest(base.TestCase):

    def test_events_in_order_kernel_lines_skipped(self):
        events = guest.parse_report(BOOT + attached('vdb') +
                                    '[   12.3] virtio_blk virtio3: ok\n'
                                    '@@RESIZED vdb size=2147483648\n'
                                    '@@DETACHED vdb\n')
        self.assertEqual(['DISK', 'REPORTING', 'ATTACHED', 'RESIZED',
                          'DETACHED'], [kind for kind, _n, _f in events])
        self.assertEqual(('ATTACHED', 'vdb'), events[2][:2])
        self.assertEqual({'serial': SERIAL, 'size': str(1 << 30),
                          'before': guest.ZEROS_SHA256, 'verify': 'ok'},
                         events[2][2])

    def test_line_repeated_right_after_itself_counts_once(self):
        events = guest.parse_report(BOOT + attached('vdb') +
                                    attached('vdb'))
        self.assertEqual(1, [e[0] for e in events].count('ATTACHED'))

    def test_marker_after_console_noise_on_the_line(self):
        events = guest.parse_report('\r\x1b[0m@@DETACHED vdc\r\n')
        self.assertEqual([('DETACHED', 'vdc', {})], events)


class ConsoleGuestTest(base.TestCase):

    def view(self, *outputs, timeout=4):
        return guest.ConsoleGuest(FakeServers(*outputs), 'server',
                                  timeout)

    def test_waits_for_the_report_then_the_attach(self):
        view = self.view('', BOOT, BOOT + attached('vdb'))
        disk = view.wait_attached(VOLUME)
        self.assertEqual(guest.Disk('vdb', SERIAL, 1 << 30,
                                    guest.ZEROS_SHA256, True), disk)

    def test_failed_verify_is_reported(self):
        view = self.view(BOOT + attached('vdb', verify='failed'))
        self.assertFalse(view.wait_attached(VOLUME).verified)

    def test_a_disk_attached_twice_is_seen_twice(self):
        pattern = guest.pattern_sha256(SERIAL)
        log = BOOT + attached('vdb') + '@@DETACHED vdb\n'
        view = self.view(log, log + attached('vdb', before=pattern))
        first = view.wait_attached(VOLUME)
        view.wait_detached(first)
        again = view.wait_attached(VOLUME)
        self.assertEqual(pattern, again.before)

    def test_an_old_event_does_not_answer_a_new_wait(self):
        view = self.view(BOOT + attached('vdb'))
        view.wait_attached(VOLUME)
        self.assertRaises(guest.GuestTimeout, view.wait_attached, VOLUME)

    def test_resize_to_the_wanted_size_only(self):
        view = self.view(BOOT + attached('vdb') +
                         '@@RESIZED vdb size=1610612736\n')
        disk = view.wait_attached(VOLUME)
        self.assertRaises(guest.GuestTimeout, view.wait_size, disk,
                          2 << 30)

    def test_guest_not_in_report_mode_times_out_clearly(self):
        err = self.assertRaises(guest.GuestTimeout, self.view,
                                'Welcome to CirrOS\nlogin: ')
        self.assertIn('report mode', str(err))
