"""Nova, placement, glance and neutron beside the Cinder deployment.

On top of :class:`deployment.CinderDeployment` and its keystone front
end: placement, neutron-api (ML2, no agent: instances here boot with
``networks='none'``, but Nova asks Neutron for ports on every delete),
glance-api on a file store, and Nova's api, conductor and scheduler on
this machine, the controller, each API at the controller's address on
the deployment's network. nova-compute runs on a compute node of its own
(:mod:`compute_node`): this project's ``LibvirtVhostUserDriver`` on the
node's libvirtd (QEMU under TCG) and its polling ``vhost`` target, which
attaches every volume over NVMe/TCP from the storage nodes.

Each API is served by :mod:`wsgi_server`, each daemon is the installed
console script, each service has its own database. Ready means: every
API answers, the compute service is up and mapped to the cell, and its
resource provider is in placement.
"""

from concurrent import futures
import os
import shutil
import time

import fixtures
from glanceclient import client as glance_client
from novaclient import client as nova_client

from testbed import net
from testbed import waiting
from tests.deployment import backing
from tests.deployment import cloud_conf
from tests.deployment import compute_node
from tests.deployment import processes

NOVA_API_VERSION = '2.95'
DATABASES = ('placement', 'glance', 'neutron', 'nova_api', 'nova_cell0',
             'nova_cell1')
APIS = {
    # name: (WSGI module, keystone service type, endpoint suffix)
    'placement': ('placement.wsgi.api', 'placement', ''),
    'neutron-api': ('neutron.wsgi.api', 'network', ''),
    'glance-api': ('glance.wsgi.api', 'image', ''),
    'nova-api': ('nova.wsgi.osapi_compute', 'compute', '/v2.1'),
}
# See neutron_models: Nova's first port listing would fail without it.
PRELOAD = {'neutron-api': ('tests.deployment.neutron_models',)}
# The controller's; nova-compute runs on the compute node.
DAEMONS = ('nova-conductor', 'nova-scheduler')
# Seconds from the first schema sync to a hypervisor in Nova: about 330
# on two busy cores (an SPDK build beside it); over 600 once in CI,
# beside the other lane's SPDK tests.
START_TIMEOUT = 1200


class ComputeCloud(fixtures.Fixture):
    """Nova and friends on ``dep``; databases dropped on cleanup."""

    def __init__(self, dep, start_timeout=START_TIMEOUT):
        super().__init__()
        self.dep = dep
        self.start_timeout = start_timeout
        self.services = {}

    # -- start -----------------------------------------------------------

    def _setUp(self):
        started = time.monotonic()
        self.front = self.dep.front()
        self.keystone = self.front.keystone
        self.address = self.dep.controller_address
        self.workdir = self.useFixture(fixtures.TempDir()).path
        for sub in ('state', 'lock', 'images', 'staging', 'tasks'):
            os.makedirs(os.path.join(self.workdir, sub))
        # Every domain name of this cloud starts with it: a QEMU process
        # on this machine says which cloud it is of.
        self.domain_prefix = backing.unique_name('deploy')[-6:] + '-'
        self.dbs = {name: self.useFixture(backing.Database(
            name=backing.unique_name(name))).url for name in DATABASES}
        self.ports = {name: net.free_port(self.address) for name in APIS}
        self._write_configs()
        self._sync_databases()
        for name, (module, service_type, suffix) in sorted(APIS.items()):
            self._start(name, processes.wsgi_argv(
                module, self.ports[name], PRELOAD.get(name, ()),
                host=self.address), self.env[name])
            self.keystone.add_endpoint(name, service_type,
                                       self.url(name) + suffix)
        for name in DAEMONS:
            self._start(name, [processes.console_script(name),
                               '--config-file', self.nova_conf], {})
        self.node = self.useFixture(compute_node.ComputeNode(
            self, cloud_conf.COMPUTE_HOST, cloud_conf.COMPUTE_TARGET_ID))
        self.services[self.node.log_name] = self.node.service
        self._wait_ready(started)
        self._run('nova-manage', '--config-file', self.nova_conf, 'cell_v2',
                  'discover_hosts', '--verbose')
        waiting.wait_for('the compute host in Nova', self._hypervisor_known,
                         max(1, started + self.start_timeout -
                             time.monotonic()),
                         interval=1, on_timeout=self.logs_text)
        self.startup_seconds = time.monotonic() - started

    def url(self, name):
        return 'http://%s:%d' % (self.address, self.ports[name])

    def _dir(self, name):
        path = os.path.join(self.workdir, name)
        os.makedirs(path, exist_ok=True)
        return path

    def _write_configs(self):
        rabbit = self.dep.rabbit.url
        conf_dirs = {name: self._dir(name + '-etc') for name in APIS}
        self.placement_conf = os.path.join(conf_dirs['placement'],
                                           'placement.conf')
        cloud_conf.write(self.placement_conf, cloud_conf.placement(
            self.dbs['placement'], self.keystone))
        self.neutron_conf = os.path.join(conf_dirs['neutron-api'],
                                         'neutron.conf')
        cloud_conf.write(self.neutron_conf, cloud_conf.neutron(
            self.dbs['neutron'], rabbit, self.keystone,
            self._dir('neutron')))
        self.glance_conf = os.path.join(conf_dirs['glance-api'],
                                        'glance-api.conf')
        cloud_conf.write(self.glance_conf, cloud_conf.glance(
            self.dbs['glance'], self.keystone, self.workdir))
        # Both read their paste pipeline from their config directory.
        shutil.copy(cloud_conf.glance_paste(), conf_dirs['glance-api'])
        shutil.copy(cloud_conf.nova_paste(), conf_dirs['nova-api'])
        self.nova_conf = os.path.join(conf_dirs['nova-api'], 'nova.conf')
        cloud_conf.write(self.nova_conf, cloud_conf.nova(
            self.nova_conf, self.workdir, self.dbs, rabbit, self.keystone,
            self.domain_prefix, cloud_conf.CONTROLLER_HOST, self.address))
        self.env = {
            'placement': {'OS_PLACEMENT_CONFIG_DIR':
                          conf_dirs['placement']},
            'neutron-api': {'OS_NEUTRON_CONFIG_DIR':
                            conf_dirs['neutron-api'],
                            'OS_NEUTRON_CONFIG_FILES': 'neutron.conf'},
            'glance-api': {'OS_GLANCE_CONFIG_DIR': conf_dirs['glance-api']},
            'nova-api': {'OS_NOVA_CONFIG_DIR': conf_dirs['nova-api'],
                         'OS_NOVA_CONFIG_FILES': 'api-paste.ini;nova.conf'},
        }

    def _run(self, name, *args):
        processes.run_once([processes.console_script(name)] + list(args),
                           self.log_path(name), timeout=600)

    def _sync_databases(self):
        """Each service's schema; the four run side by side (minutes)."""
        nova = ('nova-manage', '--config-file', self.nova_conf)
        chains = [
            [('placement-manage', '--config-file', self.placement_conf,
              'db', 'sync')],
            [('glance-manage', '--config-file', self.glance_conf,
              'db_sync')],
            [('neutron-db-manage', '--config-file', self.neutron_conf,
              'upgrade', 'heads')],
            [nova + ('api_db', 'sync'),
             nova + ('cell_v2', 'map_cell0', '--database_connection',
                     self.dbs['nova_cell0']),
             nova + ('cell_v2', 'create_cell', '--name', 'cell1'),
             nova + ('db', 'sync')],
        ]
        with futures.ThreadPoolExecutor(len(chains)) as pool:
            for done in [pool.submit(self._run_chain, chain)
                         for chain in chains]:
                done.result()

    def _run_chain(self, commands):
        for command in commands:
            self._run(*command)

    def _start(self, name, argv, env):
        self.services[name] = self.useFixture(processes.ServiceProcess(
            name, argv, self.log_path(name), env=env))

    def log_path(self, name):
        return self.dep.log_path(name)

    def logs(self, limit=6000):
        found = {name: processes.tail(self.log_path(name), limit)
                 for name in self.services}
        node = getattr(self, 'node', None)
        if node is not None:
            found.update(node.logs(limit))
        return found

    def logs_text(self, limit=3000):
        return '\n'.join('==== %s\n%s' % item
                         for item in sorted(self.logs(limit).items()))

    def _check_alive(self):
        dead = [name for name, proc in self.services.items()
                if not proc.running()]
        if dead:
            raise RuntimeError('%s exited during start\n%s'
                               % (', '.join(dead), self.logs_text()))

    # -- clients -----------------------------------------------------------

    def nova(self):
        """A novaclient with the admin's keystone session."""
        return nova_client.Client(NOVA_API_VERSION,
                                  session=self.keystone.admin_session())

    def glance(self):
        return glance_client.Client('2',
                                    session=self.keystone.admin_session())

    # -- ready -------------------------------------------------------------

    def _apis_up(self):
        self._check_alive()
        return all(self.services[name].listening(self.ports[name],
                                                 self.address)
                   for name in APIS)

    def _ask_nova(self, request):
        self._check_alive()
        try:
            return request(self.nova())
        except Exception:   # an API still starting answers 5xx
            return None

    def _compute_up(self):
        services = self._ask_nova(
            lambda nova: nova.services.list(binary='nova-compute')) or ()
        return any(s.state == 'up' for s in services)

    def _hypervisor_known(self):
        return bool(self._ask_nova(lambda nova: nova.hypervisors.list()))

    def _wait_ready(self, started):
        deadline = started + self.start_timeout
        for what, check in (('the APIs to listen', self._apis_up),
                            ('nova-compute to report', self._compute_up)):
            waiting.wait_for(what, check,
                             max(1, deadline - time.monotonic()),
                             interval=1, on_timeout=self.logs_text)
