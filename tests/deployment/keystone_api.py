"""The deployment's volume API behind keystone, for tempest.

The deployment's own ``cinder-api`` runs with ``auth_strategy =
noauth``, which is what keeps the cinderclient tests quick and free of
a token service. Tempest only speaks keystone, so this adds a keystone
and a second ``cinder-api`` process with ``auth_strategy = keystone``
(keystonemiddleware's ``authtoken``). It reads the same cinder.conf
otherwise: the same database and RabbitMQ, so the same scheduler and
volume service serve both APIs.
"""

import configparser
import os
import time

import fixtures

from testbed import net
from testbed import waiting
from tests.deployment import processes

NAMES = ('keystone', 'cinder-api-keystone')


class KeystoneFrontEnd(fixtures.Fixture):
    """keystone + a keystone-authenticated cinder-api on ``dep``."""

    def __init__(self, dep, start_timeout=120):
        super().__init__()
        self.dep = dep
        self.start_timeout = start_timeout

    def _setUp(self):
        deadline = time.monotonic() + self.start_timeout
        self.workdir = self.useFixture(fixtures.TempDir()).path
        # Not started yet: cinder-api, which starts while keystone's
        # database is set up, needs only its address.
        self.keystone = self.dep.keystone
        self.address = self.dep.controller_address
        self.api_port = net.free_port(self.address)
        self.endpoint = 'http://%s:%d/v3' % (self.address, self.api_port)
        self.conf_path = os.path.join(self.workdir, 'cinder.conf')
        with open(self.conf_path, 'w') as out:
            self._cinder_conf().write(out)
        self.api = self.useFixture(processes.ServiceProcess(
            'cinder-api-keystone',
            [processes.console_script('cinder-api'), '--config-file',
             self.conf_path], self.dep.log_path('cinder-api-keystone')))
        self.useFixture(self.keystone)
        waiting.wait_for('keystone to listen', self.keystone.listening,
                         max(1, deadline - time.monotonic()),
                         on_timeout=self.logs_text)
        self.keystone.add_endpoint(
            'cinderv3', 'volumev3', self.endpoint + '/$(project_id)s')
        # The admin doubles as every service's user; some APIs (glance's
        # image locations) are for the service role only.
        self.keystone.grant('service')
        waiting.wait_for('cinder-api (keystone) to listen',
                         self._api_listening,
                         max(1, deadline - time.monotonic()),
                         on_timeout=self.logs_text)

    def _cinder_conf(self):
        conf = configparser.ConfigParser(interpolation=None)
        conf.read(self.dep.conf_path)
        conf['DEFAULT']['auth_strategy'] = 'keystone'
        conf['DEFAULT']['osapi_volume_listen'] = self.address
        conf['DEFAULT']['osapi_volume_listen_port'] = str(self.api_port)
        conf['keystone_authtoken'] = self.keystone.authtoken_section()
        return conf

    def _api_listening(self):
        return self.api.listening(self.api_port, self.address)

    def logs(self, limit=6000):
        return {name: processes.tail(self.dep.log_path(name), limit)
                for name in NAMES}

    def logs_text(self):
        return '\n'.join('==== %s\n%s' % item
                         for item in sorted(self.logs(3000).items()))
