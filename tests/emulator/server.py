"""The emulator's JSON-RPC 2.0 server on a Unix stream socket.

It behaves like SPDK's jsonrpc server where clients can see it:
requests are JSON values on a byte stream with no framing (rpc.py sends
``json.dumps(req, indent=2)``), each response is one JSON object followed
by a newline, malformed JSON makes the server drop the connection without
a reply, and a request that grows past ``MAX_REQUEST`` bytes without
completing is dropped too. Each client gets its own thread; the dispatcher
serialises access to the target state.
"""

import json
import logging
import os
import socket
import threading

from tests.emulator import errors

LOG = logging.getLogger(__name__)

MAX_REQUEST = 1024 * 1024
_WHITESPACE = b' \t\r\n'


class MalformedRequest(Exception):
    """The stream holds bytes that can never become a JSON value."""


def split_value(buf):
    """Return (value_bytes, rest) for the first complete JSON value.

    ``(None, buf)`` when more bytes are needed. Only objects and arrays
    are accepted at top level, as SPDK does. A scanner rather than trial
    parsing tells "incomplete" from "malformed" without ambiguity.
    """
    start = 0
    while start < len(buf) and buf[start] in _WHITESPACE:
        start += 1
    if start == len(buf):
        return None, b''
    if buf[start] not in b'{[':
        raise MalformedRequest(buf[start:start + 16])
    depth = 0
    in_string = escaped = False
    for i in range(start, len(buf)):
        ch = buf[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == 0x5c:  # backslash
                escaped = True
            elif ch == 0x22:  # quote
                in_string = False
        elif ch == 0x22:
            in_string = True
        elif ch in b'{[':
            depth += 1
        elif ch in b'}]':
            depth -= 1
            if depth == 0:
                return buf[start:i + 1], buf[i + 1:]
    return None, buf[start:]


def _response(req_id, result=None, error=None):
    resp = {'jsonrpc': '2.0', 'id': req_id}
    if error is not None:
        resp['error'] = error.to_json()
    else:
        resp['result'] = result
    return resp


class RpcServer(object):
    """Serves ``dispatch(method, params)`` on ``socket_path``.

    ``dispatch`` returns the result or raises ``errors.RpcError``; any other
    exception becomes -32603 with its text (logged) and the server goes on.
    """

    def __init__(self, socket_path, dispatch):
        self.socket_path = socket_path
        self._dispatch = dispatch
        self._sock = None
        self._thread = None
        self._stopping = threading.Event()
        self._conns = set()
        self._conns_lock = threading.Lock()

    def start(self):
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(self.socket_path)
        sock.listen(64)
        self._sock = sock
        self._thread = threading.Thread(target=self._accept_loop,
                                        name='rpc-accept', daemon=True)
        self._thread.start()

    def stop(self):
        self._stopping.set()
        if self._sock is not None:
            try:
                # Wakes accept() up; close alone does not on Linux.
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                LOG.debug('listening socket already shut down')
            self._sock.close()
        if self._thread is not None:
            self._thread.join(5)
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            _shutdown(conn)
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)

    def _accept_loop(self):
        while not self._stopping.is_set():
            try:
                conn, _addr = self._sock.accept()
            except OSError:
                if self._stopping.is_set():
                    return
                LOG.exception('accept failed')
                continue
            with self._conns_lock:
                self._conns.add(conn)
            threading.Thread(target=self._serve, args=(conn,),
                             name='rpc-client', daemon=True).start()

    def _serve(self, conn):
        try:
            self._serve_requests(conn)
        except (OSError, MalformedRequest) as err:
            LOG.info('closing RPC connection: %s', err)
        finally:
            with self._conns_lock:
                self._conns.discard(conn)
            conn.close()

    def _serve_requests(self, conn):
        buf = b''
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                return
            buf += chunk
            while True:
                raw, buf = split_value(buf)
                if raw is None:
                    break
                reply = self._handle_raw(raw)
                if reply is not None:
                    conn.sendall(json.dumps(reply).encode() + b'\n')
            if len(buf) > MAX_REQUEST:
                raise MalformedRequest('request larger than %d bytes'
                                       % MAX_REQUEST)

    def _handle_raw(self, raw):
        try:
            req = json.loads(raw)
        except ValueError as err:
            raise MalformedRequest(str(err)) from err
        if not isinstance(req, dict) or not isinstance(
                req.get('method'), str) or req.get('jsonrpc') != '2.0':
            return _response(req.get('id') if isinstance(req, dict)
                             else None,
                             error=errors.RpcError(errors.INVALID_REQUEST,
                                                   'Invalid request'))
        try:
            result = self._dispatch(req['method'], req.get('params'))
            reply = _response(req.get('id'), result=result)
        except errors.RpcError as err:
            reply = _response(req.get('id'), error=err)
        except Exception as err:
            LOG.exception('handler for %s failed', req['method'])
            reply = _response(req.get('id'), error=errors.RpcError(
                errors.INTERNAL_ERROR, str(err)))
        # A request without an id is a notification: no reply.
        return reply if 'id' in req else None


def _shutdown(conn):
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        LOG.debug('client connection already closed')
