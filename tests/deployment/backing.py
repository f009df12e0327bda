"""A fresh MariaDB database and RabbitMQ vhost for one deployment.

The servers themselves are shared (tools/start-services.sh starts them
once per machine); each deployment gets its own database and vhost so
two runs never see each other's rows or messages, and both are dropped
when the deployment stops. ``CINDER_DEPLOY_DB_URL`` and
``CINDER_DEPLOY_RABBIT_URL`` point the tests at other servers.
"""

import os
import shutil
import subprocess
from urllib import parse
import uuid

import fixtures
import pymysql

DEFAULT_DB_URL = 'mysql+pymysql://root:@127.0.0.1:3306'
DEFAULT_RABBIT_URL = 'rabbit://guest:guest@127.0.0.1:5672'


def db_server_url():
    return os.environ.get('CINDER_DEPLOY_DB_URL', DEFAULT_DB_URL)


def rabbit_server_url():
    return os.environ.get('CINDER_DEPLOY_RABBIT_URL', DEFAULT_RABBIT_URL)


def unique_name(prefix):
    return '%s_%s' % (prefix, uuid.uuid4().hex[:12])


class Database(fixtures.Fixture):
    """Create database ``name`` on the server; drop it on cleanup."""

    def __init__(self, server_url=None, name=None):
        super().__init__()
        self.server_url = server_url or db_server_url()
        self.name = name or unique_name('cinder_deploy')

    def _connect(self):
        url = parse.urlsplit(self.server_url)
        return pymysql.connect(host=url.hostname or '127.0.0.1',
                               port=url.port or 3306,
                               user=parse.unquote(url.username or 'root'),
                               password=parse.unquote(url.password or ''),
                               connect_timeout=10)

    def _execute(self, statement):
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                cur.execute(statement)
        finally:
            conn.close()

    def _setUp(self):
        self._execute('CREATE DATABASE `%s` CHARACTER SET utf8mb4'
                      % self.name)
        self.addCleanup(self._execute,
                        'DROP DATABASE IF EXISTS `%s`' % self.name)
        self.url = '%s/%s?charset=utf8mb4' % (
            self.server_url.rstrip('/'), self.name)

    def query(self, statement, args=()):
        """The rows of one read of this database (tests look, not change)."""
        conn = self._connect()
        try:
            conn.select_db(self.name)
            with conn.cursor() as cur:
                cur.execute(statement, args)
                return cur.fetchall()
        finally:
            conn.close()

    def exists(self):
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                return bool(cur.execute('SHOW DATABASES LIKE %s',
                                        (self.name,)))
        finally:
            conn.close()


def private_vhosts():
    """Whether RabbitVhost makes private vhosts here.

    Creating a vhost needs rabbitmqctl on this host and the rights to use
    it. Without them every deployment shares the default vhost, where two
    at once would take each other's messages: tools/run-tests.sh then
    runs the deployment tree in one process, one deployment at a time.
    """
    return shutil.which('rabbitmqctl') is not None and os.geteuid() == 0


class RabbitVhost(fixtures.Fixture):
    """A private RabbitMQ vhost (rabbitmqctl), or the server's own URL.

    See :func:`private_vhosts` for when the default vhost is shared.
    """

    def __init__(self, server_url=None, name=None):
        super().__init__()
        self.server_url = server_url or rabbit_server_url()
        self.name = name or unique_name('cinder-deploy')
        self.ctl = shutil.which('rabbitmqctl')

    def _ctl(self, *args):
        subprocess.run([self.ctl, '-q'] + list(args), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       timeout=60)

    def _setUp(self):
        self.url = self.server_url.rstrip('/') + '/'
        user = parse.unquote(parse.urlsplit(self.server_url).username or
                             'guest')
        if not private_vhosts():
            self.vhost = None
            return
        self._ctl('add_vhost', self.name)
        self.addCleanup(self._ctl, 'delete_vhost', self.name)
        self._ctl('set_permissions', '-p', self.name, user, '.*', '.*', '.*')
        self.vhost = self.name
        self.url += parse.quote(self.name, safe='')
