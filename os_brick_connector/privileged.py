"""Root-only work of the connector: who may open a vhost-user socket.

SPDK (root) creates the socket; QEMU runs as another user, and only it
should connect. Changing owner and mode needs CAP_CHOWN and CAP_FOWNER,
which os-brick's own privsep context does not hold, hence this context.
Its daemon is started like os-brick's (rootwrap must allow
``privsep-helper --privsep_context
os_brick_connector.privileged.socket_access``); the section of its
options is ``[spdk_vhost_privsep]``.
"""

import os
import stat

from oslo_privsep import capabilities as caps
from oslo_privsep import priv_context

socket_access = priv_context.PrivContext(
    __name__,
    cfg_section='spdk_vhost_privsep',
    pypath=__name__ + '.socket_access',
    capabilities=[caps.CAP_CHOWN, caps.CAP_FOWNER],
)


@socket_access.entrypoint
def set_socket_access(path, uid, gid, mode):
    """chown/chmod a Unix socket; -1 keeps the owner or group.

    Refuses anything but a socket, and never follows a symlink: a
    privileged chown must not be turned against another file.
    """
    info = os.lstat(path)
    if not stat.S_ISSOCK(info.st_mode):
        raise ValueError('%s is not a socket' % path)
    os.chown(path, uid, gid, follow_symlinks=False)
    os.chmod(path, mode)
