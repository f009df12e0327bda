"""The one SPDK JSON-RPC client used by Cinder, os-brick and Nova code.

It wraps ``spdk.rpc.client.JSONRPCClient`` (the PyPI ``spdk`` package) but
uses only its ``send()`` and ``recv()``: ``call()`` hides SPDK's error code
in a formatted text, and callers must branch on that code (see
:mod:`os_brick_connector.exception`). Three things of that client are
worked around here:

* its ``recv()`` counts the timeout in CPU time (``time.process_time()``),
  so a target that trickles bytes or stays silent is waited on far past the
  timeout; every socket operation is bounded by a wall-clock deadline
  instead (:class:`_DeadlineSocket`);
* it decodes each 4 KiB chunk alone, so a UTF-8 character split between
  two chunks corrupts the reply; chunks are re-cut on character borders;
* it logs requests (with their params) through a stream handler it adds
  to its own logger on every construction; that logger is kept silent and
  this module logs instead, with secrets masked.
"""

import codecs
import logging
import select
import socket
import threading
import time

from oslo_log import log
from spdk.rpc import client as spdk_client

from os_brick_connector import config
from os_brick_connector import exception as exc
from os_brick_connector import spdk_rpc_bdev
from os_brick_connector import spdk_rpc_export

LOG = log.getLogger(__name__)

DEFAULT_SOCKET = '/var/tmp/spdk.sock'


class _MalformedReply(Exception):
    """Raised inside ``recv()``: the bytes cannot start a JSON-RPC reply."""


class _Unread(Exception):
    """The target reset the connection without reading the request."""


class _DeadlineSocket(object):
    """A socket whose blocking calls all end by one wall-clock deadline.

    JSONRPCClient reads ``self.sock``; putting this wrapper there bounds
    its CPU-time based wait without copying its receive loop.
    """

    def __init__(self, sock):
        self.raw = sock
        self._deadline = 0.0
        self._decoder = None
        self.replied = False  # a reply byte arrived since start()

    def start(self, timeout):
        """Arm the deadline for one request/reply exchange."""
        self._deadline = time.monotonic() + timeout
        self._decoder = codecs.getincrementaldecoder('utf-8')('replace')
        self.replied = False

    def expired(self):
        return time.monotonic() >= self._deadline

    def _arm(self):
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout('SPDK RPC deadline passed')
        self.raw.settimeout(left)

    def settimeout(self, _cpu_based_timeout):
        # JSONRPCClient passes a CPU-time based value; ours replaces it.
        self._arm()

    def sendall(self, data):
        self._arm()
        self.raw.sendall(data)

    def recv(self, bufsize):
        while True:
            self._arm()
            data = self.raw.recv(bufsize)
            if not data:
                return data
            text = self._decoder.decode(data)
            if text:
                break
        if not self.replied and text.strip():
            self.replied = True
            if not text.lstrip().startswith('{'):
                raise _MalformedReply(text.strip()[:80])
        return text.encode('utf-8')

    def shutdown(self, how):
        self.raw.shutdown(how)

    def close(self):
        self.raw.close()


class _JSONRPCClient(spdk_client.JSONRPCClient):
    """The spdk client, but closing its socket when connecting fails."""

    def _connect(self, addr, port):
        try:
            super()._connect(addr, port)
        except spdk_client.JSONRPCException:
            if self.sock is not None:
                self.sock.close()
                self.sock = None
            raise


def _one_line(err):
    """The spdk client's multi-line exception text, on one line."""
    return ' '.join(str(err).split())


def _quiet_spdk_logger(addr):
    """Drop the handler JSONRPCClient added and keep its logger silent."""
    logger = logging.getLogger('JSONRPCClient(%s)' % addr)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    # Set before construction too, so its "Setting log level" INFO lines
    # are not emitted either.
    logger.setLevel(logging.ERROR)


class SpdkClient(spdk_rpc_bdev.FrameworkMethods,
                 spdk_rpc_bdev.BdevMethods,
                 spdk_rpc_bdev.LvolMethods,
                 spdk_rpc_export.VhostMethods,
                 spdk_rpc_export.NvmfMethods,
                 spdk_rpc_export.NvmeMethods,
                 spdk_rpc_export.KeyringMethods):
    """Client of one SPDK target; safe to share between threads.

    One persistent connection, serialised by a lock, rather than one
    connection per call: SPDK runs RPCs one at a time on its app thread, so
    parallel connections would not make calls faster, while they would
    multiply the target's connections (SPDK caps them) and the spdk
    client's log handlers. A connection that failed, was closed by the
    target or has unexpected bytes waiting is dropped, and the next call
    reconnects; a request that could not be sent at all (the target
    restarted since the last call) is sent again once on a new connection.
    A request that was sent is never repeated: it may have been executed.
    """

    def __init__(self, socket_path=DEFAULT_SOCKET, address=None, port=None,
                 timeout=60.0, connect_retries=5, retry_interval=1.0):
        if address is not None and port is None:
            raise ValueError('an SPDK RPC address needs a port')
        if timeout <= 0:
            raise ValueError('timeout must be positive, not %r' % timeout)
        self._socket_path = socket_path
        self._address = address
        self._port = port
        self._timeout = timeout
        self._retries = max(0, int(connect_retries))
        self._retry_interval = retry_interval
        self._lock = threading.Lock()
        self._rpc = None
        self._sock = None

    @classmethod
    def from_conf(cls, conf):
        """Build a client from a group holding :data:`config.rpc_opts`.

        ``conf`` is e.g. ``CONF.spdk_vhost`` (Nova, os-brick) or a Cinder
        backend's ``configuration`` object.
        """
        return cls(socket_path=conf.spdk_rpc_socket,
                   address=conf.spdk_rpc_address,
                   port=conf.spdk_rpc_port,
                   timeout=conf.spdk_rpc_timeout,
                   connect_retries=conf.spdk_rpc_connect_retries,
                   retry_interval=conf.spdk_rpc_retry_interval)

    @staticmethod
    def register_opts(conf, group):
        """Register the RPC options in ``group`` of ``conf``."""
        conf.register_opts(config.rpc_opts, group=group)

    @property
    def target(self):
        """Where the target is, for messages."""
        if self._address is not None:
            return 'tcp:%s:%s' % (self._address, self._port)
        return 'unix:%s' % self._socket_path

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def close(self):
        """Close the connection; a later call opens a new one."""
        with self._lock:
            self._drop()

    def call(self, method, params=None):
        """Run one RPC and return its ``result``.

        Raises a subclass of :class:`exception.SpdkRpcError`, never
        anything from the spdk package or the socket layer.
        """
        start = time.monotonic()
        outcome = 'ok'
        try:
            with self._lock:
                return self._exchange(method, params)
        except exc.SpdkRpcError as err:
            outcome = '%s(%s)' % (type(err).__name__, err.code)
            raise
        finally:
            LOG.debug('SPDK RPC %(method)s %(params)s on %(target)s: '
                      '%(outcome)s in %(secs).3fs',
                      {'method': method, 'params': exc.mask_params(params),
                       'target': self.target, 'outcome': outcome,
                       'secs': time.monotonic() - start})

    # Everything below runs with self._lock held.

    def _exchange(self, method, params):
        if self._rpc is not None and self._stale():
            LOG.debug('SPDK RPC connection to %s went away; reconnecting',
                      self.target)
            self._drop()
        try:
            req_id = self._send(method, params)
            response = self._receive(method, params)
        except (OSError, _Unread):
            # The target never read the request (it had closed the idle
            # connection, e.g. while restarting): safe to send once more.
            self._drop()
            try:
                req_id = self._send(method, params)
            except OSError as err:
                self._drop()
                raise exc.ProtocolError(
                    method, params, message='sending to %s failed: %s'
                    % (self.target, err)) from err
            response = self._receive(method, params)
        return self._result(method, params, req_id, response)

    def _send(self, method, params):
        if self._rpc is None:
            self._connect(method, params)
        self._sock.start(self._timeout)
        try:
            return self._rpc.send(method, params)
        except socket.timeout as err:
            self._drop()
            raise exc.Timeout(method, params, message='sending to %s took '
                              'over %ss' % (self.target, self._timeout)
                              ) from err

    def _receive(self, method, params):
        try:
            return self._rpc.recv()
        except spdk_client.JSONRPCException as err:
            closed = self._rpc.sock is None
            expired = self._sock.expired()
            self._drop()
            if closed:
                raise exc.ProtocolError(
                    method, params, message='%s closed the connection '
                    'before a complete reply' % self.target) from err
            if expired:
                raise exc.Timeout(
                    method, params, message='no reply from %s within %ss'
                    % (self.target, self._timeout)) from err
            raise exc.ProtocolError(method, params,
                                    message=_one_line(err)) from err
        except _MalformedReply as err:
            self._drop()
            raise exc.ProtocolError(method, params, message='reply from %s '
                                    'is not JSON-RPC: %s' % (self.target, err)
                                    ) from err
        except ConnectionResetError as err:
            unread = not self._sock.replied
            self._drop()
            if unread:
                # A reset before any reply byte: the target closed with our
                # request still unread in its socket, so it never ran it.
                raise _Unread() from err
            raise exc.ProtocolError(method, params, message='connection to '
                                    '%s reset mid-reply' % self.target
                                    ) from err
        except OSError as err:
            self._drop()
            raise exc.ProtocolError(method, params, message='connection to '
                                    '%s failed: %s' % (self.target, err)
                                    ) from err

    def _result(self, method, params, req_id, response):
        problem = None
        if not isinstance(response, dict):
            problem = 'reply is not a JSON object'
        elif response.get('id') != req_id:
            problem = 'reply id %r, expected %r' % (response.get('id'), req_id)
        elif 'error' in response:
            raise exc.from_response(method, params, response['error'])
        elif 'result' not in response:
            problem = 'reply has neither result nor error'
        if problem:
            # The stream can no longer be trusted to be in step.
            self._drop()
            raise exc.ProtocolError(method, params, message='%s: %.200r'
                                    % (problem, response))
        return response['result']

    def _connect(self, method, params):
        attempts = self._retries + 1
        for attempt in range(1, attempts + 1):
            try:
                self._rpc = self._open()
                self._sock = _DeadlineSocket(self._rpc.sock)
                self._rpc.sock = self._sock
                return
            except (spdk_client.JSONRPCException, OSError) as err:
                last = err
            LOG.debug('SPDK target %(target)s not reachable (attempt '
                      '%(n)d of %(total)d): %(err)s',
                      {'target': self.target, 'n': attempt,
                       'total': attempts, 'err': _one_line(last)})
            if attempt < attempts:
                time.sleep(self._retry_interval)
        raise exc.TargetUnreachable(
            method, params, message='cannot connect to %s after %d '
            'attempt(s): %s' % (self.target, attempts, _one_line(last))
        ) from last

    def _open(self):
        if self._address is None:
            addr = self._socket_path
        else:
            # The spdk client only accepts IP literals; resolve names.
            info = socket.getaddrinfo(self._address, self._port,
                                      type=socket.SOCK_STREAM)
            addr = info[0][4][0]
        _quiet_spdk_logger(addr)
        try:
            return _JSONRPCClient(addr, self._port, timeout=self._timeout)
        finally:
            _quiet_spdk_logger(addr)

    def _stale(self):
        """An idle connection with bytes (or EOF) waiting is unusable."""
        try:
            readable, _w, _x = select.select([self._sock.raw], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def _drop(self):
        rpc, self._rpc, self._sock = self._rpc, None, None
        sock = rpc.sock if rpc is not None else None
        if sock is None:
            return
        rpc.sock = None
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError as err:
            LOG.debug('Shutting down the SPDK RPC socket: %s', err)
        finally:
            sock.close()
