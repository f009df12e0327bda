"""cinder.conf for the deployment: one ``spdk_vhost`` backend, keystone.

The backend's target and its replica target are each a storage node's,
reached through that node's agent (see :mod:`deployment`); every
attachment's host is authenticated with DH-HMAC-CHAP.

cinder-backup runs beside cinder-volume with the posix backup driver
(backups in ``<workdir>/backups``); an in-use volume is backed up from a
temporary snapshot (``backup_use_temp_snapshot``).

The intervals are cut from minutes to seconds so that the scheduler knows
the backend's capabilities a few seconds after start, not after a minute.
"""

import configparser
import os
import sys

from testbed import spdk_build

BACKEND = 'spdk'
HOST = 'deploy-storage'
#: The cinder-volume cluster of a clustered deployment: its members are
#: ``HOST`` and ``SECOND_MEMBER``, locking through etcd.
CLUSTER = 'deploy-cluster'
SECOND_MEMBER = HOST + '-2'
#: Seconds without a report until Cinder counts a member down: no longer
#: than the 30 s of tooz's etcd lease (the other member waits for the dead
#: one's locks that long anyway), and long enough that a member slowed by
#: a loaded machine is not counted down. Cinder's default is 60.
SERVICE_DOWN_TIME = 30
#: The sections of the storage targets holding replicated volumes' other
#: copies: the first, then the others' (``spdk-replica-2``...).
REPLICA_SECTION = 'spdk-replica'


def api_paste_config():
    """Cinder's own api-paste.ini, as installed with the cinder package."""
    path = os.environ.get('CINDER_API_PASTE_CONFIG') or os.path.join(
        sys.prefix, 'etc', 'cinder', 'api-paste.ini')
    if not os.path.exists(path):
        raise RuntimeError('api-paste.ini not found at %s: set '
                           'CINDER_API_PASTE_CONFIG' % path)
    return path


def build(workdir, db_url, transport_url, api_port, backend, replicas,
          host=HOST, own_dir=None, lock_url=None):
    """The cinder.conf sections as a ConfigParser.

    ``backend`` and each of ``replicas``: the options that reach the
    backend's storage target and the others (its
    ``spdk_replica_targets``).
    ``workdir``: the deployment's (staged files and backups, which every
    member shares); ``own_dir``: this service's own state and locks
    (default ``workdir``). ``lock_url``: the
    ``[coordination] backend_url`` of a cluster (:data:`CLUSTER`), whose
    members are told apart by ``host``; without it, no cluster and a
    ``file://`` lock backend of this host's.
    """
    own_dir = own_dir or workdir
    sections = [REPLICA_SECTION] + ['%s-%d' % (REPLICA_SECTION, number)
                                    for number in range(2, len(replicas) + 1)]
    conf = configparser.ConfigParser(interpolation=None)
    conf['DEFAULT'] = {
        'host': host,
        'my_ip': '127.0.0.1',
        'debug': 'True',
        'auth_strategy': 'keystone',
        'transport_url': transport_url,
        'enabled_backends': BACKEND,
        'state_path': os.path.join(own_dir, 'state'),
        'api_paste_config': api_paste_config(),
        'osapi_volume_listen': '127.0.0.1',
        'osapi_volume_listen_port': str(api_port),
        'osapi_volume_workers': '1',
        'report_interval': '2',
        'periodic_interval': '2',
        'backend_stats_polling_interval': '3',
        'scheduler_driver_init_wait_time': '30',
        'rpc_response_timeout': '60',
        'backup_driver': 'cinder.backup.drivers.posix.PosixBackupDriver',
        'backup_posix_path': os.path.join(workdir, 'backups'),
    }
    conf['database'] = {'connection': db_url}
    conf['oslo_concurrency'] = {'lock_path': os.path.join(own_dir, 'lock')}
    conf['coordination'] = {'backend_url': lock_url or 'file://' +
                            os.path.join(own_dir, 'coordination')}
    if lock_url:
        conf['DEFAULT'].update({
            'cluster': CLUSTER,
            # A killed member is down (and its work can be cleaned up by
            # another) sooner than Cinder's default.
            'service_down_time': str(SERVICE_DOWN_TIME)})
    conf[BACKEND] = dict(
        backend,
        volume_driver='cinder_spdk_vhost.driver.SpdkVhostDriver',
        volume_backend_name=BACKEND,
        spdk_rpc_timeout='30',
        # Every host proves it holds its attachment's secret.
        spdk_nvmf_auth='dhchap',
        spdk_dd_path=spdk_build.app_path('spdk_dd'),
        spdk_image_staging_dir=os.path.join(workdir, 'staging'),
        backup_use_temp_snapshot='True',
        # A storage node back from the dead is caught up within seconds.
        spdk_sweep_interval='5',
        spdk_replica_targets=','.join(sections))
    for section, replica in zip(sections, replicas):
        conf[section] = dict(replica, spdk_rpc_timeout='30')
    return conf


def noauth():
    """The tests' own cinder-api: noauth, where a token names the user."""
    conf = configparser.ConfigParser(interpolation=None)
    conf['DEFAULT'] = {'auth_strategy': 'noauth'}
    return conf


def write(path, conf):
    with open(path, 'w') as out:
        conf.write(out)
