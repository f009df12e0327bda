"""An SpdkVhostDriver set up outside cinder-volume, as cinder-volume would.

For tests and tools (stress, benchmark) that drive the real driver without
a Cinder service: its options are set in its backend section of the global
CONF, then do_setup and check_for_setup_error run as at service start.
Import only in processes that do not import nova.
"""

from cinder.volume import configuration
from cinder.volume import driver as cinder_driver
from oslo_config import cfg
from oslo_utils import excutils

from cinder_spdk_vhost import driver as spdk_driver

BACKEND = 'spdk'


def make_driver(host, **options):
    """A set-up driver whose backend section holds ``options``.

    Its target is a throwaway one: nothing is saved unless
    ``spdk_saved_config`` names a file.
    """
    conf = configuration.Configuration(cinder_driver.volume_opts,
                                       config_group=BACKEND)
    drv = spdk_driver.SpdkVhostDriver(configuration=conf, host=host)
    options.setdefault('volume_backend_name', BACKEND)
    options.setdefault('spdk_saved_config', '')
    for name, value in options.items():
        cfg.CONF.set_override(name, value, group=BACKEND)
    drv.do_setup(None)
    try:
        drv.check_for_setup_error()
    except Exception:
        with excutils.save_and_reraise_exception():
            drv.client.close()
    return drv
