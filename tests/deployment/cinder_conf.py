"""cinder.conf for the deployment: one ``spdk_vhost`` backend, keystone.

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
#: The section of the storage target holding replicas' second copies.
REPLICA_SECTION = 'spdk-replica'


def api_paste_config():
    """Cinder's own api-paste.ini, as installed with the cinder package."""
    path = os.environ.get('CINDER_API_PASTE_CONFIG') or os.path.join(
        sys.prefix, 'etc', 'cinder', 'api-paste.ini')
    if not os.path.exists(path):
        raise RuntimeError('api-paste.ini not found at %s: set '
                           'CINDER_API_PASTE_CONFIG' % path)
    return path


def build(workdir, db_url, transport_url, api_port, spdk_socket,
          lvstores, nvmf_port, target_id, saved_config, replica_target):
    """The cinder.conf sections as a ConfigParser.

    ``replica_target``: (RPC socket, lvol store, NVMe-oF port, target
    id) of a second storage target, the backend's spdk_replica_targets.
    """
    conf = configparser.ConfigParser(interpolation=None)
    conf['DEFAULT'] = {
        'host': HOST,
        'my_ip': '127.0.0.1',
        'debug': 'True',
        'auth_strategy': 'keystone',
        'transport_url': transport_url,
        'enabled_backends': BACKEND,
        'state_path': os.path.join(workdir, 'state'),
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
    conf['oslo_concurrency'] = {'lock_path': os.path.join(workdir, 'lock')}
    conf['coordination'] = {
        'backend_url': 'file://' + os.path.join(workdir, 'coordination')}
    conf[BACKEND] = {
        'volume_driver': 'cinder_spdk_vhost.driver.SpdkVhostDriver',
        'volume_backend_name': BACKEND,
        'spdk_rpc_socket': spdk_socket,
        'spdk_rpc_timeout': '30',
        'spdk_lvstores': ','.join(lvstores),
        'spdk_target_id': target_id,
        'spdk_nvmf_address': '127.0.0.1',
        'spdk_nvmf_port': str(nvmf_port),
        'spdk_dd_path': spdk_build.app_path('spdk_dd'),
        'spdk_saved_config': saved_config,
        'spdk_image_staging_dir': os.path.join(workdir, 'staging'),
        'backup_use_temp_snapshot': 'True',
        'spdk_replica_targets': REPLICA_SECTION,
    }
    socket_path, lvstore, port, replica_id = replica_target
    conf[REPLICA_SECTION] = {
        'spdk_rpc_socket': socket_path,
        'spdk_rpc_timeout': '30',
        'spdk_lvstores': lvstore,
        'spdk_target_id': replica_id,
        'spdk_nvmf_address': '127.0.0.1',
        'spdk_nvmf_port': str(port),
        'spdk_saved_config': '',
    }
    return conf


def noauth():
    """The tests' own cinder-api: noauth, where a token names the user."""
    conf = configparser.ConfigParser(interpolation=None)
    conf['DEFAULT'] = {'auth_strategy': 'noauth'}
    return conf


def write(path, conf):
    with open(path, 'w') as out:
        conf.write(out)
