"""What a storage target's host keeps on disk, written on that host.

Three files belong beside a target, because something on its host reads
them: the saved config it starts with (``--json``), the DH-HMAC-CHAP key
files its keyring opens by path, and the record of connected hosts that
``spdk-vhost-upgrade`` reads there. :class:`LocalNode` writes them when
the target runs on this host (a hyperconverged host; and the agent
itself, on a storage node). :class:`AgentNode` has the node's
``spdk-vhost-agent`` write them, when the target is on another host: no
path of this host is ever handed to a target elsewhere.

Both raise :class:`~spdk_vhost_core.exception.ConfigNotSaved` from
``save`` and :class:`OSError` or an RPC error from the others.
"""

from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import host_settings
from spdk_vhost_core import nvme_auth
from spdk_vhost_core import saved_config

#: The agent's own methods: name -> the parameters each takes.
SAVE_CONFIG = 'agent_save_config'
KEY_ADD = 'agent_key_add'
KEY_REMOVE = 'agent_key_remove'
HOST_RECORD = 'agent_host_record'
HOST_FORGET = 'agent_host_forget'
METHODS = {
    SAVE_CONFIG: ('subsystems',),
    KEY_ADD: ('name', 'secret'),
    KEY_REMOVE: ('name',),
    HOST_RECORD: ('host_nqn', 'subsystem', 'settings'),
    HOST_FORGET: ('subsystem', 'host_nqns'),
}


def from_conf(client, conf):
    """The node of the target ``conf`` drives, as ``client`` reaches it."""
    if client.through_agent:
        return AgentNode(client)
    return LocalNode(client, conf.spdk_saved_config,
                     conf.spdk_nvmf_key_dir)


class LocalNode(object):
    """The target is on this host: its files are written here."""

    def __init__(self, client, saved, key_dir):
        self.client = client
        self.saver = saved_config.ConfigSaver(client, saved)
        self.saved = saved
        self.key_dir = key_dir

    @property
    def saving(self):
        """Whether changes are saved at all (``spdk_saved_config``)."""
        return self.saver.enabled

    def save(self, subsystems=None):
        """Save the live config (only ``subsystems``, when named)."""
        return self.saver.save(subsystems)

    def add_key(self, name, secret):
        """Write key ``name`` and register it in the target's keyring."""
        nvme_auth.register(self.client, self.key_dir, name, secret)

    def remove_key(self, name):
        nvme_auth.unregister(self.client, self.key_dir, name)

    def record_host(self, host_nqn, subsystem, settings):
        """Record a host's reconnect settings; what was recorded before."""
        return host_settings.record(self.saved, host_nqn, subsystem,
                                    settings)

    def forget_hosts(self, subsystem, host_nqns):
        host_settings.forget(self.saved, subsystem, host_nqns)


class AgentNode(object):
    """The target's host runs ``spdk-vhost-agent``, which writes them."""

    saving = True  # the agent refuses to start without a saved config

    def __init__(self, client):
        self.client = client

    def save(self, subsystems=None):
        params = {'subsystems': sorted(subsystems)} if subsystems else None
        try:
            self.client.call(SAVE_CONFIG, params)
        except spdk_exc.SpdkRpcError as err:
            raise spdk_exc.ConfigNotSaved(
                '%s (its agent)' % self.client.target, err) from err

    def add_key(self, name, secret):
        self.client.call(KEY_ADD, {'name': name, 'secret': secret})

    def remove_key(self, name):
        self.client.call(KEY_REMOVE, {'name': name})

    def record_host(self, host_nqn, subsystem, settings):
        return self.client.call(HOST_RECORD, {
            'host_nqn': host_nqn, 'subsystem': subsystem,
            'settings': settings})

    def forget_hosts(self, subsystem, host_nqns):
        self.client.call(HOST_FORGET, {'subsystem': subsystem,
                                       'host_nqns': list(host_nqns)})
