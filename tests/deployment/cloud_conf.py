"""Configuration files of the compute side of the deployment.

placement, neutron (API only: instances here have no ports, but Nova
asks Neutron for an instance's ports on every delete), glance (file
store) and Nova, each as a ConfigParser built from what the other
services are. Each service authenticates with keystone; the admin user
doubles as every service's user. Intervals are cut from minutes to
seconds so a new compute host is found in seconds.
"""

import configparser
import os
import sys

from testbed import spdk_target
from tests.deployment import processes

# The compute host's name in Nova, and its own SPDK target's id.
COMPUTE_HOST = 'deploy-compute'
# The Nova services of the controller (this machine) are on this host.
CONTROLLER_HOST = 'deploy-controller'
COMPUTE_TARGET_ID = 'compute-target'
# QEMU's group, as the install guide gives the vhost sockets to it.
QEMU_GROUP = 'libvirt-qemu'


def _conf(sections):
    conf = configparser.ConfigParser(interpolation=None)
    conf.read_dict(sections)
    return conf


def _package_etc(package, name):
    """A file the ``package`` installs under ``<prefix>/etc/<package>``."""
    path = os.path.join(sys.prefix, 'etc', package, name)
    if not os.path.exists(path):
        raise RuntimeError('%s not found: is %s installed in %s?'
                           % (path, package, sys.prefix))
    return path


def write(path, conf):
    with open(path, 'w') as out:
        conf.write(out)


def placement(db_url, keystone):
    return _conf({
        'DEFAULT': {'debug': 'True'},
        'placement_database': {'connection': db_url},
        'api': {'auth_strategy': 'keystone'},
        'keystone_authtoken': keystone.authtoken_section(),
    })


def neutron(db_url, transport_url, keystone, workdir):
    """ML2 with no mechanism driver: an API that knows ports, no agents."""
    return _conf({
        'DEFAULT': {
            'debug': 'True', 'core_plugin': 'ml2',
            # Port listing needs the port forwarding model (a service
            # plugin's) loaded; no agent is needed for it.
            'service_plugins': 'router,port_forwarding',
            'auth_strategy': 'keystone', 'transport_url': transport_url,
            'api_paste_config': _package_etc('neutron', 'api-paste.ini'),
            'state_path': os.path.join(workdir, 'state'),
            'notify_nova_on_port_status_changes': 'False',
            'notify_nova_on_port_data_changes': 'False',
            'api_workers': '1', 'rpc_workers': '0'},
        'database': {'connection': db_url},
        'keystone_authtoken': keystone.authtoken_section(),
        'ml2': {'type_drivers': 'flat', 'tenant_network_types': '',
                'mechanism_drivers': '', 'extension_drivers': ''},
        'oslo_concurrency': {'lock_path': os.path.join(workdir, 'lock')},
    })


def glance(db_url, keystone, workdir):
    return _conf({
        'DEFAULT': {'debug': 'True', 'enabled_backends': 'file:file',
                    'workers': '1'},
        'database': {'connection': db_url},
        'keystone_authtoken': keystone.authtoken_section(),
        'paste_deploy': {'flavor': 'keystone'},
        'glance_store': {'default_backend': 'file'},
        'file': {'filesystem_store_datadir':
                 os.path.join(workdir, 'images')},
        'os_glance_staging_store': {
            'filesystem_store_datadir': os.path.join(workdir, 'staging')},
        'os_glance_tasks_store': {
            'filesystem_store_datadir': os.path.join(workdir, 'tasks')},
        'oslo_concurrency': {'lock_path': os.path.join(workdir, 'lock')},
    })


def glance_paste():
    return _package_etc('glance', 'glance-api-paste.ini')


def nova_paste():
    return _package_etc('nova', 'api-paste.ini')


def nova(conf_path, workdir, dbs, transport_url, keystone, domain_prefix,
         host, my_ip, target=None):
    """nova.conf of Nova's services on ``host`` at ``my_ip``.

    ``target``: a compute node's ``(RPC socket, target id, saved
    config)``; without it, a controller's (no ``[spdk_vhost]``).
    """
    auth = keystone.service_auth()
    sections = {
        'DEFAULT': {
            'debug': 'True', 'host': host, 'my_ip': my_ip,
            'transport_url': transport_url,
            'compute_driver': 'spdk_vhost.LibvirtVhostUserDriver',
            'state_path': os.path.join(workdir, 'state'),
            'instances_path': os.path.join(workdir, 'instances'),
            'osapi_compute_workers': '1', 'metadata_workers': '1',
            'report_interval': '2', 'periodic_enable': 'True',
            'allow_resize_to_same_host': 'True',
            'instance_name_template': domain_prefix + '%08x',
            'shelved_offload_time': '0',
            'heal_instance_info_cache_interval': '-1',
            'rpc_response_timeout': '120',
            'instance_build_timeout': '600',
            # What the compute target holds (-s): the driver checks.
            'reserved_huge_pages': spdk_target.nova_reserved_huge_pages()},
        'api': {'auth_strategy': 'keystone'},
        'api_database': {'connection': dbs['nova_api']},
        'database': {'connection': dbs['nova_cell1']},
        'keystone_authtoken': keystone.authtoken_section(),
        'placement': auth,
        'neutron': dict(auth, default_floating_pool='',
                        service_metadata_proxy='False'),
        'cinder': dict(auth, os_region_name=auth['region_name'],
                       catalog_info='volumev3::publicURL'),
        'glance': auth,
        # Cinder lets only Nova (a service token) delete an attachment.
        'service_user': dict(auth, send_service_user_token='True'),
        'filter_scheduler': {'enabled_filters': ','.join([
            'ComputeFilter', 'ComputeCapabilitiesFilter',
            'ImagePropertiesFilter', 'NUMATopologyFilter'])},
        'libvirt': {'virt_type': 'qemu', 'cpu_mode': 'none'},
        'compute': {'max_disk_devices_to_attach': '8'},
        'oslo_concurrency': {'lock_path': os.path.join(workdir, 'lock')},
        'oslo_messaging_notifications': {'driver': 'noop'},
        'vnc': {'enabled': 'False'},
    }
    if target is not None:
        spdk_socket, target_id, saved_config = target
        sections['spdk_vhost'] = {
            'spdk_rpc_socket': spdk_socket,
            'target_id': target_id,
            'spdk_saved_config': saved_config,
            # Its own DH-HMAC-CHAP keys, read by its own target.
            'nvme_key_dir': os.path.join(workdir, 'nvme-keys'),
            'vhost_socket_group': QEMU_GROUP,
            'vhost_socket_mode': '0660',
            'numa_policy': 'preferred',
            'guest_max_queues': '2',
            'guest_reconnect_timeout': '10',
            'guest_memory_source': 'memfd',
            'nova_check_reactor_overlap': 'False'}
    for section, context in (
            ('nova_sys_admin', 'nova.privsep.sys_admin_pctxt'),
            ('privsep_osbrick', 'os_brick.privileged.default'),
            ('spdk_vhost_privsep',
             'os_brick_connector.privileged.socket_access')):
        sections[section] = processes.privsep(conf_path, context)
    return _conf(sections)
