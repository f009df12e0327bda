# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""The emulator's NVMe-oF link carrying real NBD between real QEMU tools.

Storage side: qemu-storage-daemon serves a raw file as an NBD export on a
unix socket, a Listener in front of it.  Compute side: an InitiatorProxy,
and QEMU's own NBD client (qemu-io, qemu-img, or a second
qemu-storage-daemon, as the emulator's data plane uses it) through it.
Every check looks at the bytes in the raw file itself.
"""

import os
import shutil
import socket
import subprocess
import time

import fixtures

from tests import base
from tests.emulator import nvmf_link

SUBNQN = 'nqn.2016-06.io.spdk:vol-func'
HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:6f1d9c2e-0c4b-4a8e-9f3d-2b7e1a5c'
EXPORT = 'vol0'
SIZE = 8 * 1024 * 1024
BLOCK = 512
TOOLS = ('qemu-storage-daemon', 'qemu-io', 'qemu-img')


def _stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class TestNvmfLinkWithQemu(base.TestCase):

    def setUp(self):
        super().setUp()
        missing = [tool for tool in TOOLS if not shutil.which(tool)]
        if missing:
            self.skipTest('not installed: %s' % ', '.join(missing))
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.raw = os.path.join(self.tmp, 'volume.raw')
        with open(self.raw, 'wb') as f:
            f.truncate(SIZE)
        self.hosts = {HOSTNQN}
        nbd_socket = self.start_qsd(
            'storage',
            ['--blockdev', 'driver=file,node-name=file0,filename=%s'
             % self.raw,
             '--blockdev', 'driver=raw,node-name=disk0,file=file0'],
            'disk0')
        self.namespaces = [{'nsid': 1, 'uuid': 'b7a1c2d3-0000-4000-8000-1',
                            'num_blocks': SIZE // BLOCK, 'block_size': BLOCK,
                            'nbd_socket': nbd_socket, 'nbd_export': EXPORT}]

    def admit(self, subnqn, hostnqn):
        if subnqn == SUBNQN and hostnqn in self.hosts:
            return self.namespaces
        return None

    def start_qsd(self, name, blockdevs, node):
        """A qemu-storage-daemon exporting node over NBD; its socket."""
        nbd_socket = os.path.join(self.tmp, '%s-nbd.sock' % name)
        log = open(os.path.join(self.tmp, '%s-qsd.log' % name), 'wb')
        self.addCleanup(log.close)
        proc = subprocess.Popen(
            ['qemu-storage-daemon'] + blockdevs +
            ['--nbd-server', 'addr.type=unix,addr.path=%s' % nbd_socket,
             '--export', 'type=nbd,id=exp-%s,node-name=%s,name=%s,'
             'writable=on' % (name, node, EXPORT)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        self.addCleanup(_stop, proc)
        self._wait_for_socket(nbd_socket, proc)
        return nbd_socket

    def _wait_for_socket(self, path, proc, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self.fail('qemu-storage-daemon exited: %s' % proc.returncode)
            with socket.socket(socket.AF_UNIX) as probe_sock:
                try:
                    probe_sock.connect(path)
                    return
                except (FileNotFoundError, ConnectionRefusedError):
                    time.sleep(0.05)
        self.fail('qemu-storage-daemon did not serve %s' % path)

    def start_link(self, traddr='127.0.0.1'):
        listener = nvmf_link.Listener(traddr, 0, self.admit)
        listener.start()
        self.addCleanup(listener.close)
        proxy = nvmf_link.InitiatorProxy(
            os.path.join(self.tmp, 'initiator.sock'), traddr,
            listener.trsvcid, SUBNQN, HOSTNQN, 1)
        proxy.start()
        self.addCleanup(proxy.close)
        return proxy

    def nbd_uri(self, proxy_or_path, export=None):
        if isinstance(proxy_or_path, nvmf_link.InitiatorProxy):
            return 'nbd+unix:///%s?socket=%s' % (proxy_or_path.export_name,
                                                 proxy_or_path.unix_path)
        return 'nbd+unix:///%s?socket=%s' % (export, proxy_or_path)

    def qemu_io(self, uri, command):
        return subprocess.run(['qemu-io', '-f', 'raw', uri, '-c', command],
                              capture_output=True, text=True, timeout=60)

    def assertWrites(self, uri, offset, length, pattern):
        result = self.qemu_io(uri, 'write -P 0x%02x %d %d'
                              % (pattern, offset, length))
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn('wrote %d/%d bytes' % (length, length), result.stdout)
        self.assertEqual(bytes([pattern]) * length,
                         self.read_raw(offset, length))

    def read_raw(self, offset, length):
        with open(self.raw, 'rb') as f:
            f.seek(offset)
            return f.read(length)

    def write_raw(self, offset, data):
        with open(self.raw, 'r+b') as f:
            f.seek(offset)
            f.write(data)

    def test_write_lands_in_the_raw_file(self):
        proxy = self.start_link()
        self.assertEqual(EXPORT, proxy.export_name)
        self.assertWrites(self.nbd_uri(proxy), 1024 * 1024, 256 * 1024, 0xa5)

    def test_write_over_ipv6(self):
        try:
            with socket.socket(socket.AF_INET6) as sock:
                sock.bind(('::1', 0))
        except OSError:
            self.skipTest('no IPv6 loopback here')
        proxy = self.start_link('::1')
        self.assertWrites(self.nbd_uri(proxy), 0, 64 * 1024, 0x3c)

    def test_read_the_whole_volume(self):
        data = os.urandom(SIZE)
        self.write_raw(0, data)
        proxy = self.start_link()
        copy = os.path.join(self.tmp, 'copy.raw')
        subprocess.run(['qemu-img', 'convert', '-f', 'raw', '-O', 'raw',
                        self.nbd_uri(proxy), copy],
                       check=True, capture_output=True, timeout=60)
        with open(copy, 'rb') as f:
            self.assertEqual(data, f.read())

    def test_removed_host_cannot_reconnect(self):
        proxy = self.start_link()
        uri = self.nbd_uri(proxy)
        self.assertWrites(uri, 0, 4096, 0x11)
        self.hosts.clear()
        result = self.qemu_io(uri, 'write -P 0x22 0 4096')
        self.assertNotEqual(0, result.returncode)
        self.assertEqual(b'\x11' * 4096, self.read_raw(0, 4096))

    def test_compute_side_qsd_as_nbd_client(self):
        # As the emulator's data plane uses it: the compute node's QSD opens
        # the remote namespace with its nbd driver and serves it on.
        proxy = self.start_link()
        compute_socket = self.start_qsd(
            'compute',
            ['--blockdev', 'driver=nbd,node-name=remote,server.type=unix,'
             'server.path=%s,export=%s' % (proxy.unix_path,
                                           proxy.export_name)],
            'remote')
        uri = self.nbd_uri(compute_socket, EXPORT)
        self.assertWrites(uri, 3 * 1024 * 1024, 128 * 1024, 0x7e)
        self.write_raw(0, b'\x42' * 4096)
        result = self.qemu_io(uri, 'read -P 0x42 0 4096')
        self.assertEqual(0, result.returncode, result.stdout)
        self.assertNotIn('failed', result.stdout)
