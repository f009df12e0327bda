"""An SpdkVhostDriver set up outside cinder-volume, as cinder-volume would.

For tests and tools (stress, benchmark) that drive the real driver without
a Cinder service: its options are set in its backend section of the global
CONF, then do_setup and check_for_setup_error run as at service start.
The driver's locks are ``cinder.coordination``'s, which cinder-volume
starts: here :class:`Coordination` does. Import only in processes that do
not import nova.
"""

from cinder import coordination
from cinder.volume import configuration
from cinder.volume import driver as cinder_driver
import fixtures
from oslo_config import cfg
from oslo_utils import excutils

from cinder_spdk_vhost import driver as spdk_driver
from testbed import spdk_build

BACKEND = 'spdk'


class Coordination(fixtures.Fixture):
    """``coordination.COORDINATOR`` started as cinder-volume starts it.

    On ``backend_url`` when given (a test's etcd), else on a ``file://``
    backend in ``directory`` (one that several processes share, as the
    workers of one host) or in a temp dir of its own. Stopped at cleanUp.
    There is one coordinator per process, so a coordinator left started
    is stopped first: the driver's locks must be on this backend.
    """

    def __init__(self, backend_url=None, directory=None):
        super().__init__()
        self.backend_url = backend_url
        self.directory = directory

    def _setUp(self):
        url = self.backend_url
        if url is None:
            url = 'file://' + (self.directory or
                               self.useFixture(fixtures.TempDir()).path)
        coordination.COORDINATOR.stop()
        cfg.CONF.set_override('backend_url', url, group='coordination')
        self.addCleanup(cfg.CONF.clear_override, 'backend_url',
                        group='coordination')
        coordination.COORDINATOR.start()
        self.addCleanup(coordination.COORDINATOR.stop)
        self.url = url


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
    options.setdefault('spdk_dd_path', spdk_build.app_path('spdk_dd'))
    # No sweeping task left behind in a test or tool process.
    options.setdefault('spdk_sweep_interval', 0)
    for name, value in options.items():
        cfg.CONF.set_override(name, value, group=BACKEND)
    drv.do_setup(None)
    try:
        drv.check_for_setup_error()
    except Exception:
        with excutils.save_and_reraise_exception():
            drv.client.close()
    return drv
