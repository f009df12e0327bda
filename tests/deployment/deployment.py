"""The whole Cinder deployment, its storage on nodes of their own.

Two or three storage nodes, each a host of its own (:mod:`testbed.hosts`:
its address, its files) running an ``nvmf_tgt`` in interrupt mode behind
its ``spdk-vhost-agent`` (HTTPS, a password, a CA of the deployment's):
``storage-a`` holds the backend's two lvol stores on sparse files
(reported as two pools), ``storage-b`` and ``storage-c`` the other copies
of replicated volumes (``spdk_replica_targets``). This machine is the
controller: a fresh MariaDB database and RabbitMQ vhost,
``cinder-manage db sync``, then the real ``cinder-scheduler``,
``cinder-volume``, ``cinder-backup`` (posix driver) and ``cinder-api``
console scripts of the installed ``cinder`` package, which reach each
node through its agent and copy
over NVMe/TCP. Ready means: the API answers, the volume and backup
services are up and the scheduler knows both pools.

A ``clustered`` deployment runs two cinder-volume services of one
cluster (:data:`cinder_conf.CLUSTER`), each with its own host name,
state and lock directories, locking through a real etcd; they share the
staging directory, as the admin guide asks. ``third_node`` adds
``storage-c``, for volumes of three copies.
"""

import logging
import os
import socket
import time

from cinderclient import api_versions
from cinderclient import client as cinder_client
from cinderclient import exceptions as cinder_exc
import fixtures
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint

from testbed import agent
from testbed import etcd
from testbed import hosts
from testbed import net
from testbed import spdk_target
from testbed import tls
from testbed import waiting
from tests.deployment import backing
from tests.deployment import cinder_conf
from tests.deployment import keystone
from tests.deployment import keystone_api
from tests.deployment import processes

LOG = logging.getLogger(__name__)

API_VERSION = '3.64'
PROJECT = 'deploy-project'
USER = 'deploy-user'
# lvol store -> size in MiB; lvs0 has the most room, so the capacity
# weigher must choose it unless a type asks for lvs1.
LVSTORES = {'lvs0': 4096, 'lvs1': 2048}
# The storage nodes (host names, and the targets' ids in Cinder and
# Nova): the backend's own, then those of replicated volumes' other
# copies. storage-c has less room than storage-b: a volume of two copies
# has its second on storage-b (placement picks the most room), one of
# three has a copy on each. Each node keeps a whole copy's room for each
# copy it holds (a rebuild writes every block): storage-b has room for
# five 1 GiB copies (a 2 GiB volume, its snapshot and a 2 GiB clone of
# it), storage-c for two (or one grown to 2 GiB).
TARGET_ID = 'storage-a'
REPLICA_TARGET_ID = 'storage-b'
THIRD_TARGET_ID = 'storage-c'
REPLICA_LVSTORE = 'lvs0'
REPLICA_LVSTORE_MIB = 6144
THIRD_LVSTORE_MIB = 3072
NVMF_PORT = 4420
SERVICES = ('cinder-scheduler', 'cinder-volume', 'cinder-backup',
            'cinder-api')
#: A clustered deployment's second cinder-volume (log and service name).
SECOND_VOLUME = 'cinder-volume-2'


class CinderDeployment(fixtures.Fixture):
    """Start everything; on cleanup stop it and drop the database."""

    def __init__(self, clustered=False, third_node=False,
                 start_timeout=180):
        super().__init__()
        self.clustered = clustered
        self.third_node = third_node
        self.start_timeout = start_timeout
        self.services = {}
        #: cinder-volume's processes: service (log) name -> Cinder host.
        self.members = {'cinder-volume': cinder_conf.HOST}
        self._front = None

    def _setUp(self):
        self.workdir = self.useFixture(fixtures.TempDir()).path
        for sub in ('log', 'tls'):
            os.makedirs(os.path.join(self.workdir, sub))
        nodes = {TARGET_ID: LVSTORES,
                 REPLICA_TARGET_ID: {REPLICA_LVSTORE: REPLICA_LVSTORE_MIB}}
        if self.third_node:
            nodes[THIRD_TARGET_ID] = {REPLICA_LVSTORE: THIRD_LVSTORE_MIB}
        lab = self.useFixture(hosts.Lab(tuple(nodes)))
        # This machine is the controller: its APIs listen here, where
        # the other hosts reach them.
        self.network = lab.network
        self.controller_address = lab.network.gateway
        authority = tls.Authority(os.path.join(self.workdir, 'tls'))
        #: (target, agent, lvol stores) of each storage node, storage-a's
        #: first.
        self.storage = [
            self._storage_node(host, authority, nodes[host.name])
            for host in lab.hosts]
        self.target, self.agent, _lvs = self.storage[0]
        self.replica_target, self.replica_agent, _lvs = self.storage[1]
        self.database = self.useFixture(backing.Database())
        self.rabbit = self.useFixture(backing.RabbitVhost())
        self.api_port = net.free_port()
        self.nvmf_address = self.target.host.address
        self.nvmf_port = NVMF_PORT
        # Started on demand (front()), known now: cinder-volume tells Nova
        # about extended volumes with keystone's credentials.
        self.keystone = keystone.Keystone(
            self.workdir, self.log_path('keystone'),
            address=self.controller_address)
        self.lock_url = None
        if self.clustered:
            self.lock_url = self.useFixture(etcd.Etcd()).url
        self.conf_path = self._write_conf(cinder_conf.HOST, self.workdir)
        # Only the tests' own cinder-api skips keystone; the services
        # authenticate to glance as the deployment would.
        self.noauth_path = os.path.join(self.workdir, 'noauth.conf')
        cinder_conf.write(self.noauth_path, cinder_conf.noauth())
        processes.run_once(
            [processes.console_script('cinder-manage'), '--config-file',
             self.conf_path, 'db', 'sync'],
            self.log_path('cinder-manage'), timeout=300)
        for name in SERVICES:
            argv = [processes.console_script(name),
                    '--config-file', self.conf_path]
            if name == 'cinder-api':
                argv += ['--config-file', self.noauth_path]
            self._start_service(name, argv)
        if self.clustered:
            self.members[SECOND_VOLUME] = cinder_conf.SECOND_MEMBER
            own_dir = os.path.join(self.workdir, cinder_conf.SECOND_MEMBER)
            self._start_service(SECOND_VOLUME, [
                processes.console_script('cinder-volume'), '--config-file',
                self._write_conf(cinder_conf.SECOND_MEMBER, own_dir)])
        self.endpoint = 'http://127.0.0.1:%d/v3' % self.api_port
        self.admin = self.client()
        try:
            self._wait_ready()
        except cinder_exc.ClientException as err:
            raise RuntimeError('cinder-api failed during start: %s\n%s'
                               % (err, self._logs_text())) from err

    def _write_conf(self, host, own_dir):
        """The cinder.conf of the services of ``host``; its path.

        ``own_dir``: that host's state and locks (a second cluster
        member's are not the first's, as on another controller).
        """
        for sub in ('state', 'lock', 'coordination'):
            os.makedirs(os.path.join(own_dir, sub), exist_ok=True)
        path = os.path.join(own_dir, 'cinder.conf')
        backend, *replicas = [
            self._node_section(node_agent, target.name, lvstores)
            for target, node_agent, lvstores in self.storage]
        conf = cinder_conf.build(
            self.workdir, self.database.url, self.rabbit.url,
            self.api_port, backend=backend, replicas=replicas,
            host=host, own_dir=own_dir, lock_url=self.lock_url)
        # Cinder's own credentials, for what it asks Nova (volume extended)
        # and glance (image locations need the service role) itself.
        for section in ('nova', 'glance'):
            conf[section] = self.keystone.service_auth()
        conf['keystone_authtoken'] = self.keystone.authtoken_section()
        for section, context in (
                ('cinder_sys_admin', 'cinder.privsep.sys_admin_pctxt'),
                ('privsep_osbrick', 'os_brick.privileged.default')):
            conf[section] = processes.privsep(path, context)
        cinder_conf.write(path, conf)
        return path

    def _start_service(self, name, argv):
        self.services[name] = self.useFixture(processes.ServiceProcess(
            name, argv, self.log_path(name)))

    def _storage_node(self, host, authority, lvstores):
        """(target, agent, lvol store names) of a storage node.

        Its ``nvmf_tgt`` and its agent; ``lvstores``: name -> MiB.

        No auto-examine: the node holds copies that carry a compute
        host's RAID superblock, which its own RAID module must not claim.
        """
        target = self.useFixture(spdk_target.SpdkTarget(
            app='nvmf_tgt', name=host.name, interrupt_mode=True,
            auto_examine=False, host=host))
        for lvs, mib in sorted(lvstores.items()):
            target.aio_lvstore(lvs, size_mib=mib)
        node_agent = self.useFixture(agent.Agent(target, authority))
        # Each later start, as its unit's: from what its agent saved.
        target.json_config = node_agent.saved_config_file
        return target, node_agent, sorted(lvstores)

    @staticmethod
    def kill_storage_node(target, node_agent):
        """SIGKILL a storage node's processes, as its host's death does."""
        node_agent.kill()
        target.kill()

    @staticmethod
    def start_storage_node(target, node_agent):
        """Start what of a killed node is down: its target, then its agent.

        The target starts from its agent's saved config, as its unit does.
        """
        for process in (target, node_agent):
            if process.process.poll() is not None:
                process.start()

    @staticmethod
    def _node_section(node_agent, target_id, lvstores):
        """The cinder.conf options of a storage node's target."""
        return dict(node_agent.section(), spdk_target_id=target_id,
                    spdk_lvstores=','.join(lvstores),
                    spdk_nvmf_address=node_agent.address,
                    spdk_nvmf_port=str(NVMF_PORT))

    def front(self):
        """keystone and a keystone-authenticated cinder-api, started once.

        Tempest and Nova speak only keystone; the tests' own clients use
        the noauth API, which needs neither.
        """
        if self._front is None:
            with processes.process_tempdir():
                self._front = self.useFixture(
                    keystone_api.KeystoneFrontEnd(self))
        return self._front

    def rpc(self, method, params=None):
        """One RPC on the backend's storage target; an error reply raises.

        Through the target's socket, as the tests' look into a node.
        """
        return self.target.rpc(method, params)

    def log_path(self, name):
        return os.path.join(self.workdir, 'log', name + '.log')

    def logs(self, limit=6000):
        """Tail of every service log (and the SPDK target's), by name."""
        found = {name: processes.tail(self.log_path(name), limit)
                 for name in ('cinder-manage',) + tuple(self.services)}
        for target, node_agent, _lvstores in self.storage:
            found[target.name] = processes.tail(target.log_path, limit)
            found[target.name + ' agent'] = processes.tail(
                node_agent.log_path, limit)
        return found

    def _logs_text(self):
        return '\n'.join('==== %s\n%s' % item
                         for item in sorted(self.logs(3000).items()))

    def dead_services(self):
        return [name for name, proc in self.services.items()
                if not proc.running()]

    def _check_alive(self):
        dead = self.dead_services()
        if dead:
            raise RuntimeError('%s exited during start\n%s'
                               % (', '.join(dead), self._logs_text()))

    def client(self, project=PROJECT, user=USER):
        """A cinderclient for ``project``; noauth makes every user admin.

        Cinder's noauth middleware takes the token ``user:project`` as
        the identity, so no keystone is needed.
        """
        auth = token_endpoint.Token(self.endpoint, '%s:%s' % (user, project))
        sess = ks_session.Session(auth=auth)
        return cinder_client.Client(
            api_versions.APIVersion(API_VERSION), session=sess,
            endpoint_override=self.endpoint)

    def _api_up(self):
        self._check_alive()
        try:
            with socket.create_connection(('127.0.0.1', self.api_port), 1):
                return True
        except OSError:
            return False

    def _ask_api(self, request):
        """``request()``, or None while the API still answers 5xx."""
        self._check_alive()
        try:
            return request()
        except cinder_exc.ClientException as err:
            if err.code < 500:
                raise
            return None

    def _services_up(self):
        """Scheduler and volume have each reported once.

        A service row exists (and counts as up) before the service
        listens on RabbitMQ; its first report comes after, and a message
        sent to a queue nobody declared yet is dropped by RabbitMQ.
        """
        services = self._ask_api(self.admin.services.list) or ()
        reported = {(s.binary, s.host.partition('@')[0]) for s in services
                    if s.state == 'up' and s.status == 'enabled' and
                    s.updated_at}
        wanted = {('cinder-volume', host) for host in self.members.values()}
        return wanted | {('cinder-scheduler', cinder_conf.HOST),
                         ('cinder-backup', cinder_conf.HOST)} <= reported

    def _pools_known(self):
        pools = self._ask_api(lambda: self.admin.pools.list(detailed=True))
        names = sorted(p.name.rpartition('#')[2] for p in pools or ())
        return names == sorted(LVSTORES)

    def _wait_ready(self):
        deadline = time.monotonic() + self.start_timeout
        for what, check in (('cinder-api to listen', self._api_up),
                            ('the services to report',
                             self._services_up),
                            ('the scheduler to know the pools',
                             self._pools_known)):
            start = time.monotonic()
            waiting.wait_for(what, check, max(1, deadline - start),
                             on_timeout=self._logs_text)
            LOG.info('waited %.1fs for %s', time.monotonic() - start, what)

    target_id = TARGET_ID

    @property
    def host(self):
        return '%s@%s' % (cinder_conf.HOST, cinder_conf.BACKEND)
