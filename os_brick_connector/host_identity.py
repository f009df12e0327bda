"""What a compute host tells Cinder about itself: the connector properties.

Cinder's driver reads these to pick the transport (``local`` when the
volume lives on this host's own SPDK target, else NVMe-oF) and to allow
this host's NQN on the volume's subsystem.
"""

import os
import socket
import uuid

from oslo_log import log

from os_brick_connector import connector_errors as errors
from os_brick_connector import exception as spdk_exc
from os_brick_connector import numa

LOG = log.getLogger(__name__)

# Keys of the connector properties. The Cinder driver reads the first two
# (see its initialize_connection); 'nqn' is also os-brick's NVMe-oF key.
TARGET_ID = 'spdk_target_id'
HOST_NQN = 'nqn'
TRANSPORTS = 'spdk_transports'
NUMA_LAYOUT = 'spdk_numa_layout'

NQN_UUID_PREFIX = 'nqn.2014-08.org.nvmexpress:uuid:'
MACHINE_ID = '/etc/machine-id'


def target_id(conf):
    """This host's SPDK target identity (``target_id`` or a default).

    The default is the Cinder driver's default for the same target: the
    host name for a Unix socket, ``tcp:<address>:<port>`` for TCP, so a
    hyperconverged host matches without configuration.
    """
    if conf.target_id:
        return conf.target_id
    if conf.spdk_rpc_address:
        return 'tcp:%s:%s' % (conf.spdk_rpc_address, conf.spdk_rpc_port)
    return socket.gethostname()


def _read_first_line(path):
    try:
        with open(path) as src:
            return src.readline().strip() or None
    except FileNotFoundError:
        return None


def host_nqn(conf, machine_id_path=MACHINE_ID):
    """The host NQN: configured, nvme-cli's file, or from the machine id.

    The machine id is stable across reboots and unique per host, so the
    NQN derived from it is too (same form as ``nvme gen-hostnqn``).
    """
    nqn = conf.host_nqn or _read_first_line(conf.host_nqn_file)
    if nqn:
        return nqn
    machine_id = _read_first_line(machine_id_path)
    if not machine_id:
        raise errors.HostNqnMissing(path=conf.host_nqn_file)
    return NQN_UUID_PREFIX + str(uuid.UUID(machine_id))


def transports(client, sysfs_root, interrupt_mode=False):
    """The transports this host's target can attach volumes over.

    ``local`` always; ``tcp`` when the target has the NVMe-oF initiator
    (bdev_nvme) and polls (the initiator refuses interrupt mode);
    ``rdma`` when it also sees an RDMA device in sysfs.
    """
    found = ['local']
    if interrupt_mode:
        LOG.info('The SPDK target runs in interrupt mode, where its NVMe-oF '
                 'initiator does not work: this host attaches local '
                 'volumes only')
        return found
    try:
        methods = client.rpc_get_methods()
    except spdk_exc.MethodNotFound:
        return found
    if 'bdev_nvme_attach_controller' in methods:
        found.append('tcp')
        rdma_dir = os.path.join(sysfs_root, 'class', 'infiniband')
        if os.path.isdir(rdma_dir) and os.listdir(rdma_dir):
            found.append('rdma')
    return found


def connector_properties(conf, client):
    """The SPDK part of this host's connector properties."""
    topology = numa.Topology.read(client, conf.sysfs_root)
    return {TARGET_ID: target_id(conf),
            HOST_NQN: host_nqn(conf),
            TRANSPORTS: transports(client, conf.sysfs_root,
                                   topology.interrupt_mode),
            NUMA_LAYOUT: topology.layout()}
