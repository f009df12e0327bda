"""Real SPDK targets in the roles the Nova-side tests need.

A compute target that only serves local volumes runs ``vhost`` in
interrupt mode (idle, so it leaves both cores to TCG guests); one that
attaches remote volumes polls one core, because SPDK's NVMe-oF initiator
refuses interrupt mode. A storage target is an interrupt-mode
``nvmf_tgt`` with the TCP transport. Every target gets an lvol store on
a sparse file (no hugepage cost), 512-byte blocks like Cinder's volumes.
"""

from spdk_vhost_core import spdk_rpc
from testbed import spdk_target

LVS = 'lvs0'
#: Four reactors on the two real CPUs: cores 0 and 2 on CPU 0, 1 and 3
#: on CPU 1. With a fake sysfs placing 0-1 on node 0 and 2-3 on node 1,
#: the target looks like a two-node host (SPDK itself reports node 0).
NUMA_LCORES = '0@0,1@1,2@0,3@1'


def client_of(test, target, **kwargs):
    """The connector's own RPC client for ``target``, closed at cleanup."""
    options = dict(timeout=30, connect_retries=0)
    options.update(kwargs)
    client = spdk_rpc.SpdkClient(socket_path=target.socket_path, **options)
    test.addCleanup(client.close)
    return client


def start(test, name, lvstore=True, size_mib=1024, **kwargs):
    """A target fixture (SpdkTarget arguments) with lvstore ``lvs0``.

    Started as the units start it (``service``): a saved config entry
    that fails does not keep the target down.
    """
    target = test.useFixture(spdk_target.SpdkTarget(name=name, service=True,
                                                    **kwargs))
    if lvstore:
        target.aio_lvstore(LVS, size_mib=size_mib, block_size=512)
    return target


def local_compute(test, lcores=NUMA_LCORES, **kwargs):
    """A compute target for local volumes: idle ``vhost``."""
    return start(test, 'compute', app='vhost', lcores=lcores,
                 interrupt_mode=True, **kwargs)


def remote_compute(test, name='compute', **kwargs):
    """A compute target that attaches over NVMe/TCP: polls core 0."""
    return start(test, name, app='vhost', **kwargs)


def storage(test, name='storage', transport=True, **kwargs):
    """A storage node's target exporting lvols over NVMe/TCP: idle."""
    target = start(test, name, app='nvmf_tgt', interrupt_mode=True,
                   **kwargs)
    if transport:
        target.rpc('nvmf_create_transport', {'trtype': 'TCP'})
    return target
