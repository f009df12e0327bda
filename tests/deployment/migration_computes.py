"""Two more compute nodes in the compute cloud, for live migration.

Each is a :class:`compute_node.ComputeNode`, a host of its own on the
deployment's network: ``nova-compute-spdk-vhost``, its own polling
``vhost`` target (volumes attach over NVMe/TCP from the storage nodes),
its own host NQN, and its own libvirtd with the host's name (Nova names
the compute node and its resource provider after libvirt's host name).

The two share their instance directory, as over NFS: a destination with
its own would fetch the guest's kernel from glance, and Nova's image
safety check refuses a kernel (an ``aki`` image) there. Nova reaches the
destination's libvirtd through ``[libvirt] live_migration_uri``
(``qemu+tcp://%s/system``, ``%s`` the destination's
``live_migration_inbound_addr``, its address), and the guest's memory
goes to that address too.

Started for one test and gone after it: the services are deleted from
Nova, so the scheduler never picks them for the single-host tests.
"""

import shutil
import time

import fixtures
from novaclient import exceptions as nova_exc

from testbed import waiting
from tests.deployment import compute_node
from tests.deployment import processes

# The Nova (and libvirt) host names of the two nodes.
HOSTS = ('spdk-mig-a', 'spdk-mig-b')


class MigrationComputes(fixtures.Fixture):
    """The nodes of :data:`HOSTS` in ``compute_cloud``; ``hosts`` by name."""

    def __init__(self, compute_cloud, start_timeout=300):
        super().__init__()
        self.cloud = compute_cloud
        self.start_timeout = start_timeout
        self.hosts = {}
        self.services = {}

    def _setUp(self):
        started = time.monotonic()
        # Runs last: the services are stopped by then.
        self.addCleanup(self._forget_services)
        instances = self.cloud.dep.network.shared_dir(
            'instances-%d' % id(self))
        self.addCleanup(shutil.rmtree, instances, ignore_errors=True)
        for name in HOSTS:
            node = self.useFixture(compute_node.ComputeNode(
                self.cloud, name, name + '-target', instances=instances))
            self.hosts[name] = node
            self.services[node.log_name] = node.service
        deadline = started + self.start_timeout
        waiting.wait_for('the migration computes to report', self._up,
                         max(1, deadline - time.monotonic()), interval=1,
                         on_timeout=self.logs_text)
        waiting.wait_for('the migration computes in Nova', self._mapped,
                         max(1, deadline - time.monotonic()), interval=1,
                         on_timeout=self.logs_text)
        self.startup_seconds = time.monotonic() - started

    # -- ready -------------------------------------------------------------

    def _check_alive(self):
        dead = [name for name, proc in self.services.items()
                if not proc.running()]
        if dead:
            raise RuntimeError('%s exited\n%s' % (', '.join(dead),
                                                  self.logs_text()))

    def _up(self):
        self._check_alive()
        try:
            services = self.cloud.nova().services.list(binary='nova-compute')
        except nova_exc.ClientException:
            return False
        up = {s.host for s in services if s.state == 'up'}
        return set(HOSTS) <= up

    def _mapped(self):
        """Both hypervisors listed: discover_hosts until they are."""
        self._check_alive()
        processes.run_once(
            [processes.console_script('nova-manage'), '--config-file',
             self.cloud.nova_conf, 'cell_v2', 'discover_hosts'],
            self.cloud.log_path('nova-manage'), timeout=120)
        names = {h.hypervisor_hostname
                 for h in self.cloud.nova().hypervisors.list()}
        return set(HOSTS) <= names

    def logs(self, limit=6000):
        found = {name: proc.log(limit)
                 for name, proc in self.services.items()}
        for node in self.hosts.values():
            found.update(node.logs(limit))
        return found

    def logs_text(self, limit=3000):
        return '\n'.join('==== %s\n%s' % item
                         for item in sorted(self.logs(limit).items()))

    def _forget_services(self):
        """Delete the stopped services: placement forgets their nodes."""
        nova = self.cloud.nova()
        for service in nova.services.list(binary='nova-compute'):
            if service.host in HOSTS:
                try:
                    nova.services.delete(service.id)
                except nova_exc.NotFound:
                    pass
