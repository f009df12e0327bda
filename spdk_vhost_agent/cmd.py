"""``spdk-vhost-agent``: run a storage node's agent until SIGTERM.

    spdk-vhost-agent --config-file /etc/spdk-vhost/agent.conf

It refuses to start, naming the option, on a configuration it could not
serve: no TLS key pair, a saved config it could not write, a key
directory it could not make private. The SPDK target need not be up:
until it answers, requests fail with the agent's "target unreachable"
error, which cinder-volume reports as such.
"""

import os
import signal
import sys
import threading

from oslo_config import cfg
from oslo_log import log

from spdk_vhost_agent import methods
from spdk_vhost_agent import options
from spdk_vhost_agent import server
from spdk_vhost_core import node_state
from spdk_vhost_core import saved_config
from spdk_vhost_core import spdk_rpc

LOG = log.getLogger(__name__)
DEFAULT_CONFIG = '/etc/spdk-vhost/agent.conf'


class ConfigError(Exception):
    pass


def _check(conf):
    """Why ``conf`` (the ``[agent]`` group) cannot be served, or None."""
    if not conf.saved_config:
        return ('saved_config is empty: the target would lose every export '
                'when it restarts')
    problem = saved_config.path_problem(conf.saved_config)
    if problem:
        return 'saved_config %s %s' % (conf.saved_config, problem)
    for option in ('cert_file', 'key_file'):
        path = getattr(conf, option)
        if not os.access(path, os.R_OK):
            return '%s %s is not readable' % (option, path)
    return None


def build(conf):
    """The server of ``conf`` (the ``[agent]`` group), not started."""
    problem = _check(conf)
    if problem:
        raise ConfigError(problem)
    os.makedirs(conf.key_dir, mode=0o700, exist_ok=True)
    client = spdk_rpc.SpdkClient(socket_path=conf.spdk_rpc_socket,
                                 timeout=conf.spdk_rpc_timeout,
                                 connect_retries=0)
    node = node_state.LocalNode(client, conf.saved_config, conf.key_dir)
    return server.AgentServer(
        conf.listen_address, conf.listen_port, conf.cert_file,
        conf.key_file, conf.user, conf.password,
        methods.Dispatcher(client, node))


def main(argv=None):
    conf = cfg.ConfigOpts()
    options.register_opts(conf)
    log.register_options(conf)
    default = [DEFAULT_CONFIG] if os.path.exists(DEFAULT_CONFIG) else []
    conf(sys.argv[1:] if argv is None else argv, project='spdk-vhost',
         prog='spdk-vhost-agent', default_config_files=default)
    log.setup(conf, 'spdk-vhost-agent')
    try:
        agent = build(conf.agent)
    except (ConfigError, OSError) as err:
        LOG.error('spdk-vhost-agent cannot start: %s', err)
        return 1
    # serve_forever runs here; a signal asks for its end from a thread,
    # as shutdown() waits for the loop it stops.
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(
        target=agent.shutdown).start())
    LOG.info('spdk-vhost-agent serving %s on https://%s:%d',
             conf.agent.spdk_rpc_socket, conf.agent.listen_address,
             conf.agent.listen_port)
    try:
        agent.serve_forever()
    finally:
        agent.server_close()
        agent.dispatch.client.close()
    return 0


if __name__ == '__main__':
    sys.exit(main())
