"""The peers: the other storage targets a backend keeps copies on.

Each is described by a cinder.conf section of a backend's shape (the
``spdk_agent_*`` or ``spdk_rpc_*``, ``spdk_target_id``, ``spdk_lvstores``,
``spdk_nvmf_*`` and ``spdk_saved_config`` options), named in the
backend's ``spdk_replica_targets``; the section is not an enabled
backend. Each target is a failure domain: list only targets on other
hosts, reached through their node's agent (``spdk_agent_url``), which
keeps each one's saved config and keys on that node.
"""

import socket
import time
import urllib.parse

from cinder import exception
from cinder.volume import configuration
from cinder.volume import driver as cinder_driver
from oslo_log import log

from cinder_spdk_vhost import dd
from cinder_spdk_vhost import export
from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import options
from cinder_spdk_vhost import pools
from cinder_spdk_vhost import replica_type
from cinder_spdk_vhost import target_rpcs
from cinder_spdk_vhost import validation
from spdk_vhost_core import exception as rpc_exc
from spdk_vhost_core import options as rpc_options
from spdk_vhost_core import spdk_rpc

LOG = log.getLogger(__name__)


def section(name):
    """The options of section ``name``, registered with their defaults."""
    conf = configuration.Configuration(cinder_driver.volume_opts,
                                       config_group=name)
    conf.append_config_values(rpc_options.rpc_opts)
    conf.append_config_values(rpc_options.agent_opts)
    conf.append_config_values(options.driver_opts)
    return conf


def target_id(conf):
    """The identity of the target ``conf`` drives (``spdk_target_id``).

    By default where it is reached, the same for every cinder-volume of
    a cluster: its agent's address, or its RPC listener's; a local
    socket's target is this host's.
    """
    if conf.spdk_target_id:
        return conf.spdk_target_id
    if conf.spdk_agent_url:
        return 'agent:%s' % urllib.parse.urlsplit(conf.spdk_agent_url).netloc
    if conf.spdk_rpc_address:
        return 'tcp:%s:%s' % (conf.spdk_rpc_address, conf.spdk_rpc_port)
    return socket.gethostname()


def from_conf(conf, own_target_id):
    """The peers of ``spdk_replica_targets``: distinct, not this target."""
    found = [Peer.from_section(name) for name in conf.spdk_replica_targets]
    ids = [own_target_id] + [peer.target_id for peer in found]
    problem = None
    if len(set(ids)) < len(ids):
        problem = 'targets sharing an spdk_target_id: %s' % ', '.join(ids)
    saved = [c.spdk_saved_config for c in [conf] + [p.conf for p in found]
             if not c.spdk_agent_url and c.spdk_saved_config]
    if len(set(saved)) < len(saved):
        problem = ('targets sharing one spdk_saved_config (%s): a section '
                   'without spdk_agent_url needs a file of its own, on its '
                   'target\'s host' % ', '.join(saved))
    if problem:
        for peer in found:
            peer.close()
        raise exception.InvalidConfigurationValue(
            option='spdk_replica_targets',
            value='%r (%s)' % (conf.spdk_replica_targets, problem))
    return found


class Peer(object):
    """Another storage target: its lvol stores and NVMe-oF exports.

    A peer that did not answer is *away* for :data:`AWAY_SECONDS`: what
    can go on without its copies skips it meanwhile rather than wait
    for its connection retries (or, on a host that vanished, timeouts)
    once more; a sweep asks it all the same, to see it return.
    """

    #: How long a peer that did not answer is taken as away unasked.
    AWAY_SECONDS = 30

    def __init__(self, name, conf):
        self.name = name
        self._away_until = 0.0
        self.conf = conf
        self.target_id = target_id(conf)
        self.client = spdk_rpc.SpdkClient.from_conf(conf)
        self.pools = pools.Pools(
            self.client, conf, export.NvmfExport(self.client, conf))
        self.exporter = self.pools.exporter
        # No vhost controller serves a copy (an attach on a host holding
        # one is refused), so none is looked for, whatever the target
        # application, and whether or not it answered at start.
        self.exporter.has_vhost = False

    @classmethod
    def from_section(cls, name):
        conf = section(name)
        try:
            validation.check_config(conf)
        except exception.InvalidConfigurationValue as err:
            raise exception.InvalidConfigurationValue(
                option='[%s] %s' % (name, err.kwargs['option']),
                value=err.kwargs['value']) from err
        return cls(name, conf)

    def __str__(self):
        return '%s (%s)' % (self.target_id, self.name)

    def check(self):
        """Whether the target can hold copies now; logs why not."""
        try:
            target_rpcs.check_target(self.client, self.conf)
            self.exporter.require('Keeping copies of replicated volumes')
            self.exporter.ensure_transport()
            dd.sweep_exports(self.exporter)
            # A crash before the first change restarts it from this.
            self.pools.persist()
        except (exception.CinderException, rpc_exc.SpdkRpcError) as err:
            LOG.warning('Replica target %(peer)s cannot hold copies now: '
                        '%(err)s', {'peer': self, 'err': err})
            return False
        return True

    def rooms(self):
        """Bytes of room for copies in each of its lvol stores, by name.

        A store's free space, less what the copies it holds have yet to
        write: a rebuild writes every block of a copy, so a thin one
        grows to its whole size then, and must find that room. Copies
        are the only lvols counted: a store shared with a backend's
        pool leaves that pool's thin volumes to Cinder's
        over-subscription ratio.
        """
        held = self._ask(lvols.every, self.client, self.pools.lvstores)
        found = {}
        for lvs in self.pools.lvstores:
            store = self._ask(self.client.bdev_lvol_get_lvstores,
                              lvs_name=lvs)[0]
            cluster = store['cluster_size']
            owed = sum(lvols.unallocated(lvol, cluster)
                       for lvol in held if lvol.lvs == lvs and
                       not lvol.is_snapshot and
                       replica_type.volume_of(lvol.name))
            found[lvs] = store['free_clusters'] * cluster - owed
        return found

    def room(self):
        """(bytes, lvol store): the most room for a new copy in one store."""
        return max((room, lvs) for lvs, room in self.rooms().items())

    def _ask(self, call, *args, **kwargs):
        """``call(...)``, noting whether the peer answered."""
        try:
            result = call(*args, **kwargs)
        except rpc_exc.SpdkRpcError:
            self._away_until = time.monotonic() + self.AWAY_SECONDS
            raise
        self._away_until = 0.0
        return result

    def find(self, name):
        """The lvol ``name``, or None."""
        return self._ask(lvols.find, self.client, name, self.pools.lvstores)

    def copies(self):
        """(lvol alias, volume id) of every volume's copy it holds."""
        found = []
        for lvs in self.pools.lvstores:
            for item in self._ask(self.client.bdev_lvol_get_lvols,
                                  lvs_name=lvs):
                volume_id = replica_type.volume_of(item['name'])
                if volume_id is not None:
                    found.append((lvols.alias(lvs, item['name']), volume_id))
        return found

    @property
    def away(self):
        """Whether it did not answer a moment ago (see the class)."""
        return time.monotonic() < self._away_until

    def close(self):
        self.client.close()
