"""Two cinder-volume services of one cluster; one killed in mid-work.

The clustered deployment runs two cinder-volume services of cluster
``deploy-cluster``, locking through a real etcd (see
:mod:`tests.deployment.deployment`). Here one of them is SIGKILLed, as
its controller's death ends it, while it creates, clones, attaches or
deletes a replicated volume, held up by a storage node that stalls (its
agent stopped). Cinder's cleanup of a dead service's work (``POST
/workers/cleanup``, from the ``workers`` table) then hands that work to
the member left: a create or clone ends in ``error`` and its volume
deletes, a delete is finished. An attach is a call: it fails, and the
detach its caller then sends undoes it. The dead member's volume lock
expires with its etcd lease. Nothing is left on either storage node;
the killed member comes back at the end.
"""

from concurrent import futures
import time

from cinderclient import exceptions as cinder_exc

from testbed import waiting
from tests.deployment import base
from tests.deployment import cinder_conf
from tests.deployment import processes
from tests.deployment import test_connection
from tests.deployment import test_replicated

BINARY = 'cinder-volume'
#: Until a killed member is down, its lock expired and its work redone.
CLEANUP_TIMEOUT = 180


def _backend(host):
    return '%s@%s' % (host, cinder_conf.BACKEND)


class TestCluster(base.DeploymentTestCase):

    CLUSTERED = True

    def test_both_members_serve_the_backend(self):
        services = self.admin_client().services.list(binary=BINARY)
        cluster = _backend(cinder_conf.CLUSTER)
        self.assertEqual(
            {(_backend(host), cluster, 'up')
             for host in self.deployment.members.values()},
            {(s.host, s.cluster, s.state) for s in services})

    def test_member_killed_while_creating_a_volume(self):
        # Its own copy made, the member waits on the stalled node for the
        # second one.
        self._killed_while_creating(
            'create', self.replicated(),
            lambda vol, member: 'volume-' + vol.id in self.lvols())

    def test_member_killed_while_cloning_a_volume(self):
        vtype = self.replicated()
        source = self.create_volume(1, volume_type=vtype.id)
        # Holding both volumes' locks, the member waits on the stalled
        # node to prove the source's copies in sync.
        self._killed_while_creating(
            'clone', vtype,
            lambda vol, member: self.logged(member, 'Started: clone volume '
                                            '%s to %s' % (source.id, vol.id)),
            source_volid=source.id)

    def _killed_while_creating(self, what, vtype, working, **kwargs):
        """A member killed in a replicated create; the other cleans up.

        ``working(volume, member)``: whether the member is in the midst
        of it.
        """
        with self.deployment.replica_agent.paused():
            vol = self.cinder.volumes.create(1, volume_type=vtype.id,
                                             **kwargs)
            self.addCleanup(self._forget, self.cinder.volumes, vol.id)
            member = self.working_member(vol.id, 'creating')
            waiting.wait_for('%s to be in the %s' % (member, what),
                             lambda: working(vol, member), base.TIMEOUT)
            killed = self.kill(member)
        self.clean_up_after(member)
        self.wait_status(self.cinder.volumes, vol.id, 'error',
                         timeout=CLEANUP_TIMEOUT)
        self.delete_volume(vol.id)
        print('CLUSTER %s: killed member %s; its volume errored and '
              'deleted by the other %.1f s later'
              % (what, member, time.monotonic() - killed))

    def test_member_killed_while_attaching_a_volume(self):
        """Nova's attach fails; its detach, by the other member, undoes it.

        The attach is a call, not recorded work: its caller waits for
        the reply until ``rpc_response_timeout``, then detaches, as Nova
        does when an attach fails.
        """
        vol = self.create_volume(1, volume_type=self.replicated().id)
        connector = test_connection.nova_connector()
        with futures.ThreadPoolExecutor(1) as pool:
            with self.deployment.replica_agent.paused():
                attach = pool.submit(self.cinder.volumes.initialize_connection,
                                     vol, connector)
                member = self.member_logging('Started: attach volume ' +
                                             vol.id)
                waiting.wait_for('the own copy\'s export', lambda: [
                    s for s in self.rpc('nvmf_get_subsystems')
                    if s['nqn'].endswith(vol.id)], base.TIMEOUT)
                killed = self.kill(member)
            self.assertRaises(cinder_exc.ClientException, attach.result)
        self.cinder.volumes.terminate_connection(vol, connector)
        print('CLUSTER attach: killed member %s; the attach failed and was '
              'undone by the other %.1f s later'
              % (member, time.monotonic() - killed))

    def test_member_killed_while_deleting_a_volume(self):
        vol = self.create_volume(1, volume_type=self.replicated().id)
        with self.deployment.replica_agent.paused():
            self.cinder.volumes.delete(vol.id)
            member = self.working_member(vol.id, 'deleting')
            killed = self.kill(member)
        self.clean_up_after(member)
        self.wait_gone(self.cinder.volumes, vol.id, timeout=CLEANUP_TIMEOUT)
        print('CLUSTER delete: killed member %s; the other finished its '
              'delete %.1f s later' % (member, time.monotonic() - killed))

    def replicated(self):
        return self.make_type(extra_specs=test_replicated.TWO_COPIES)

    # -- the members -------------------------------------------------------

    def logged(self, member, line):
        return line in processes.tail(self.deployment.log_path(member), None)

    def member_logging(self, line):
        """The service name of the member whose log has ``line``."""
        def found():
            named = [name for name in self.deployment.members
                     if self.logged(name, line)]
            return named[0] if named else None
        return waiting.wait_for('a member to log %r' % line, found,
                                base.TIMEOUT, interval=0.2)

    def working_member(self, volume_id, status):
        """The service name of the member that took the volume's work.

        Read from Cinder's ``workers`` table, where the member records
        the work before it starts it.
        """
        names = {_backend(host): name
                 for name, host in self.deployment.members.items()}

        def recorded():
            rows = self.deployment.database.query(
                'SELECT s.host FROM workers w JOIN services s ON '
                's.id = w.service_id WHERE w.resource_type = %s AND '
                'w.resource_id = %s AND w.status = %s',
                ('Volume', volume_id, status))
            return names.get(rows[0][0]) if rows else None
        return waiting.wait_for('a member %s volume %s' % (status, volume_id),
                                recorded, base.TIMEOUT, interval=0.1)

    def kill(self, name):
        """SIGKILL member ``name``; started again at the test's end."""
        self.deployment.services[name].kill()
        self.addCleanup(self.restart, name)
        return time.monotonic()

    def restart(self, name):
        """Start member ``name`` again; wait until it reports.

        Its service row says ``up`` from its start, before its set-up
        and RPC server: only its reports (``report_count``) show it runs.
        """
        before = self._reports(name)
        self.deployment.services[name].start()
        waiting.wait_for('%s to report again' % name,
                         lambda: self._reports(name) > before, base.TIMEOUT)

    def _reports(self, name):
        (count,), = self.deployment.database.query(
            'SELECT report_count FROM services WHERE host = %s AND '
            '`binary` = %s AND deleted = 0',
            (_backend(self.deployment.members[name]), BINARY))
        return count

    def _service(self, name):
        host = _backend(self.deployment.members[name])
        found, = self.admin_client().services.list(host=host, binary=BINARY)
        return found

    def clean_up_after(self, name):
        """Once member ``name`` is down, have its work done by the other."""
        waiting.wait_for('%s to be down' % name,
                         lambda: self._service(name).state == 'down',
                         CLEANUP_TIMEOUT)
        cleaning, unavailable = self.admin_client().workers.clean(
            host=_backend(self.deployment.members[name]), binary=BINARY)
        self.assertEqual(([_backend(self.deployment.members[name])], []),
                         ([s.host for s in cleaning],
                          [s.host for s in unavailable]))
