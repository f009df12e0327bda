"""Read and write a bdev of a real target at any offset, with ``spdk_dd``.

Only the target may open its lvstore, so a bdev is reached the way a
remote host reaches a volume: exported on an NVMe/TCP subsystem of its
own (plain RPCs, none of the code under test) and attached by SPDK's
``spdk_dd`` from a JSON config. No guest and no kernel module: a few
hundred milliseconds a copy, so data-plane tests can look at real bytes.
It polls core 1, away from the targets on core 0, with 32 I/Os in
flight: fast enough that a QoS limit, not the reader, sets the pace.
"""

import json
import os
import subprocess
import uuid

from testbed import net
from testbed import spdk_build
from testbed import spdk_target

BLOCK = 4096
HOST_NQN = 'nqn.2014-08.org.nvmexpress:uuid:%s' % uuid.uuid4()


class NvmfDd(object):
    """spdk_dd on ``target``'s bdevs; ``workdir`` holds configs and data."""

    def __init__(self, target, workdir):
        self.target = target
        self.workdir = workdir
        self.exports = {}
        # A target on a host of its own is reached at the host's address.
        host = getattr(target, 'host', None)
        self.address = host.address if host is not None else '127.0.0.1'
        # The code under test may have made the transport already.
        error = target.call('nvmf_create_transport',
                            {'trtype': 'TCP'}).get('error')
        if error and 'already exists' not in error['message']:
            raise spdk_target.TargetError('nvmf_create_transport: %s'
                                          % error)

    def _export(self, bdev):
        """The subsystem NQN and port serving ``bdev`` (made once)."""
        if bdev not in self.exports:
            nqn = 'nqn.2016-06.io.spdk:dd-%s' % uuid.uuid4().hex[:12]
            port = str(net.free_port())
            self.target.rpc('nvmf_create_subsystem', {
                'nqn': nqn, 'allow_any_host': True})
            self.target.rpc('nvmf_subsystem_add_ns', {
                'nqn': nqn, 'namespace': {'bdev_name': bdev}})
            self.target.rpc('nvmf_subsystem_add_listener', {
                'nqn': nqn, 'listen_address': {
                    'trtype': 'TCP', 'traddr': self.address,
                    'trsvcid': port, 'adrfam': 'IPv4'}})
            self.exports[bdev] = (nqn, port)
        return self.exports[bdev]

    def unexport(self, bdev):
        """Drop ``bdev``'s subsystem (before deleting or snapshotting it)."""
        nqn, _port = self.exports.pop(bdev)
        self.target.rpc('nvmf_delete_subsystem', {'nqn': nqn})

    def command(self, bdev, args):
        """The spdk_dd command line on ``bdev`` (``ddn1``), and its env."""
        nqn, port = self._export(bdev)
        config = os.path.join(self.workdir, 'dd-%s.json' % uuid.uuid4().hex)
        with open(config, 'w') as out:
            # No examine: a RAID superblock or lvstore is just bytes here.
            json.dump({'subsystems': [{'subsystem': 'bdev', 'config': [{
                'method': 'bdev_set_options',
                'params': {'bdev_auto_examine': False}}, {
                'method': 'bdev_nvme_attach_controller', 'params': {
                    'name': 'dd', 'trtype': 'tcp', 'traddr': self.address,
                    'trsvcid': port, 'adrfam': 'ipv4', 'subnqn': nqn,
                    'hostnqn': HOST_NQN}}]}]}, out)
        return ([spdk_build.app_path('spdk_dd'), '--json', config,
                 '--bs', str(BLOCK), '--qd', '32', '-m', '0x2',
                 '--disable-cpumask-locks'] + args, spdk_build.app_env())

    def _dd(self, bdev, args):
        cmd, env = self.command(bdev, args)
        subprocess.run(cmd, env=env, check=True, capture_output=True,
                       timeout=300)

    def write(self, bdev, offset, data):
        """Write ``data`` (whole 4 KiB blocks) at ``offset`` of ``bdev``."""
        assert offset % BLOCK == 0 and len(data) % BLOCK == 0
        path = os.path.join(self.workdir, 'in-%s' % uuid.uuid4().hex)
        with open(path, 'wb') as out:
            out.write(data)
        self._dd(bdev, ['--if', path, '--ob', 'ddn1',
                        '--seek', str(offset // BLOCK)])

    def read(self, bdev, offset, length):
        """``length`` bytes at ``offset`` of ``bdev`` (a block border)."""
        assert offset % BLOCK == 0
        path = os.path.join(self.workdir, 'out-%s' % uuid.uuid4().hex)
        self._dd(bdev, ['--ib', 'ddn1', '--of', path,
                        '--skip', str(offset // BLOCK),
                        '--count', str(-(-length // BLOCK))])
        with open(path, 'rb') as src:
            return src.read(length)


def read_once(target, bdev, length, workdir):
    """The first ``length`` bytes of ``bdev``, its export gone after."""
    dd = NvmfDd(target, workdir)
    try:
        return dd.read(bdev, 0, length)
    finally:
        dd.unexport(bdev)
