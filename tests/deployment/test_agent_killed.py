"""A storage node's agent killed while cinder-volume waits on it.

spdk-vhost-agent is the one service of a storage node: cinder-volume
reaches the node's target only through it. Here the replica node's agent
stalls (SIGSTOP) while cinder-volume sends it a call of a replicated
volume's create, clone, attach or delete, and is then SIGKILLed, as a
crash ends it. The operation ends at once: a create or clone fails and
is undone, as does a volume's first attach (which needs every copy), and
a delete goes on without the node's copy. The volume stays manageable
while the agent is down; once it is back, the catch-up removes what the
node still holds of volumes deleted meanwhile, and nothing is left on
either storage node.
"""

from concurrent import futures
import time

from cinderclient import exceptions as cinder_exc
from oslo_utils import timeutils

from testbed import waiting
from tests.deployment import base
from tests.deployment import deployment
from tests.deployment import test_connection
from tests.deployment import test_replicated


class TestAgentKilled(base.DeploymentTestCase):

    def test_killed_while_creating_a_volume(self):
        self._killed_while_creating('create', self.replicated())

    def test_killed_while_cloning_a_volume(self):
        vtype = self.replicated()
        source = self.create_volume(1, volume_type=vtype.id)
        self._killed_while_creating('clone', vtype, source_volid=source.id,
                                    also_delete=source)

    def _killed_while_creating(self, what, vtype, also_delete=None,
                               **kwargs):
        """The create fails and is undone; its volume deletes.

        ``also_delete``: a volume to delete with it, before the agent
        is back.
        """
        with self.agent.paused():
            vol = self.cinder.volumes.create(1, volume_type=vtype.id,
                                             **kwargs)
            self.addCleanup(self._forget, self.cinder.volumes, vol.id)
            killed = self.kill_in_call()
        self.wait_status(self.cinder.volumes, vol.id, 'error')
        failed = time.monotonic() - killed
        self.assertNotIn('volume-' + vol.id, self.lvols())
        for volume in filter(None, (vol, also_delete)):
            self.delete_volume(volume.id)
        self.agent_back()
        print('AGENT KILLED in a %s: the volume in error %.1f s after the '
              'kill' % (what, failed))

    def test_killed_while_attaching_a_volume(self):
        """Refused at once, undone; the detach and delete go on.

        Never attached, the volume has no RAID superblock to say which
        copy is in sync: its first attach needs every copy.
        """
        vol = self.create_volume(1, volume_type=self.replicated().id)
        connector = test_connection.nova_connector()
        with futures.ThreadPoolExecutor(1) as pool:
            with self.agent.paused():
                attach = pool.submit(self.cinder.volumes.initialize_connection,
                                     vol, connector)
                killed = self.kill_in_call()
            err = self.assertRaises(cinder_exc.ClientException, attach.result)
        failed = time.monotonic() - killed
        self.assertEqual(500, err.code)
        self.assertEqual([], self.exported(self.deployment.target))
        self.cinder.volumes.terminate_connection(vol, connector)
        self.delete_volume(vol.id)
        self.agent_back()
        print('AGENT KILLED in a first attach: refused %.1f s after the '
              'kill' % failed)

    def test_killed_while_deleting_a_volume(self):
        """The delete finishes; the node's copy goes when it is back."""
        vol = self.create_volume(1, volume_type=self.replicated().id)
        with self.agent.paused():
            self.cinder.volumes.delete(vol.id)
            killed = self.kill_in_call()
        self.wait_gone(self.cinder.volumes, vol.id)
        deleted = time.monotonic() - killed
        self.assertIn('replica-' + vol.id, self.copies())
        caught_up = self.agent_back()
        print('AGENT KILLED in a delete: deleted %.1f s after the kill; '
              'its copy removed %.1f s after the agent was back'
              % (deleted, caught_up))

    # -- the node's agent --------------------------------------------------

    @property
    def agent(self):
        return self.deployment.replica_agent

    def replicated(self):
        return self.make_type(extra_specs=test_replicated.TWO_COPIES)

    def copies(self):
        return self.lvols(deployment.REPLICA_LVSTORE,
                          self.deployment.replica_target)

    def kill_in_call(self):
        """SIGKILL the paused agent once a call waits unread in it."""
        waiting.wait_for('a call waiting in the paused agent',
                         lambda: self.agent.unread() > 0, base.TIMEOUT,
                         interval=0.1)
        self.agent.kill()
        self.addCleanup(self._start_if_dead)
        return time.monotonic()

    def _start_if_dead(self):
        if self.agent.process.poll() is not None:
            self.agent.start()

    def agent_back(self):
        """Start the agent; seconds until its node is back in service.

        The catch-up has left the node empty of copies and exports
        (every volume of these tests is deleted by then), and a stats
        report since its return offers two copies again: the driver
        has seen it answer.
        """
        back = timeutils.utcnow()
        self.agent.start()
        started = time.monotonic()
        target = self.deployment.replica_target
        waiting.wait_for('the replica node caught up', lambda: not (
            self.copies() or self.exported(target)), base.TIMEOUT)
        caught_up = time.monotonic() - started
        waiting.wait_for('a stats report offering two copies again',
                         lambda: self._offered_since(back) == {2},
                         base.TIMEOUT)
        return caught_up

    def _offered_since(self, when):
        """The copies each pool offers, by reports since ``when``."""
        return {pool.spdk_max_replicas if timeutils.parse_isotime(
            pool.timestamp).replace(tzinfo=None) > when else None
            for pool in self.admin_client().pools.list(detailed=True)}
