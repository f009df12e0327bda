"""A tiny raw JSON-RPC client for tests: whole responses, no wrapping.

Tests compare exact error codes and messages, so this client returns the
response dict as the target sent it. It frames responses the way SPDK's
rpc.py does (incremental raw_decode), not by newlines.
"""

import itertools
import json
import socket

_ids = itertools.count(1)


class RawClient(object):
    def __init__(self, socket_path, timeout=60.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(socket_path)
        self._buf = ''

    def close(self):
        self.sock.close()

    def send_raw(self, data):
        self.sock.sendall(data)

    def recv(self):
        decoder = json.JSONDecoder()
        while True:
            text = self._buf.lstrip()
            if text:
                try:
                    obj, end = decoder.raw_decode(text)
                    self._buf = text[end:]
                    return obj
                except ValueError:
                    pass
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError('connection closed by the target')
            self._buf += chunk.decode()

    def call(self, method, params=None):
        request = {'jsonrpc': '2.0', 'method': method, 'id': next(_ids)}
        if params is not None:
            request['params'] = params
        self.send_raw(json.dumps(request, indent=2).encode())
        return self.recv()


def call(socket_path, method, params=None):
    client = RawClient(socket_path)
    try:
        return client.call(method, params)
    finally:
        client.close()
