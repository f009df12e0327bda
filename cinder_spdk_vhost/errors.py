"""SPDK client errors as the Cinder exceptions the volume manager expects.

The manager only knows Cinder's exception types; a bare SpdkRpcError
would reach the user as an unexplained failure.
"""

import contextlib

from cinder import exception

from spdk_vhost_core import exception as rpc_exc


@contextlib.contextmanager
def translated(action):
    """Re-raise any SPDK RPC failure as VolumeBackendAPIException."""
    try:
        yield
    except rpc_exc.SpdkRpcError as err:
        raise exception.VolumeBackendAPIException(
            data='%s: %s' % (action, err)) from err
