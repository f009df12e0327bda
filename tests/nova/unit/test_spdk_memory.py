"""Nova's start-up check that it reserves the SPDK target's hugepages.

The target is a real Unix socket served by this process, so that its
peer credentials name this pid; its command line, the host's page size
and NUMA nodes are files the test writes, as /proc and /sys hold them.
"""

import os
import socket

import fixtures
from nova import exception
from oslo_config import fixture as config_fixture

from nova_vhost_user import spdk_memory
from nova_vhost_user import volume
from tests import base


class FakeSpdk(object):

    def __init__(self, lcores):
        self.lcores = lcores

    def framework_get_reactors(self):
        return {'reactors': [{'lcore': core} for core in self.lcores]}


def reserve(*nodes):
    """reserved_huge_pages values: (node, size, count) each."""
    return [{'node': str(node), 'size': str(size), 'count': str(count)}
            for node, size, count in nodes]


class TestMemSize(base.TestCase):

    def test_forms_spdk_accepts(self):
        for argv, mb in ((['vhost', '-s', '256'], 256),
                         (['vhost', '-s1024'], 1024),
                         (['vhost', '--mem-size', '2048'], 2048),
                         (['vhost', '--mem-size=512M'], 512),
                         (['vhost', '-s', '1G', '-m', '0x1'], 1024),
                         (['vhost', '-S', '/var/lib/spdk/vhost'], None)):
            self.assertEqual(mb, spdk_memory.mem_size_mb(argv), argv)

    def test_garbage_is_an_error(self):
        self.assertRaises(ValueError, spdk_memory.mem_size_mb,
                          ['vhost', '-s', 'lots'])


class TestCheck(base.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(volume.CONF))
        self.log = self.useFixture(fixtures.FakeLogger())
        tmp = self.useFixture(fixtures.TempDir()).path
        self.socket_path = os.path.join(tmp, 'spdk.sock')
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(server.close)
        server.bind(self.socket_path)
        server.listen(4)
        self.proc = os.path.join(tmp, 'proc')
        os.makedirs(os.path.join(self.proc, str(os.getpid())))
        self.meminfo = os.path.join(tmp, 'meminfo')
        with open(self.meminfo, 'w') as out:
            out.write('HugePages_Total: 4096\nHugepagesize: 2048 kB\n')
        self.sys = os.path.join(tmp, 'sys')
        for node, cpus in (('0', '0-1'), ('1', '2-3')):
            path = os.path.join(self.sys, 'devices', 'system', 'node',
                                'node' + node)
            os.makedirs(path)
            with open(os.path.join(path, 'cpulist'), 'w') as out:
                out.write(cpus + '\n')

    def target(self, *args):
        """The target's command line (this process serves its socket)."""
        with open(os.path.join(self.proc, str(os.getpid()), 'cmdline'),
                  'wb') as out:
            out.write(b'\0'.join(arg.encode() for arg in
                                 ('/opt/spdk/build/bin/vhost',) + args))

    def check(self, lcores=(0,)):
        return spdk_memory.check(FakeSpdk(list(lcores)), self.socket_path,
                                 proc_root=self.proc, sysfs_root=self.sys,
                                 meminfo=self.meminfo)

    def test_reservation_holding_the_target_passes(self):
        self.target('-m', '0x1', '-s', '256')
        self.conf.config(reserved_huge_pages=reserve((0, 2048, 128)))

        self.assertEqual((256, 256), self.check())
        self.assertEqual('', self.log.output)

    def test_page_size_with_a_unit_counts(self):
        self.target('-s', '256')
        self.conf.config(reserved_huge_pages=reserve((0, '2MB', 128)))

        self.assertEqual((256, 256), self.check())

    def test_short_reservation_refused_with_the_line_to_write(self):
        self.target('-s', '256')
        self.conf.config(reserved_huge_pages=reserve((0, 2048, 64)))

        err = self.assertRaises(exception.InvalidConfiguration, self.check)
        self.assertIn('holds 256 MiB of 2048 kB hugepages (-s) but '
                      '[DEFAULT] reserved_huge_pages reserves 128 MiB',
                      str(err))
        self.assertIn('reserved_huge_pages = node:0,size:2048,count:128',
                      str(err))

    def test_pages_of_another_size_do_not_count(self):
        self.target('-s', '1024')
        self.conf.config(reserved_huge_pages=reserve((0, '1GB', 1)))

        err = self.assertRaises(exception.InvalidConfiguration, self.check)
        self.assertIn('reserves 0 MiB', str(err))

    def test_reactors_on_two_nodes_share_the_reservation(self):
        self.target('-s', '1024')

        err = self.assertRaises(exception.InvalidConfiguration,
                                self.check, lcores=(0, 2))
        self.assertIn('node:0,size:2048,count:256; reserved_huge_pages = '
                      'node:1,size:2048,count:256', str(err))

    def test_target_without_a_fixed_size_refused(self):
        self.target('-m', '0x1')
        self.conf.config(reserved_huge_pages=reserve((0, 2048, 128)))

        err = self.assertRaises(exception.InvalidConfiguration, self.check)
        self.assertIn('runs without -s', str(err))

    def test_more_than_needed_is_a_warning(self):
        self.target('-s', '256')
        self.conf.config(reserved_huge_pages=reserve((0, 2048, 128),
                                                     (1, 2048, 128)))

        self.assertEqual((256, 512), self.check())
        self.assertIn('reserves 512 MiB', self.log.output)

    def test_no_target_is_a_warning(self):
        os.unlink(self.socket_path)

        self.assertIsNone(self.check())
        self.assertIn('Could not check that [DEFAULT] reserved_huge_pages',
                      self.log.output)
