"""Two more compute hosts in the compute cloud, for live migration.

The shared cloud's compute service uses the deployment's ``spdk_tgt``,
Cinder's own, so its volumes attach as ``local`` and cannot live-migrate
(the driver's pre-check refuses them). Each host here is a
``nova-compute-spdk-vhost`` with its own polling ``vhost`` target
(volumes attach over NVMe/TCP on loopback, as from a storage node), its
own host NQN, and its own libvirtd (:mod:`testbed.libvirt_host`) with its
own host name: Nova names the compute node and its resource provider
after libvirt's host name, which must differ from every other compute's.

Nova reaches the destination's libvirtd through ``[libvirt]
live_migration_uri``, whose ``%s`` becomes the destination's
``live_migration_inbound_addr``: each host has its own loopback address,
and a directory of links named after them leads to each daemon's socket.
The guest's memory goes to that address (QEMU listens on all).

Started for one test and gone after it: the services are deleted from
Nova, so the scheduler never picks them for the single-host tests.
"""

import os
import time
import uuid

import fixtures
from novaclient import exceptions as nova_exc

from testbed import libvirt_host
from testbed import spdk_target
from testbed import waiting
from tests.deployment import cloud_conf
from tests.deployment import processes

NQN = 'nqn.2014-08.org.nvmexpress:uuid:'
# Nova host (and libvirt host name) -> live_migration_inbound_addr.
HOSTS = {'spdk-mig-a': '127.0.0.11', 'spdk-mig-b': '127.0.0.12'}
BINARY = 'nova-compute-spdk-vhost'


class MigrationHost(object):
    """One compute host: Nova's name, its SPDK target and libvirtd."""

    def __init__(self, name, address, target, libvirtd, host_nqn):
        self.name = name
        self.address = address
        self.target = target
        self.libvirtd = libvirtd
        self.host_nqn = host_nqn

    @property
    def uri(self):
        return self.libvirtd.uri

    def rpc(self, method, params=None):
        return self.target.rpc(method, params)


class MigrationComputes(fixtures.Fixture):
    """The hosts of :data:`HOSTS` in ``compute_cloud``; ``hosts`` by name."""

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
        with processes.process_tempdir():
            self.workdir = self.useFixture(fixtures.TempDir()).path
            os.chmod(self.workdir, 0o755)
            # Shared, as over NFS: a destination with its own would fetch
            # the guest's kernel from glance, and Nova's image safety
            # check refuses a kernel (an ``aki`` image) there.
            self.instances = os.path.join(self.workdir, 'instances')
            os.mkdir(self.instances)
            links = os.path.join(self.workdir, 'libvirt-by-address')
            os.mkdir(links)
            for name, address in sorted(HOSTS.items()):
                host = self._host(name, address)
                os.symlink(host.libvirtd.run_dir,
                           os.path.join(links, address))
                self.hosts[name] = host
            for host in self.hosts.values():
                self._start_compute(host, links)
        deadline = started + self.start_timeout
        waiting.wait_for('the migration computes to report', self._up,
                         max(1, deadline - time.monotonic()), interval=1,
                         on_timeout=self.logs_text)
        waiting.wait_for('the migration computes in Nova', self._mapped,
                         max(1, deadline - time.monotonic()), interval=1,
                         on_timeout=self.logs_text)
        self.startup_seconds = time.monotonic() - started

    def _host(self, name, address):
        target = self.useFixture(spdk_target.SpdkTarget(
            app='vhost', name='vhost-' + name,
            socket_group=cloud_conf.QEMU_GROUP,
            umask=spdk_target.SERVICE_UMASK))
        # QEMU (libvirt-qemu) reaches the vhost sockets through it.
        os.chmod(target.workdir, 0o711)
        libvirtd = self.useFixture(libvirt_host.LibvirtHost(hostname=name))
        return MigrationHost(name, address, target, libvirtd,
                             NQN + str(uuid.uuid4()))

    def _start_compute(self, host, links):
        workdir = os.path.join(self.workdir, host.name)
        for sub in ('state', 'lock'):
            os.makedirs(os.path.join(workdir, sub))
        os.chmod(workdir, 0o755)
        conf_path = os.path.join(workdir, 'nova.conf')
        cloud = self.cloud
        conf = cloud_conf.nova(
            conf_path, workdir, cloud.dbs, cloud.dep.rabbit.url,
            cloud.keystone, host.target.socket_path, host.name + '-target',
            os.path.join(workdir, 'spdk-config.json'), cloud.domain_prefix)
        conf['DEFAULT'].update({'host': host.name,
                                'instances_path': self.instances})
        conf['libvirt'].update({
            'connection_uri': host.uri,
            'live_migration_uri': 'qemu+unix:///system?socket=%s' %
            os.path.join(links, '%s', 'libvirt-sock'),
            'live_migration_inbound_addr': host.address})
        conf['spdk_vhost']['host_nqn'] = host.host_nqn
        cloud_conf.write(conf_path, conf)
        name = 'nova-compute-' + host.name
        self.services[name] = self.useFixture(processes.ServiceProcess(
            name, [processes.console_script(BINARY), '--config-file',
                   conf_path], self.cloud.log_path(name)))

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
        for host in self.hosts.values():
            found['vhost-' + host.name] = host.target.log(limit)
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
