"""What a compute host tells Cinder about itself: the connector properties.

Cinder's driver reads three keys (see its ``initialize_connection``): the
target identity, to attach a volume of this host's own SPDK target
locally (``transport: local``), the host NQN, to allow this host on
the subsystem of a volume exported over NVMe-oF, and the NVMe-oF
reconnect settings this host attaches with, recorded for the storage
target's upgrade command (:mod:`reconnect`). None needs the
target, so reporting them makes no RPC: Nova builds the connector for
every attachment, of every volume type, and must get it even while the
SPDK target is down.
"""

import socket
import uuid

from oslo_log import log

from os_brick_connector import connector_errors as errors
from spdk_vhost_core import reconnect

LOG = log.getLogger(__name__)

# Keys of the connector properties; 'nqn' is also os-brick's NVMe-oF key.
TARGET_ID = 'spdk_target_id'
HOST_NQN = 'nqn'

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
    try:
        return NQN_UUID_PREFIX + str(uuid.UUID(machine_id or ''))
    except ValueError:
        raise errors.HostNqnMissing(path=conf.host_nqn_file) from None


def connector_properties(conf, client=None):
    """The SPDK part of this host's connector properties, or none at all.

    Never raises: a host whose identity cannot be read (no host NQN, an
    unreadable file) reports no SPDK key, which Cinder's driver refuses
    with a message pointing here, while attachments of every other
    volume type go on. The reason is logged, once per call. ``client``
    is accepted for callers holding one; no property needs it.
    """
    try:
        return {TARGET_ID: target_id(conf), HOST_NQN: host_nqn(conf),
                reconnect.KEY: reconnect.from_conf(conf)}
    except Exception as err:  # any failure: see the docstring
        LOG.warning('This host cannot attach SPDK volumes: its SPDK '
                    'identity for Cinder could not be read (%(type)s: '
                    '%(err)s). Other volume types are not affected.',
                    {'type': type(err).__name__, 'err': err})
        return {}
