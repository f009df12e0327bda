"""A compute node of its own: nova-compute, its SPDK target and libvirtd.

A host on the deployment's network (:mod:`testbed.hosts`): its own
address, host name and directories (``/etc/nova``, ``/var/lib/nova``,
``/var/lib/spdk``, libvirt's), so what nova-compute, the connector, the
target and libvirtd write (``nova.conf``, vhost sockets, DH-HMAC-CHAP
keys, the target's saved config, instance files, QEMU's logs) stays on
it. It reaches the controller's APIs at the controller's address, and
RabbitMQ through the network's relay; it has no database access, as
nova-compute needs none.
"""

import os
from urllib import parse
import uuid

import fixtures

from testbed import hosts
from testbed import libvirt_host
from testbed import spdk_target
from tests.deployment import cloud_conf
from tests.deployment import processes

NOVA_DIR = '/var/lib/nova'
NOVA_CONF = '/etc/nova/nova.conf'
INSTANCES = os.path.join(NOVA_DIR, 'instances')
#: The compute target's saved config, written by the connector.
SAVED_CONFIG = os.path.join(NOVA_DIR, 'spdk-config.json')
EXTRA_DIRS = libvirt_host.HOST_DIRS + (NOVA_DIR,)
BINARY = 'nova-compute-spdk-vhost'
_NQN_PREFIX = 'nqn.2014-08.org.nvmexpress:uuid:'


def new_host_nqn():
    """A compute host's NVMe host NQN, as ``nvme gen-hostnqn`` makes one."""
    return _NQN_PREFIX + str(uuid.uuid4())


def through_relay(network, url):
    """``url`` of a service on this machine's loopback, as hosts reach it."""
    parts = parse.urlsplit(url)
    if parts.hostname not in ('127.0.0.1', 'localhost'):
        return url
    address, port = network.relay(parts.port)
    userinfo, _at, _hostport = parts.netloc.rpartition('@')
    netloc = '%s:%d' % (address, port)
    return parse.urlunsplit(parts._replace(
        netloc='%s@%s' % (userinfo, netloc) if userinfo else netloc))


class ComputeNode(fixtures.Fixture):
    """nova-compute ``name`` of ``compute_cloud``, on a host of its own.

    ``instances``: a directory of the network (``shared_dir``) to hold
    the instance files, shared with other nodes as over NFS, for live
    migrations between them; libvirtd then takes them on TCP.
    """

    def __init__(self, compute_cloud, name, target_id, instances=None):
        super().__init__()
        self.cloud = compute_cloud
        self.name = name
        self.target_id = target_id
        self.instances = instances
        self.log_name = 'nova-compute-' + name

    def _setUp(self):
        dep = self.cloud.dep
        shared = {INSTANCES: self.instances} if self.instances else {}
        self.host = self.useFixture(hosts.Host(
            dep.network, self.name, extra_dirs=EXTRA_DIRS,
            shared_dirs=shared))
        # A polling vhost target as the service unit runs it: vhost
        # sockets born in QEMU's group, and QEMU (libvirt-qemu) reaches
        # them through the target's directory.
        self.target = self.useFixture(spdk_target.SpdkTarget(
            app='vhost', name='vhost-' + self.name,
            socket_group=cloud_conf.QEMU_GROUP,
            umask=spdk_target.SERVICE_UMASK, host=self.host))
        os.chmod(self.target.workdir, 0o711)
        self.libvirtd = self.useFixture(libvirt_host.LibvirtHost(
            host=self.host, listen_tcp=bool(self.instances)))
        self.host_nqn = new_host_nqn()
        # QEMU (libvirt-qemu) reads the kernel, initrd and console log
        # Nova keeps in the instance directory.
        for directory in (NOVA_DIR, os.path.join(NOVA_DIR, 'state'),
                          os.path.join(NOVA_DIR, 'lock'), INSTANCES):
            path = self.host.path(directory)
            os.makedirs(path, exist_ok=True)
            os.chmod(path, 0o755)
        cloud_conf.write(self.host.path(NOVA_CONF), self._conf())
        self.service = self.useFixture(processes.ServiceProcess(
            'nova-compute', self.host.argv(
                [processes.console_script(BINARY), '--config-file',
                 NOVA_CONF], cwd=processes.REPO),
            self.cloud.log_path(self.log_name)))

    def _conf(self):
        """nova.conf of this node: its paths, its address, no database."""
        compute_cloud = self.cloud
        conf = cloud_conf.nova(
            NOVA_CONF, NOVA_DIR, compute_cloud.dbs,
            through_relay(self.host.network, compute_cloud.dep.rabbit.url),
            compute_cloud.keystone, compute_cloud.domain_prefix, self.name,
            self.host.address,
            target=(self.target.seen(self.target.socket_path),
                    self.target_id, SAVED_CONFIG))
        conf.remove_section('database')
        conf.remove_section('api_database')
        conf['spdk_vhost']['host_nqn'] = self.host_nqn
        if self.instances:
            # Nova puts the destination's inbound address in ``%s``.
            conf['libvirt'].update({
                'live_migration_uri': 'qemu+tcp://%s/system',
                'live_migration_inbound_addr': self.host.address})
        return conf

    @property
    def address(self):
        return self.host.address

    @property
    def uri(self):
        """Where this machine reaches the node's libvirtd."""
        return self.libvirtd.uri

    def rpc(self, method, params=None):
        return self.target.rpc(method, params)

    def logs(self, limit=6000):
        """The tail of the node's target log (its service's is the cloud's)."""
        return {self.target.name: processes.tail(self.target.log_path,
                                                 limit)}
