"""The driver on a controller, its storage node's target behind the agent.

Three hosts that share nothing but the network (``testbed.hosts``): this
test process is the controller running the driver; ``storage`` runs an
interrupt-mode ``nvmf_tgt`` and its ``spdk-vhost-agent`` (HTTPS, a
certificate of the test cloud's CA, a password); ``compute`` runs a
polling ``vhost`` that attaches the exports over NVMe/TCP with
DH-HMAC-CHAP, as a compute host's connector does. Everything the
storage node needs after a restart (saved config, key files, the record
of connected hosts) must be on the storage node, written there, and on
no other host.
"""

import json
import os
import sys

from cinder import exception
import fixtures

from spdk_vhost_core import nvme_auth
from spdk_vhost_core import spdk_rpc
from testbed import spdk_target
from testbed import tls
from tests.cinder import base
from tests.cinder.functional import imaging

HOST_NQN = ('nqn.2014-08.org.nvmexpress:uuid:'
            '5d1c6f3a-7b2e-4c9d-8e1f-2a3b4c5d6e7f')
NVMF_PORT = 4420  # base.TargetTestCase's on a storage node
RECONNECT = {'ctrlr_loss_timeout_sec': 60, 'reconnect_delay_sec': 1,
             'fast_io_fail_timeout_sec': 30}
#: What a compute host's nova-compute reports (get_volume_connector).
CONNECTOR = {'host': 'compute', 'nqn': HOST_NQN, 'spdk_target_id': 'compute',
             'spdk_nvme_reconnect': RECONNECT}
#: Sent raw to every TCP listener of the storage node: nothing may answer
#: it with a JSON-RPC reply without credentials.
PROBE = b'{"jsonrpc": "2.0", "id": 1, "method": "rpc_get_methods"}'
#: Run on the compute host: what each listener answers to PROBE, as TCP
#: and as TLS (no certificate check: an attacker would not check).
PROBE_SCRIPT = '''
import json, socket, ssl, sys
def ask(address, port, wrap, payload):
    try:
        sock = socket.create_connection((address, port), timeout=2)
        if wrap:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            sock = ctx.wrap_socket(sock)
        with sock:
            sock.sendall(payload)
            data = b""
            while len(data) < 65536:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
            return data.decode("latin-1")
    except (OSError, ssl.SSLError) as err:
        return type(err).__name__
body = sys.argv[2].encode()
http = (b"POST / HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n"
        b"Content-Length: " + str(len(body)).encode() + b"\\r\\n\\r\\n" + body)
out = {}
for port in sys.argv[3:]:
    out[port] = [ask(sys.argv[1], int(port), wrap, payload)
                 for wrap in (0, 1) for payload in (body, http)]
print(json.dumps(out))
'''


class AgentCase(base.TargetTestCase):
    """The target on a storage node of its own, behind its agent."""

    ON_STORAGE_NODE = True
    LVS_MIB = 256

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(300, gentle=True))

    def make_driver(self, **overrides):
        overrides.setdefault('spdk_nvmf_auth', 'dhchap')
        overrides.setdefault('spdk_rpc_timeout', 20.0)
        return super().make_driver(**overrides)

    def created(self, drv):
        volume = self.make_volume(size=1)
        drv.create_volume(volume)
        return volume

    def on_storage(self, method, params=None):
        """Ask the storage target directly (the test sees every host)."""
        return self.rpc(method, params)

    def saved_on_node(self):
        with open(os.path.join(self.target.workdir, 'agent-saved.json')) as f:
            return json.load(f)

    def compute_target(self):
        return self.useFixture(spdk_target.SpdkTarget(
            app='vhost', name='compute', host=self.compute))

    def attach(self, compute, data):
        """Attach as the compute host's connector does: keys on compute."""
        params = {'name': 'vol', 'trtype': 'TCP', 'adrfam': 'IPv4',
                  'traddr': data['traddr'], 'trsvcid': data['trsvcid'],
                  'subnqn': data['nqn'], 'hostnqn': data['host_nqn'],
                  'ctrlr_loss_timeout_sec': 60, 'reconnect_delay_sec': 1}
        for field in ('dhchap_key', 'dhchap_ctrlr_key'):
            name = 'host-' + field.replace('_', '-')
            path = nvme_auth.write_key(compute.workdir, name, data[field])
            compute.rpc('keyring_file_add_key',
                        {'name': name, 'path': compute.seen(path)})
            params[field] = name
        return compute.rpc('bdev_nvme_attach_controller', params)


class AgentExportTest(AgentCase):

    def test_keys_and_saved_config_are_written_on_the_storage_node(self):
        drv = self.make_driver()
        volume = self.created(drv)
        data = drv.initialize_connection(volume, CONNECTOR)['data']

        # SPDK's keyring opened key files on its own host, 0600.
        keys = self.on_storage('keyring_get_keys')
        self.assertEqual(2, len(keys))
        for key in keys:
            path = key['path']
            self.assertTrue(self.storage.exists(path), path)
            self.assertFalse(self.compute.exists(path), path)
            self.assertFalse(os.path.exists(path), path)
            real = self.storage.path(path)
            self.assertEqual(0o600, os.stat(real).st_mode & 0o777)
        # The saved config the node restarts with holds the export.
        nvmf = [c for s in self.saved_on_node()['subsystems']
                if s['subsystem'] == 'nvmf' for c in s['config'] or ()]
        subsystem = [c for c in nvmf
                     if c['method'] == 'nvmf_create_subsystem']
        self.assertEqual([data['nqn']],
                         [c['params']['nqn'] for c in subsystem])
        # The record spdk-vhost-upgrade reads is there too.
        with open(os.path.join(self.target.workdir,
                               'agent-saved.json.hosts.json')) as f:
            self.assertEqual({HOST_NQN: {data['nqn']: RECONNECT}},
                             json.load(f)['hosts'])

        compute = self.compute_target()
        self.assertEqual(['voln1'], self.attach(compute, data))
        qpairs = self.on_storage('nvmf_subsystem_get_qpairs',
                                 {'nqn': data['nqn']})
        self.assertEqual({'completed'},
                         {q['auth']['state'] for q in qpairs})

        drv.terminate_connection(volume, CONNECTOR)
        self.assertEqual([], self.on_storage('keyring_get_keys'))
        self.assertEqual([], os.listdir(self.storage.path(
            self.target.seen(os.path.join(self.target.workdir,
                                          'agent-keys')))))

    def test_a_killed_storage_target_comes_back_from_its_own_config(self):
        drv = self.make_driver()
        volume = self.created(drv)
        data = drv.initialize_connection(volume, CONNECTOR)['data']
        compute = self.compute_target()
        self.attach(compute, data)

        # As the node's unit restarts it: --json of the saved config.
        self.target.json_config = os.path.join(self.target.workdir,
                                               'agent-saved.json')
        self.target.restart(crash=True)

        [sub] = self.on_storage('nvmf_get_subsystems', {'nqn': data['nqn']})
        self.assertEqual([HOST_NQN], [h['nqn'] for h in sub['hosts']])
        self.assertEqual(2, len(self.on_storage('keyring_get_keys')))
        client = spdk_rpc.SpdkClient(socket_path=compute.socket_path)
        self.addCleanup(client.close)
        spdk_target.wait_nvme_enabled(client, 'vol', timeout=60)
        # And the driver carries on through the same agent.
        drv.terminate_connection(volume, None)
        drv.delete_volume(volume)
        self.assertEqual([], self.on_storage('nvmf_get_subsystems')[1:])

    def test_nothing_answers_json_rpc_on_the_network_without_credentials(
            self):
        drv = self.make_driver()
        volume = self.created(drv)
        drv.initialize_connection(volume, CONNECTOR)
        listening = self.storage.run(['ss', '-Hltn'], capture_output=True,
                                     text=True, check=True).stdout
        ports = sorted({line.split()[3].rpartition(':')[2]
                        for line in listening.splitlines()})
        # The NVMe/TCP export and the agent; the RPC socket is a file.
        self.assertEqual(sorted([str(NVMF_PORT), str(self.agent.port)]),
                         ports)
        done = self.compute.run(
            [sys.executable, '-c', PROBE_SCRIPT, self.storage.address,
             PROBE.decode()] + ports,
            capture_output=True, text=True, timeout=120)
        self.assertEqual(0, done.returncode, done.stderr)
        for port, answers in json.loads(done.stdout).items():
            for answer in answers:
                self.assertNotIn('"result"', answer, port)
                self.assertNotIn('bdev_lvol_create', answer, port)
        # The agent answers HTTPS alone, and refuses it without them.
        answers = json.loads(done.stdout)[str(self.agent.port)]
        self.assertIn('401 Unauthorized', answers[3])

    def test_a_wrong_password_or_ca_is_refused_at_start(self):
        err = self.assertRaises(exception.VolumeDriverException,
                                self.make_driver, spdk_agent_password='no')
        self.assertIn('401', str(err))
        other = tls.Authority(self.useFixture(fixtures.TempDir()).path)
        err = self.assertRaises(exception.VolumeDriverException,
                                self.make_driver,
                                spdk_agent_ca_file=other.ca_file)
        self.assertIn('CERTIFICATE_VERIFY_FAILED', str(err))

    def test_a_dead_node_is_named_and_its_target_down_said(self):
        drv = self.make_driver()
        self.target.kill()
        err = self.assertRaises(exception.VolumeBackendAPIException,
                                self.created, drv)
        self.assertIn('unreachable', str(err))
        self.agent.kill()
        err = self.assertRaises(exception.VolumeBackendAPIException,
                                self.created, drv)
        self.assertIn(self.agent.url, str(err))

    def test_options_for_this_host_refused_with_an_agent(self):
        for option, value in (('spdk_saved_config', '/var/lib/x.json'),
                              ('spdk_nvmf_key_dir', '/var/lib/keys'),
                              ('spdk_rpc_address', '192.0.2.1')):
            extra = {'spdk_rpc_port': 1} if option == 'spdk_rpc_address' \
                else {}
            err = self.assertRaises(exception.InvalidConfigurationValue,
                                    self.make_driver, **{option: value},
                                    **extra)
            self.assertIn(option, str(err))


class AgentImageTest(imaging.ImageTestCase):
    """Images and backups: the controller reads and writes over NVMe/TCP.

    The target behind the agent opens no file of this host: an image or
    a restored backup is written with spdk_dd (sparse), an upload or a
    backup read whole over NVMe/TCP and made sparse again.
    """

    ON_STORAGE_NODE = True
    LVS_MIB = 256
    DATA_LEN = 3 * imaging.MIB + 4096   # 4 clusters of 1 MiB

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(300, gentle=True))
        self.driver = self.make_driver(**self.driver_opts(
            spdk_nvmf_auth='dhchap'))

    def from_image(self, data):
        volume = self.make_volume(size=1)
        self.driver.create_volume(volume)
        self.driver.copy_image_to_volume(self.ctxt, volume, self.glance,
                                         self.add_image(data)['id'])
        return volume

    def allocated(self, volume):
        return self.rpc('bdev_get_bdevs', {'name': '%s/%s' % (
            base.LVS, volume.name)})[0]['driver_specific']['lvol'][
                'num_allocated_clusters']

    def test_an_image_in_and_out_stays_thin(self):
        data = imaging.pattern('agent', self.DATA_LEN)
        volume = self.from_image(data)
        self.assertEqual(data, self.lvol_bytes(volume.name, len(data)))
        self.assertEqual(4, self.allocated(volume))

        meta = self.empty_image('raw')
        self.driver.copy_volume_to_image(self.ctxt, volume, self.glance,
                                         meta)
        got, size = self.image_bytes(meta['id'], len(data) + imaging.MIB,
                                     'raw')
        self.assertEqual(1024 * imaging.MIB, size)
        self.assertEqual(data + bytes(imaging.MIB), got)
        # Another volume from that upload is as thin as the first.
        again = self.from_image(self.glance._imagedata[meta['id']])
        self.assertEqual(4, self.allocated(again))
        self.assert_no_scratch()

    def test_a_backup_is_staged_here_and_restored_there(self):
        """cinder-backup's host reads and writes a file on this host."""
        data = imaging.pattern('backup', self.DATA_LEN)
        volume = self.from_image(data)
        volume.status = 'backing-up'
        volume.save()
        backup_host = {'host': 'controller', 'initiator': 'iqn.x'}
        conn = self.driver.initialize_connection(volume, backup_host)
        path = conn['data']['device_path']
        with open(path, 'rb') as staged:
            self.assertEqual(data, staged.read(len(data)))
        # Read whole over NVMe/TCP, yet the zeros after the data are holes.
        self.assertLess(os.stat(path).st_blocks * 512, 5 * imaging.MIB)
        self.driver.terminate_connection(volume, backup_host)
        self.assertFalse(os.path.exists(path))

        other = imaging.pattern('restored', self.DATA_LEN)
        volume.status = 'restoring-backup'
        volume.save()
        path = self.driver.initialize_connection(
            volume, backup_host)['data']['device_path']
        with open(path, 'r+b') as staged:
            staged.write(other)
        self.driver.terminate_connection(volume, backup_host)
        self.assertEqual(other, self.lvol_bytes(volume.name, len(other)))
        self.assertEqual(4, self.allocated(volume))
        self.assert_no_scratch()
