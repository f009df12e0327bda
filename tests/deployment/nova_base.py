"""Test base for tests through Nova's API: the shared compute cloud.

Like the Cinder deployment (see :mod:`base`), the Nova services start
once per test process, on first use. Tests act as the cloud's admin
through keystone (Nova speaks no noauth), check the guest from inside
over its serial console, and the SPDK targets afterwards (the storage
nodes' and the compute host's); each removes its servers and volumes,
and the targets must then hold nothing.
"""

import os

from cinderclient import api_versions
from cinderclient import client as cinder_client
from novaclient import exceptions as nova_exc
import testtools

from spdk_vhost_core import host_settings
from testbed.guest import qemu
from testbed import waiting
from tests.deployment import base
from tests.deployment import cloud
from tests.deployment import cloud_guest
from tests.deployment import compute_node
from tests.deployment import deployment
from tests.deployment import processes

try:
    import libvirt
except ImportError:  # reported when a test needs it
    libvirt = None

BOOT_TIMEOUT = 600
# Hugepage flavors (vhost-user needs shared hugepage-backed memory):
# name -> (MiB, vCPUs, root disk GiB). Servers boot from volumes on the
# first, resize to the second; the third boots from an image, as
# tempest does (Nova refuses a zero-disk flavor to non-admins then), and
# tempest resizes such servers to the fourth.
FLAVOR = 'spdk.hugepages'
LARGE_FLAVOR = 'spdk.hugepages.large'
IMAGE_FLAVOR = 'spdk.hugepages.disk'
IMAGE_FLAVOR_ALT = 'spdk.hugepages.disk.large'
FLAVORS = {FLAVOR: (256, 1, 0), LARGE_FLAVOR: (384, 2, 0),
           IMAGE_FLAVOR: (256, 1, 1), IMAGE_FLAVOR_ALT: (320, 1, 1)}
FLAVOR_SPECS = {'hw:mem_page_size': '2048'}
_cloud = {}


def shared_cloud(dep):
    """The process's compute cloud, its guest image and flavor."""
    if 'error' in _cloud:
        raise RuntimeError('the compute cloud failed to start earlier: %s'
                           % _cloud['error'])
    if 'cloud' not in _cloud:
        try:
            with processes.process_tempdir():
                found = dep.useFixture(cloud.ComputeCloud(dep))
            _cloud['images'] = cloud_guest.upload(found.glance(),
                                                  found.workdir)
            for name, (ram, vcpus, disk) in sorted(FLAVORS.items()):
                flavor = found.nova().flavors.create(name, ram, vcpus,
                                                     disk)
                flavor.set_keys(FLAVOR_SPECS)
                _cloud[name] = flavor.id
        except Exception as err:
            _cloud['error'] = err
            raise
        _cloud['cloud'] = found
        print('CLOUD started in %.1f s' % found.startup_seconds)
    return _cloud['cloud']


class NovaTestCase(base.DeploymentTestCase):
    """Servers and volumes through Nova's and Cinder's keystone APIs.

    On the clustered deployment: Nova's attachments, tempest and the
    node losses go through whichever member of the cluster takes them.
    """

    CLUSTERED = True

    def setUp(self):
        super().setUp()
        self.cloud = shared_cloud(self.deployment)
        self.images = _cloud['images']
        self.image = self.images['shell']
        self.flavor = _cloud[FLAVOR]
        self.large_flavor = _cloud[LARGE_FLAVOR]
        self.image_flavor = _cloud[IMAGE_FLAVOR]
        self.image_flavor_alt = _cloud[IMAGE_FLAVOR_ALT]
        self.nova = self.cloud.nova()
        self.cinder = cinder_client.Client(
            api_versions.APIVersion(deployment.API_VERSION),
            session=self.cloud.keystone.admin_session())
        if libvirt is None:
            self.fail('libvirt-python is not installed')
        self.conn = libvirt.open(self.cloud.node.uri)
        self.addCleanup(self.conn.close)
        self.addOnException(self._attach_cloud_logs)

    def _attach_cloud_logs(self, exc_info):
        for name, text in self.cloud.logs(8000).items():
            self.addDetail(name, testtools.content.text_content(text))

    # -- servers -----------------------------------------------------------

    def wait_server(self, server_id, status, timeout=BOOT_TIMEOUT):
        def reached():
            server = self.nova.servers.get(server_id)
            if server.status == 'ERROR':
                self.fail('server %s went to ERROR: %s' % (
                    server_id, getattr(server, 'fault', None)))
            seen[:] = [server.status,
                       getattr(server, 'OS-EXT-STS:task_state', None)]
            return server if seen == [status, None] else None
        seen = []
        return waiting.wait_for(
            'server %s %s, no task' % (server_id, status), reached, timeout,
            interval=1, on_timeout=lambda: 'status, task: %s' % seen)

    def _delete_server(self, server_id):
        try:
            self.nova.servers.delete(server_id)
        except nova_exc.NotFound:
            return

        def gone():
            try:
                self.nova.servers.get(server_id)
            except nova_exc.NotFound:
                return True
            return False
        waiting.wait_for('server %s to be deleted' % server_id, gone,
                         BOOT_TIMEOUT, interval=1)

    def boot_volume(self, size=1, **kwargs):
        """A bootable volume holding the test guest's root image."""
        return self.create_volume(size, imageRef=self.image, **kwargs)

    def boot_from_volume(self, volume_id, **kwargs):
        """A server booted from ``volume_id``, ACTIVE; deleted after.

        ``kwargs`` go to Nova's create (``host``: an admin's choice).
        """
        server = self.nova.servers.create(
            self.getUniqueString('server'), image=None, flavor=self.flavor,
            block_device_mapping_v2=[{
                'uuid': volume_id, 'source_type': 'volume',
                'destination_type': 'volume', 'boot_index': 0,
                'delete_on_termination': False}],
            nics='none', **kwargs)
        self.addCleanup(self._delete_server, server.id)
        return self.wait_server(server.id, 'ACTIVE')

    def detach(self, server_id, volume_id):
        """Nova detaches ``volume_id`` from the server, to the end.

        Nova forgets its side (the block device mapping) after Cinder's
        attachment is gone: a volume already ``available`` in Cinder is
        refused by Nova's attach for a moment yet.
        """
        self.nova.volumes.delete_server_volume(server_id, volume_id)
        self.wait_for(lambda: volume_id not in [
            attached.volumeId for attached in
            self.nova.volumes.get_server_volumes(server_id)],
            'Nova to detach volume %s' % volume_id)

    def console(self, server, conn=None):
        """The guest's shell, once it serves commands.

        ``conn``: the libvirtd the guest runs on, if not the machine's.
        """
        shell = cloud_guest.console(conn or self.conn, server.id)
        self.addCleanup(shell.close)
        failed = []

        def serves():
            try:
                shell.execute('true', timeout=10)
            except Exception as err:  # not up yet; said at the deadline
                failed[:] = [err]
                return False
            return True
        waiting.wait_for('the console of server %s' % server.id, serves,
                         BOOT_TIMEOUT, interval=1,
                         on_timeout=lambda: 'last error: %r' % failed)
        return shell

    # -- the guest and the target ---------------------------------------

    def wait_for(self, predicate, what, timeout=BOOT_TIMEOUT):
        """:func:`testbed.waiting.wait_for`, at a guest's pace."""
        return waiting.wait_for(what, predicate, timeout, interval=1)

    def compute_rpc(self, method, params=None):
        """One call on the shared compute host's own target."""
        return self.cloud.node.rpc(method, params)

    def compute_targets(self):
        return [self.cloud.node.target]

    def assert_state_on_its_host(self, volume_id):
        """An attachment's state is on the hosts that use it, and only there.

        Each end's DH-HMAC-CHAP key files (the compute node's and the
        storage node's, each readable by its owner only), the compute
        target's saved config holding the volume's controller, and the
        storage node's saved config and record of connected hosts (its
        agent's, readable by the node's ``spdk`` group, no one else).
        """
        node, dep = self.cloud.node, self.deployment
        everyone = [node.host] + [target.host
                                  for target, _a, _l in dep.storage]
        for host, rpc in ((node.host, self.compute_rpc),
                          (dep.target.host, self.rpc)):
            paths = [key['path'] for key in rpc('keyring_get_keys')]
            self.assertNotEqual([], paths, 'no key on %s' % host.name)
            for path in paths:
                self.assertOnlyOn(host, everyone, path, 0o600)
        self.assertOnlyOn(node.host, everyone, compute_node.SAVED_CONFIG,
                          0o640)
        with open(node.host.path(compute_node.SAVED_CONFIG)) as saved:
            self.assertIn('vhost-' + volume_id, saved.read())
        storage = dep.target.host
        saved = dep.agent.saved_config
        for path in (saved, saved + host_settings.SUFFIX):
            self.assertOnlyOn(storage, everyone, path, 0o640)
        with open(storage.path(saved)) as doc:
            self.assertIn(volume_id, doc.read())
        self.assertIn(node.host_nqn, host_settings.read(storage.path(saved)))

    def assertOnlyOn(self, host, everyone, path, mode=None):
        """``path`` is on ``host`` alone (``mode``: with that mode)."""
        self.assertEqual([host.name], [
            other.name for other in everyone if other.exists(path)], path)
        self.assertFalse(os.path.exists(path), path)
        if mode is not None:
            self.assertEqual(oct(mode), oct(os.stat(
                host.path(path)).st_mode & 0o777), path)

    def controllers(self):
        return [c['ctrlr'] for c in self.compute_rpc('vhost_get_controllers')]

    @staticmethod
    def has_disk(shell, dev):
        return shell.execute('gt_result d "$(gt_count /sys/block/%s)"'
                             % dev)['d'] == '1'

    def wait_disk(self, shell, dev):
        self.wait_for(lambda: self.has_disk(shell, dev),
                      '%s in the guest' % dev)

    @staticmethod
    def serial(shell, dev):
        return shell.execute('gt_result s "$(cat /sys/block/%s/serial)"'
                             % dev)['s']

    @staticmethod
    def guest_size(shell, dev):
        return int(shell.execute('gt_disk_info %s' % dev)[dev + '.size'])

    @staticmethod
    def read_rate(shell, dev, length):
        """Bytes/s of an O_DIRECT read of ``length`` bytes.

        Timed by the guest, around the read alone: timed here, the
        console's round trips and the guest's sha256 of the data under
        TCG made a 2 MiB/s limit look like 0.95 MiB/s on a busy host.
        """
        got = shell.execute(qemu.time_read(dev, 0, length), timeout=300)
        return length / (max(int(got['%s.read_ms@0' % dev]), 10) / 1000)
