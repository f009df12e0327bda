"""JSON-RPC errors as SPDK reports them.

SPDK is not uniform: some handlers answer ``-errno`` as the code, others
wrap the same errno in -32602 (invalid params) or -32603 (internal). The
helpers keep each handler's choice explicit at the call site.
"""

import os

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class RpcError(Exception):
    """An error answered to the client as ``{"code", "message"}``."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message

    def to_json(self):
        return {'code': self.code, 'message': self.message}


def errno_error(err, code=None):
    """``-errno`` (or the given JSON-RPC code) with strerror's text."""
    return RpcError(-err if code is None else code, os.strerror(err))


def invalid_params(err):
    """SPDK's asynchronous callbacks report errno under -32602."""
    return errno_error(err, INVALID_PARAMS)


def internal(err):
    return errno_error(err, INTERNAL_ERROR)
