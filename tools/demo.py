"""make demo: an SPDK logical volume written and read back by a real guest.

Starts the SPDK target emulator (or uses the real target at
``SPDK_RPC_SOCKET``), creates a thin lvol, exposes it as a vhost-user-blk
controller, boots a QEMU guest (TCG, hugepage-backed shared memory) that
writes a pattern and reads it back, then copies the lvol's bytes out through
SPDK and compares. Prints what it did, and how long each step took.
Run from the repository root with it on PYTHONPATH (the Makefile does).
"""

import sys
import tempfile

from os_brick_connector import spdk_rpc
from tests.emulator import fixture as emulator_fixture
from tests.guest import qemu
from tests import vhost_chain

MiB = vhost_chain.MiB
OFFSET, LENGTH, TOKEN = 16 * MiB, MiB, 'spdk-vhost-demo'


def run(workdir):
    with emulator_fixture.EmulatorFixture() as target:
        kind = 'real SPDK target' if target.is_real else 'SPDK emulator'
        print('SPDK target: %s at %s' % (kind, target.socket_path))
        client = spdk_rpc.SpdkClient(target.socket_path, timeout=30)
        chain = vhost_chain.VhostChain(client, workdir, prefix='demo')
        try:
            version = client.spdk_get_version()['version']
            print('SPDK version: %s\n' % version)
            chain.build()
            results = chain.guest_io(OFFSET, LENGTH, TOKEN)
            on_lvol = chain.read_back(OFFSET, LENGTH)
        finally:
            chain.teardown()
            client.close()

    expected = vhost_chain.sha256(qemu.pattern_bytes(TOKEN, LENGTH))
    checks = [
        ('guest sees a %d MiB disk' % chain.lvol_mib,
         results['vda.size'] == str(chain.lvol_mib * MiB)),
        ('guest wrote the pattern', results['vda.wrote@%d' % OFFSET]
         == expected),
        ('guest read it back', results['vda.read@%d' % OFFSET] == expected),
        ('the lvol holds the bytes', vhost_chain.sha256(on_lvol)
         == expected),
    ]
    print('%-20s %8s  %s' % ('step', 'seconds', 'detail'))
    for step in chain.steps:
        print('%-20s %8.2f  %s' % (step.name, step.seconds, step.detail))
    print()
    for name, ok in checks:
        print('%-4s %s' % ('ok' if ok else 'FAIL', name))
    return 0 if all(ok for _name, ok in checks) else 1


def main():
    with tempfile.TemporaryDirectory(prefix='spdk-vhost-demo-') as workdir:
        return run(workdir)


if __name__ == '__main__':
    sys.exit(main())
