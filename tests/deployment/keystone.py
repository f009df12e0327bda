"""A minimal real keystone for the deployment, as one fixture.

Tempest has no noauth mode: it authenticates with keystone and finds
the volume API in keystone's catalog. So this runs the installed
``keystone`` package on its own MariaDB database: ``keystone-manage
db_sync``, fernet keys, ``bootstrap`` (admin user and project, the
admin/member/reader roles, the identity endpoint), served by
``wsgi_server``. ``add_endpoint`` puts other services in the catalog.
"""

import configparser
import os

import fixtures
from keystoneauth1.identity import v3
from keystoneauth1 import session as ks_session

from testbed import net
from tests.deployment import backing
from tests.deployment import processes

ADMIN_USER = 'admin'
ADMIN_PROJECT = 'admin'
DOMAIN = 'Default'
REGION = 'RegionOne'


def build_conf(workdir, db_url):
    """keystone.conf: fernet tokens, cheap password hashes, no cache."""
    conf = configparser.ConfigParser(interpolation=None)
    conf['DEFAULT'] = {'debug': 'True'}
    conf['database'] = {'connection': db_url}
    conf['token'] = {'provider': 'fernet'}
    conf['fernet_tokens'] = {
        'key_repository': os.path.join(workdir, 'fernet-keys')}
    conf['fernet_receipts'] = {
        'key_repository': os.path.join(workdir, 'fernet-keys')}
    conf['credential'] = {
        'key_repository': os.path.join(workdir, 'credential-keys')}
    # bcrypt's minimum cost: tempest creates and logs in many users, and
    # the default cost makes each of those take a quarter second.
    conf['identity'] = {'password_hash_rounds': '4'}
    conf['cache'] = {'enabled': 'False'}
    return conf


class Keystone(fixtures.Fixture):
    """keystone on a free port of ``address``, its database dropped after."""

    def __init__(self, workdir, log_path, password='deploy-admin-secret',
                 address='127.0.0.1'):
        super().__init__()
        self.workdir = workdir
        self.log_path = log_path
        self.admin_password = password
        self.address = address
        self.port = net.free_port(address)
        self.uri = 'http://%s:%d/v3' % (address, self.port)

    def _setUp(self):
        self.database = self.useFixture(
            backing.Database(name=backing.unique_name('keystone_deploy')))
        self.conf_path = os.path.join(self.workdir, 'keystone.conf')
        with open(self.conf_path, 'w') as out:
            build_conf(self.workdir, self.database.url).write(out)
        for args in (['db_sync'],
                     ['fernet_setup'] + self._owner(),
                     ['credential_setup'] + self._owner(),
                     ['bootstrap', '--bootstrap-password',
                      self.admin_password,
                      '--bootstrap-username', ADMIN_USER,
                      '--bootstrap-project-name', ADMIN_PROJECT,
                      '--bootstrap-region-id', REGION,
                      '--bootstrap-public-url', self.uri,
                      '--bootstrap-internal-url', self.uri]):
            self._manage(args)
        self.process = self.useFixture(processes.ServiceProcess(
            'keystone', processes.wsgi_argv('keystone.wsgi.api', self.port,
                                            host=self.address),
            self.log_path,
            env={'OS_KEYSTONE_CONFIG_FILES': self.conf_path}))

    @staticmethod
    def _owner():
        """Keys owned by whoever runs the server: this user."""
        return ['--keystone-user', str(os.geteuid()),
                '--keystone-group', str(os.getegid())]

    def _manage(self, args):
        processes.run_once(
            [processes.console_script('keystone-manage'), '--config-file',
             self.conf_path] + args, self.log_path, timeout=300)

    def listening(self):
        return self.process.listening(self.port, self.address)

    def admin_session(self):
        auth = v3.Password(auth_url=self.uri, username=ADMIN_USER,
                           password=self.admin_password,
                           project_name=ADMIN_PROJECT,
                           user_domain_name=DOMAIN,
                           project_domain_name=DOMAIN)
        return ks_session.Session(auth=auth)

    def add_endpoint(self, name, service_type, url):
        """Put a service with one public endpoint in the catalog."""
        sess = self.admin_session()
        service = sess.post(
            '/services', endpoint_filter={'service_type': 'identity'},
            json={'service': {'name': name, 'type': service_type}},
        ).json()['service']
        for interface in ('public', 'internal'):
            sess.post('/endpoints',
                      endpoint_filter={'service_type': 'identity'},
                      json={'endpoint': {'service_id': service['id'],
                                         'interface': interface,
                                         'region_id': REGION,
                                         'url': url}})

    def grant(self, role, user=ADMIN_USER, project=ADMIN_PROJECT):
        """Give ``user`` ``role`` on ``project`` (e.g. ``service``)."""
        sess = self.admin_session()
        identity = {'service_type': 'identity'}

        def find(kind, name):
            return sess.get('/%s?name=%s' % (kind, name),
                            endpoint_filter=identity).json()[kind][0]['id']
        sess.put('/projects/%s/users/%s/roles/%s' % (
            find('projects', project), find('users', user),
            find('roles', role)), endpoint_filter=identity)

    def service_auth(self):
        """A service's own credentials for keystone (``[glance]``...)."""
        auth = self.authtoken_section()
        del auth['www_authenticate_uri']
        return auth

    def authtoken_section(self):
        """cinder.conf's [keystone_authtoken] for this keystone.

        The admin user doubles as the service user: one user is all a
        test deployment needs to validate tokens. Known before the
        fixture starts, so a service can start alongside keystone.
        """
        return {'www_authenticate_uri': self.uri,
                'auth_url': self.uri,
                'auth_type': 'password',
                'username': ADMIN_USER,
                'password': self.admin_password,
                'project_name': ADMIN_PROJECT,
                'user_domain_name': DOMAIN,
                'project_domain_name': DOMAIN,
                'region_name': REGION}
