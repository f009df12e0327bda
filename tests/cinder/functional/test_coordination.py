"""Two cinder-volume processes of one cluster serialise on a real etcd.

Active-active cinder-volume runs members on different controllers: a
host-local lock would let two of them change one lvol at once. Each
member here is a process of its own with its own ``cinder.conf`` (one
``[DEFAULT] cluster``, ``[coordination] backend_url`` on the test's
etcd) taking the driver's locks (``cinder_spdk_vhost.locks``). That a
waiting member is really blocked is read from etcd itself: its lock
requests keep coming and are refused while the other member holds the
lock, and it gets the lock once that member lets go.
"""

import configparser
import os
import uuid

import etcd3gw
import fixtures

from cinder_spdk_vhost import locks
from testbed import etcd
from testbed import service_process
from testbed import waiting
from tests import base

MEMBER = 'tests.cinder.cluster_member:ClusterMember'
#: Seconds any expected event may take on a loaded machine.
DEADLINE = 60
#: Where tooz's etcd3gw driver keeps its locks (key = prefix + name).
TOOZ_LOCKS = '/tooz/locks'


class ClusterLockTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.etcd = self.useFixture(etcd.Etcd())
        self.first = self.member('controller1')
        self.second = self.member('controller2')

    def member(self, host):
        """A cinder-volume process of cluster ``spdk`` on ``host``."""
        conf = configparser.ConfigParser()
        conf['DEFAULT'] = {'host': host, 'cluster': 'spdk'}
        conf['coordination'] = {'backend_url': self.etcd.url}
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'cinder.conf')
        with open(path, 'w') as out:
            conf.write(out)
        member = self.useFixture(service_process.ServiceProcess(MEMBER))
        started = member.call('start', config_file=path)
        self.assertEqual({'host': host + '@spdk', 'cluster': 'spdk@spdk',
                          'backend_url': self.etcd.url}, started)
        return member

    def lock(self, member, key, *names):
        member.call('lock', key=key, names=list(names), timeout=DEADLINE)

    def etcd_locks(self):
        """The names of the locks held in etcd now."""
        client = etcd3gw.client(host=self.etcd.address, port=self.etcd.port,
                                api_path='/v3/')
        return sorted(meta['key'].decode()[len(TOOZ_LOCKS):]
                      for _value, meta in client.get_prefix(TOOZ_LOCKS))

    def test_one_volume_serialised_across_members(self):
        volume = str(uuid.uuid4())
        name = locks.vlock(volume)
        self.lock(self.first, 'first', name)
        self.assertTrue(self.first.call('wait_held', key='first',
                                        timeout=DEADLINE))
        # In etcd, under cinder's and the driver's prefixes.
        self.assertEqual(['cinder-spdk-vhost-' + name], self.etcd_locks())

        tried = self.etcd.requests('Txn')
        self.lock(self.second, 'second', name)
        # The second member is in locked(): etcd refused its first
        # attempt (the first member holds the key) and it came back.
        waiting.wait_for('the second member to retry the lock',
                         lambda: self.etcd.requests('Txn') >= tried + 2,
                         DEADLINE, interval=0.05)
        self.assertFalse(self.second.call('held', key='second'))

        self.assertTrue(self.first.call('release', key='first',
                                        timeout=DEADLINE))
        self.assertTrue(self.second.call('wait_held', key='second',
                                         timeout=DEADLINE))
        self.assertEqual(['cinder-spdk-vhost-' + name], self.etcd_locks())
        self.assertTrue(self.second.call('release', key='second',
                                         timeout=DEADLINE))
        self.assertEqual([], self.etcd_locks())

    def test_other_volume_not_blocked(self):
        busy, other = str(uuid.uuid4()), str(uuid.uuid4())
        self.lock(self.first, 'first', locks.vlock(busy))
        self.assertTrue(self.first.call('wait_held', key='first',
                                        timeout=DEADLINE))
        self.lock(self.second, 'second', locks.vlock(other),
                  locks.slock('snapshot-' + other))
        self.assertTrue(self.second.call('wait_held', key='second',
                                         timeout=DEADLINE))
        self.assertTrue(self.first.call('held', key='first'))
        self.assertEqual(sorted('cinder-spdk-vhost-' + name for name in (
            locks.vlock(busy), locks.vlock(other),
            locks.slock('snapshot-' + other))), self.etcd_locks())
