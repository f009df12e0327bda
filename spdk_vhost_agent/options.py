"""The agent's options, in ``[agent]`` of its own config file.

One agent per storage node, beside that node's SPDK target; see the
install guide for the file (``/etc/spdk-vhost/agent.conf``).
"""

from oslo_config import cfg

from spdk_vhost_core import options as core_options

GROUP = 'agent'

agent_opts = [
    cfg.HostAddressOpt('listen_address',
                       required=True,
                       help='Address of this node on the network '
                            'cinder-volume reaches it on (the storage '
                            'management network). Never 0.0.0.0 on a '
                            'host with a public address.'),
    cfg.PortOpt('listen_port',
                default=5261,
                help='TCP port of the HTTPS listener.'),
    cfg.StrOpt('cert_file',
               required=True,
               help='PEM certificate of this node, naming listen_address '
                    'or the host name cinder-volume uses in '
                    'spdk_agent_url (subjectAltName), signed by the CA '
                    'of cinder-volume\'s spdk_agent_ca_file.'),
    cfg.StrOpt('key_file',
               required=True,
               help='PEM private key of cert_file; mode 0600, owned by '
                    'the agent\'s user.'),
    cfg.StrOpt('user',
               default='cinder',
               help='User name cinder-volume gives (spdk_agent_user).'),
    cfg.StrOpt('password',
               secret=True,
               required=True,
               help='Password cinder-volume gives (spdk_agent_password). '
                    'Keep this file mode 0600.'),
    cfg.StrOpt('spdk_rpc_socket',
               default='/var/tmp/spdk.sock',
               help='The local SPDK target\'s JSON-RPC Unix socket.'),
    cfg.FloatOpt('spdk_rpc_timeout',
                 default=60.0,
                 min=0.1,
                 help='Seconds to wait for the target\'s answer to one '
                      'RPC.'),
    cfg.StrOpt('saved_config',
               default=core_options.SAVED_CONFIG,
               help='File the local SPDK target starts with (--json); '
                    'the agent writes the target\'s live config there '
                    'whenever cinder-volume asks, after each change. '
                    'Its directory must exist and be writable.'),
    cfg.StrOpt('key_dir',
               default='/var/lib/spdk/keys',
               help='Directory of the DH-HMAC-CHAP key files the target\'s '
                    'keyring reads (made 0700 if missing).'),
]


def register_opts(conf):
    conf.register_opts(agent_opts, group=GROUP)
