"""tempest.conf for running the plugin's API tests against a deployment.

Tempest has no noauth mode: every client authenticates against keystone
(``[identity] uri_v3``) and takes the volume endpoint from its catalog,
so it needs a keystone whose catalog lists a keystone-authenticated
cinder-api as ``volumev3`` (``keystone_api.KeystoneFrontEnd``), and its
admin credentials. Tempest creates a project and users per test class
with them (dynamic credentials). This writes the rest: the backend, its
capabilities, the API microversions, and the plugin's ``[spdk_vhost]``
options (with the SPDK socket, so the tests also check the limits SPDK
enforces).
"""

import configparser

from tests.deployment import cinder_conf
from tests.deployment import deployment


# What unmanage leaves behind, for tempest's manage tests: the volume's
# lvol renamed, the snapshot's lvol kept (devstack/lib/tempest agrees).
MANAGE_VOLUME_REF = 'source-name,unmanaged-volume-%s'
MANAGE_SNAPSHOT_REF = 'source-name,snapshot-%s'


def build(dep, keystone_uri, admin_password, admin_user='admin',
          admin_project='admin', region='RegionOne',
          volume_type='high-iops', lock_path=None, compute=None):
    """The configuration; ``compute`` (image, flavor[, alt flavor]) adds Nova.

    With Nova the scenario tests run too, seeing the guest through its
    console (the deployment has no guest network): the image must be
    the test guest in report mode, the flavor hugepage-backed with a
    root disk. Tempest's own volume tests also need neutron said to be
    there (their classes ask for a default network): tempest creates no
    network then, and Nova boots the servers without one.
    """
    conf = configparser.ConfigParser(interpolation=None)
    conf['DEFAULT'] = {'log_file': 'tempest.log'}
    if lock_path:
        conf['oslo_concurrency'] = {'lock_path': lock_path}
    conf['identity'] = {'uri_v3': keystone_uri, 'auth_version': 'v3',
                        'region': region}
    conf['auth'] = {'use_dynamic_credentials': 'True',
                    'admin_username': admin_user,
                    'admin_password': admin_password,
                    'admin_project_name': admin_project,
                    'admin_domain_name': 'Default'}
    conf['service_available'] = {'cinder': 'True', 'nova': 'False',
                                 'glance': 'False', 'neutron': 'False',
                                 'swift': 'False'}
    conf['volume'] = {'catalog_type': 'volumev3',
                      'backend_names': cinder_conf.BACKEND,
                      'storage_protocol': 'vhost-user',
                      'vendor_name': 'SPDK',
                      'min_microversion': '3.0',
                      'max_microversion': deployment.API_VERSION,
                      'manage_volume_ref': MANAGE_VOLUME_REF,
                      'manage_snapshot_ref': MANAGE_SNAPSHOT_REF}
    conf['volume-feature-enabled'] = {'snapshot': 'True', 'clone': 'True',
                                      'extend_attached_volume': 'False',
                                      'backup': 'True',
                                      # Not on a cluster: tempest_run.
                                      'manage_volume': 'False',
                                      'manage_snapshot': 'True'}
    conf['spdk_vhost'] = {'api_tests': 'True', 'scenario_tests': 'False',
                          'backend_name': cinder_conf.BACKEND,
                          'volume_type': volume_type,
                          'spdk_rpc_socket': dep.target.socket_path}
    if compute:
        _add_compute(conf, *compute)
    return conf


def _add_compute(conf, image, flavor, flavor_alt=None):
    conf['service_available'].update(nova='True', glance='True')
    conf['compute'] = {'image_ref': image, 'flavor_ref': flavor,
                       'build_timeout': '600',
                       # multiattach needs 2.60
                       'max_microversion': 'latest'}
    if flavor_alt:
        conf['compute']['flavor_ref_alt'] = flavor_alt
    conf['compute-feature-enabled'] = {'console_output': 'True'}
    conf['validation'] = {'run_validation': 'False'}
    conf['volume-feature-enabled']['extend_attached_volume'] = 'True'
    conf['spdk_vhost'].update(scenario_tests='True', hugepage_flavor=flavor,
                              guest_access='console')


def for_tempest_tests(conf, multiattach_type):
    """``conf`` (with compute) for tempest's own tests: see build().

    ``multiattach_type`` names a volume type with multiattach on.
    """
    conf['service_available']['neutron'] = 'True'
    conf['auth']['create_isolated_networks'] = 'False'
    conf['compute-feature-enabled'].update(volume_multiattach='True',
                                           resize='True')
    conf['volume']['volume_type_multiattach'] = multiattach_type
    return conf


def write(path, conf):
    with open(path, 'w') as out:
        conf.write(out)
