# Every SPDK target of these tests is the test's own: the drivers save
# nothing unless a test names its file. The option's real default, the
# file of the host's SPDK service (/var/lib/spdk), is no test's business;
# tests/unit checks it.
from oslo_config import cfg

from spdk_vhost_core import options

cfg.set_defaults(options.rpc_opts, spdk_saved_config='')
