"""Hosts that share nothing but the network (``testbed/hosts.py``).

Each check is one that separate machines pass and one namespace fails:
a file written on one host is absent on the other and on this machine;
a listener is reached at its host's address, never on another
loopback; the cloud's database and bus are reached over the network,
through the relay; a real SPDK target in one host serves NVMe/TCP to a
target in another, its hugepage files its host's alone.
"""

import os
import select
import socket
import subprocess
import sys
import uuid

import fixtures

from testbed import bridge
from testbed import hosts
from testbed import net
from testbed import spdk_target
from tests import base

#: A TCP server run in a host: says "ready" once it listens, then sends
#: its token to every client.
SERVER = '''
import socket, sys
sock = socket.socket()
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind((sys.argv[1], int(sys.argv[2])))
sock.listen(8)
print("ready", flush=True)
while True:
    conn, _ = sock.accept()
    conn.sendall(sys.argv[3].encode())
    conn.close()
'''
#: A TCP client run in a host: prints what it got, or why it got nothing.
CLIENT = '''
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])),
                                  timeout=10) as conn:
        print(conn.recv(100).decode())
except OSError as err:
    print(type(err).__name__)
'''
MARIADB = '''
import pymysql, sys
conn = pymysql.connect(host=sys.argv[1], port=3306, user="root",
                       password="", connect_timeout=10)
with conn.cursor() as cur:
    cur.execute("SELECT 1")
    print(cur.fetchone()[0])
'''
RABBITMQ = '''
import kombu, sys
with kombu.Connection("amqp://guest:guest@%s:5672//" % sys.argv[1],
                      connect_timeout=10) as conn:
    conn.connect()
    print(conn.connected)
'''
NQN = 'nqn.2016-06.io.spdk:hosts-test'
MiB = 1 << 20


def connect(address, port):
    """What a client on this machine gets, as :data:`CLIENT` prints it."""
    try:
        with socket.create_connection((address, port), timeout=10) as conn:
            return conn.recv(100).decode()
    except OSError as err:
        return type(err).__name__


def hugetlbfs(host):
    """The device of ``host``'s /dev/hugepages (None: this machine's)."""
    if host is None:
        dev = os.stat(hosts.HUGEPAGES).st_dev
        return os.major(dev), os.minor(dev)
    done = host.run(['stat', '-c', '%Hd %Ld', hosts.HUGEPAGES],
                    capture_output=True, text=True, check=True, timeout=30)
    return tuple(int(number) for number in done.stdout.split())


def mapped_hugetlbfs(pid):
    """The devices of the hugepage files process ``pid`` maps."""
    devices = set()
    with open('/proc/%d/maps' % pid) as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].startswith(hosts.HUGEPAGES):
                major, minor = fields[3].split(':')
                devices.add((int(major, 16), int(minor, 16)))
    return devices


class HostsCase(base.TestCase):
    """One network and its hosts per class: a host costs ~0.5 s."""

    names = ('alpha', 'beta')

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        lab = hosts.Lab(cls.names)
        lab.setUp()
        cls.addClassCleanup(lab.cleanUp)
        cls.network = lab.network
        cls.a, cls.b = lab.hosts

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(300, gentle=True))

    def run_in(self, host, script, *args):
        """The output of Python ``script`` run in ``host``."""
        done = host.run([sys.executable, '-c', script] + list(args),
                        capture_output=True, text=True, timeout=120)
        self.assertEqual(0, done.returncode, done.stderr)
        return done.stdout.strip()

    def serve(self, host, address, port):
        """A :data:`SERVER` on ``address:port``; its token.

        In ``host``, or on this machine if ``host`` is None.
        """
        token = uuid.uuid4().hex
        popen = host.popen if host else subprocess.Popen
        server = popen([sys.executable, '-c', SERVER, address, str(port),
                        token], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE)
        self.addCleanup(server.wait, 10)
        self.addCleanup(server.kill)
        self.addCleanup(server.stdout.close)
        ready, _, _ = select.select([server.stdout], [], [], 60)
        self.assertTrue(ready, 'the server said nothing')
        self.assertEqual(b'ready\n', server.stdout.readline())
        return token


class IsolationTest(HostsCase):

    def test_files_stay_on_their_host(self):
        for directory in ('/var/lib/spdk', '/tmp', '/etc/cinder',
                          '/etc/nova', '/etc/spdk-vhost', '/run',
                          '/var/log', '/dev/shm'):
            path = os.path.join(directory, 'alpha-' + uuid.uuid4().hex)
            self.a.run(['sh', '-c', 'echo alpha > "$1"', 'sh', path],
                       check=True, timeout=30)

            self.assertTrue(self.a.exists(path), path)
            with open(self.a.path(path)) as written:
                self.assertEqual('alpha\n', written.read())
            self.assertFalse(self.b.exists(path), path)
            self.assertFalse(os.path.exists(path), path)

    def test_private_directories_hidden_in_every_host(self):
        self.assertTrue(os.path.isdir(self.a.path('/var/lib/spdk')))
        self.assertFalse(self.a.exists(self.a.path('/var/lib/spdk')))
        self.assertFalse(self.b.exists(self.a.path('/var/lib/spdk')))

    def test_a_program_the_hosts_mounts_hide_is_refused_naming_it(self):
        scratch = self.useFixture(fixtures.TempDir(rootdir='/tmp')).path
        program = os.path.join(scratch, 'tool')
        with open(program, 'w') as script:
            script.write('#!/bin/sh\n')
        os.chmod(program, 0o755)
        err = self.assertRaises(bridge.HostError, self.a.run, [program])
        self.assertIn(program, str(err))
        self.assertIn('SPDK_CACHE', str(err))

    def test_hostnames_are_the_hosts_names(self):
        names = [host.run(['hostname'], capture_output=True, text=True,
                          check=True).stdout.strip()
                 for host in (self.a, self.b)]

        self.assertEqual(['alpha', 'beta'], names)
        self.assertNotIn(socket.gethostname(), names)

    def test_host_reaches_a_listener_on_another_hosts_address(self):
        port = net.free_port()
        token = self.serve(self.b, self.b.address, port)

        self.assertEqual(token, self.run_in(self.a, CLIENT, self.b.address,
                                            str(port)))

    def test_loopback_is_each_hosts_own(self):
        port = net.free_port()
        token = self.serve(self.b, '127.0.0.1', port)

        self.assertEqual(token, self.run_in(self.b, CLIENT, '127.0.0.1',
                                            str(port)))
        refused = 'ConnectionRefusedError'
        self.assertEqual(refused, self.run_in(self.a, CLIENT, '127.0.0.1',
                                              str(port)))
        self.assertEqual(refused, self.run_in(self.a, CLIENT,
                                              self.b.address, str(port)))
        self.assertEqual(refused, connect('127.0.0.1', port))

    def test_listener_on_a_host_address_is_not_on_this_loopback(self):
        port = net.free_port()
        token = self.serve(self.b, self.b.address, port)

        self.assertEqual(token, connect(self.b.address, port))
        self.assertEqual('ConnectionRefusedError',
                         connect('127.0.0.1', port))


class RelayTest(HostsCase):

    def test_host_reaches_mariadb_through_the_relay(self):
        gateway, _ = self.network.relay(3306)

        self.assertEqual('1', self.run_in(self.a, MARIADB, gateway))
        self.assertEqual('ConnectionRefusedError',
                         self.run_in(self.a, CLIENT, '127.0.0.1', '3306'))

    def test_host_logs_in_to_rabbitmq_as_guest_through_the_relay(self):
        gateway, _ = self.network.relay(5672)

        # RabbitMQ admits guest from loopback only: the relay's side.
        self.assertEqual('True', self.run_in(self.b, RABBITMQ, gateway))

    def test_relay_refuses_what_comes_through_another_interface(self):
        gateway, _ = self.network.relay(3306)
        # A host of another network, routed to this one's gateway: the
        # way a packet from outside the bridge would come.
        lab = self.useFixture(hosts.Lab(('outsider',)))
        [outsider] = lab.hosts
        outsider.run(['ip', 'route', 'add', str(self.network.subnet), 'via',
                      lab.network.gateway], check=True, timeout=30)
        port = net.free_port()
        token = self.serve(None, gateway, port)

        self.assertEqual(token, self.run_in(outsider, CLIENT, gateway,
                                            str(port)))
        self.assertEqual('ConnectionRefusedError',
                         self.run_in(outsider, CLIENT, gateway, '3306'))


class SpdkOnHostsTest(HostsCase):

    names = ('storage', 'compute')

    def target(self, host, app='nvmf_tgt', **kwargs):
        return self.useFixture(spdk_target.SpdkTarget(
            app=app, host=host, name=host.name, **kwargs))

    def test_target_runs_inside_its_host(self):
        storage, compute = self.a, self.b
        target = self.target(storage, interrupt_mode=True)

        self.assertIn('version', target.rpc('spdk_get_version'))
        holder = storage.holder.pid
        for kind in ('net', 'mnt', 'uts'):
            self.assertEqual(os.readlink('/proc/%d/ns/%s' % (holder, kind)),
                             os.readlink('/proc/%d/ns/%s' % (target.pid,
                                                             kind)))
        socket_path = storage.inside(target.socket_path)
        self.assertTrue(socket_path.startswith('/var/lib/spdk/'))
        self.assertTrue(storage.exists(socket_path))
        self.assertFalse(compute.exists(socket_path))
        self.assertFalse(os.path.exists(socket_path))

    def test_hugepages_are_from_the_targets_host_own_hugetlbfs(self):
        # SPDK unlinks its hugepage files at once (--huge-unlink): what
        # shows whose they are is the hugetlbfs instance they are on.
        storage, compute = self.a, self.b
        target = self.target(storage, interrupt_mode=True)

        self.assertEqual({hugetlbfs(storage)}, mapped_hugetlbfs(target.pid))
        self.assertNotEqual(hugetlbfs(storage), hugetlbfs(compute))
        self.assertNotEqual(hugetlbfs(storage), hugetlbfs(None))

    def test_nvme_tcp_from_a_host_to_another(self):
        storage, compute = self.a, self.b
        exporter = self.target(storage, interrupt_mode=True)
        exporter.aio_lvstore('lvs0', size_mib=64)
        lvol = exporter.rpc('bdev_lvol_create', {
            'lvs_name': 'lvs0', 'lvol_name': 'vol', 'size_in_mib': 8,
            'thin_provision': True})
        exporter.rpc('nvmf_create_transport', {'trtype': 'TCP'})
        exporter.rpc('nvmf_create_subsystem', {'nqn': NQN,
                                               'allow_any_host': True})
        exporter.rpc('nvmf_subsystem_add_ns', {
            'nqn': NQN, 'namespace': {'bdev_name': lvol}})
        exporter.rpc('nvmf_subsystem_add_listener', {
            'nqn': NQN, 'listen_address': {
                'trtype': 'TCP', 'adrfam': 'IPv4',
                'traddr': storage.address, 'trsvcid': '4420'}})
        # The NVMe-oF initiator refuses interrupt mode: this one polls.
        importer = self.target(compute, app='vhost')

        names = importer.rpc('bdev_nvme_attach_controller', {
            'name': 'remote', 'trtype': 'TCP', 'adrfam': 'IPv4',
            'traddr': storage.address, 'trsvcid': '4420', 'subnqn': NQN})

        self.assertEqual(['remoten1'], names)
        [bdev] = importer.rpc('bdev_get_bdevs', {'name': 'remoten1'})
        self.assertEqual(8 * MiB, bdev['num_blocks'] * bdev['block_size'])
        self.assertEqual(lvol, bdev['uuid'])
