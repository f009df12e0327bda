"""Options that say how to reach an SPDK target's JSON-RPC server.

Registered by each consumer in its own group: Cinder in the backend's
section, Nova and os-brick in ``[spdk_vhost]``; see
:meth:`spdk_vhost_core.spdk_rpc.SpdkClient.from_conf`. SPDK's own RPC
server has no authentication: a target on this host is reached on its
Unix socket (protect it with file permissions), a target on another
host through that host's ``spdk-vhost-agent`` over HTTPS with
credentials (:data:`agent_opts`, Cinder only: a compute host drives its
own target).
"""

from oslo_config import cfg

#: Where the SPDK service units keep the config the target starts with.
SAVED_CONFIG = '/var/lib/spdk/spdk_tgt.json'

rpc_opts = [
    cfg.StrOpt('spdk_rpc_socket',
               default='/var/tmp/spdk.sock',
               help='Path of the SPDK target\'s JSON-RPC Unix socket '
                    '(spdk_tgt -r). Used unless spdk_rpc_address is set.'),
    cfg.HostAddressOpt('spdk_rpc_address',
                       help='Address of an SPDK JSON-RPC TCP listener. '
                            'When set, TCP is used instead of the Unix '
                            'socket; SPDK has no authentication, so only '
                            'expose it on a trusted network.'),
    cfg.PortOpt('spdk_rpc_port',
                help='TCP port of the SPDK JSON-RPC listener; required '
                     'with spdk_rpc_address.'),
    cfg.FloatOpt('spdk_rpc_timeout',
                 default=60.0,
                 min=0.1,
                 help='Seconds (wall clock) to wait for the answer to one '
                      'RPC before giving up with a timeout error. Lvol '
                      'inflate and large deletes can take seconds.'),
    cfg.IntOpt('spdk_rpc_connect_retries',
               default=5,
               min=0,
               help='How many more times to try connecting when the SPDK '
                    'target is not (yet) listening, e.g. while it '
                    'restarts.'),
    cfg.FloatOpt('spdk_rpc_retry_interval',
                 default=1.0,
                 min=0.0,
                 help='Seconds to wait between two connection attempts.'),
    cfg.StrOpt('spdk_saved_config',
               default=SAVED_CONFIG,
               help='File the SPDK target loads at start (spdk_tgt '
                    '--json); the default is the one the project\'s '
                    'systemd units start it with. After each change it '
                    'makes on the target (vhost controller, NVMe-oF '
                    'export or attachment, QoS limit), the driver saves '
                    'the target\'s live config there, so a restarted or '
                    'crashed target comes back with it. Its directory '
                    'must exist and be writable by this service, which '
                    'refuses to start otherwise. Set it to nothing '
                    '(spdk_saved_config =) to save nothing: a target '
                    'restart then loses those objects.'),
]


def register_opts(conf, group):
    """Register the RPC options in ``group`` (idempotent, like oslo's)."""
    conf.register_opts(rpc_opts, group=group)


agent_opts = [
    cfg.URIOpt('spdk_agent_url',
               schemes=['https'],
               help='https://HOST:PORT of the spdk-vhost-agent of the '
                    'storage node whose SPDK target this section drives, '
                    'when that target is on another host. When set, every '
                    'RPC goes to the agent (spdk_rpc_socket and '
                    'spdk_rpc_address are not used), and the agent writes '
                    'what must be on the node itself: the saved config, '
                    'the DH-HMAC-CHAP key files and the record of '
                    'connected hosts (spdk_saved_config and '
                    'spdk_nvmf_key_dir are then the agent\'s options, and '
                    'must be left unset here).'),
    cfg.StrOpt('spdk_agent_user',
               default='cinder',
               help='User name this service gives the agent.'),
    cfg.StrOpt('spdk_agent_password',
               secret=True,
               help='Password this service gives the agent; required '
                    'with spdk_agent_url.'),
    cfg.StrOpt('spdk_agent_ca_file',
               help='CA certificate (PEM) the agent\'s certificate must '
                    'be signed by; the system\'s CAs when unset. The '
                    'certificate must name the host of spdk_agent_url.'),
]
