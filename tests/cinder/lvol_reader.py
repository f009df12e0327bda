"""Read an lvol's bytes from a real target, the way a remote host would.

Only the target may open its lvstore, so the test exports the lvol on an
NVMe-oF subsystem of its own (made here with plain RPCs, not by the code
under test) and SPDK's ``spdk_dd`` attaches it over NVMe/TCP and copies
the first bytes into a file.
"""

import json
import os
import subprocess
import uuid

from testbed import net
from testbed import spdk_build

HOST_NQN = 'nqn.2014-08.org.nvmexpress:uuid:%s'
MIB = 1024 * 1024


def read_lvol(target, bdev, length, workdir):
    """The first ``length`` bytes (whole MiB are read) of bdev ``bdev``."""
    nqn = 'nqn.2016-06.io.spdk:reader-%s' % uuid.uuid4().hex[:12]
    host = HOST_NQN % uuid.uuid4()
    port = str(net.free_port())
    target.rpc('nvmf_create_subsystem', {'nqn': nqn,
                                         'allow_any_host': False})
    try:
        target.rpc('nvmf_subsystem_add_ns', {
            'nqn': nqn, 'namespace': {'bdev_name': bdev}})
        target.rpc('nvmf_subsystem_add_host', {'nqn': nqn, 'host': host})
        target.rpc('nvmf_subsystem_add_listener', {
            'nqn': nqn, 'listen_address': {
                'trtype': 'TCP', 'traddr': '127.0.0.1', 'trsvcid': port,
                'adrfam': 'IPv4'}})
        return _dd(nqn, host, port, length, workdir)
    finally:
        target.rpc('nvmf_delete_subsystem', {'nqn': nqn})


def _dd(nqn, host, port, length, workdir):
    config = os.path.join(workdir, 'reader-%s.json' % uuid.uuid4().hex)
    out = config[:-len('.json')] + '.raw'
    with open(config, 'w') as dst:
        json.dump({'subsystems': [{'subsystem': 'bdev', 'config': [{
            'method': 'bdev_nvme_attach_controller', 'params': {
                'name': 'reader', 'trtype': 'tcp', 'traddr': '127.0.0.1',
                'trsvcid': port, 'adrfam': 'ipv4', 'subnqn': nqn,
                'hostnqn': host}}]}]}, dst)
    count = -(-length // MIB)
    try:
        subprocess.run(
            [spdk_build.app_path('spdk_dd'), '--ib', 'readern1', '--of', out,
             '--json', config, '--bs', str(MIB), '--count', str(count),
             '-m', '0x1', '--disable-cpumask-locks'],
            env=spdk_build.app_env(), check=True, capture_output=True,
            timeout=300)
        with open(out, 'rb') as src:
            return src.read(length)
    finally:
        for path in (config, out):
            if os.path.exists(path):
                os.unlink(path)
