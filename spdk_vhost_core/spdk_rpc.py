"""The one SPDK JSON-RPC client used by Cinder, os-brick and Nova code.

SPDK speaks JSON-RPC 2.0 over a stream socket (Unix or TCP), one JSON
object per request and per reply, with no other framing. This client
speaks it itself, on the standard library alone, rather than through the
``spdk`` package's ``JSONRPCClient``: that client's ``call()`` hides
SPDK's error code in a formatted text (callers must branch on the code,
see :mod:`spdk_vhost_core.exception`), its ``recv()`` counts the
timeout in CPU time, decodes each 4 KiB chunk alone (a UTF-8 character
split between chunks corrupts the reply) and adds a log handler per
construction; living with those meant overriding its private parts.
Here every socket operation ends by one wall-clock deadline per call,
reply bytes are decoded incrementally, and this module logs, with
secrets masked. A target on another host is reached through its node's
agent instead of a socket (:mod:`rpc_transport`): the same calls, the
same errors.
"""

import socket
import threading
import time

from oslo_log import log

from spdk_vhost_core import exception as exc
from spdk_vhost_core import rpc_transport
from spdk_vhost_core import spdk_rpc_bdev
from spdk_vhost_core import spdk_rpc_export

LOG = log.getLogger(__name__)

DEFAULT_SOCKET = '/var/tmp/spdk.sock'


class _Unread(Exception):
    """The target reset the connection without reading the request."""


class SpdkClient(spdk_rpc_bdev.FrameworkMethods,
                 spdk_rpc_bdev.BdevMethods,
                 spdk_rpc_bdev.LvolMethods,
                 spdk_rpc_bdev.RaidMethods,
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
                 timeout=60.0, connect_retries=5, retry_interval=1.0,
                 agent=None):
        if address is not None and port is None:
            raise ValueError('an SPDK RPC address needs a port')
        if timeout <= 0:
            raise ValueError('timeout must be positive, not %r' % timeout)
        self._socket_path = socket_path
        self._address = address
        self._port = port
        # A target on another host: its node's agent
        # (rpc_transport.Agent), instead of the target's own socket.
        self._agent = agent
        self._timeout = timeout
        self._retries = max(0, int(connect_retries))
        self._retry_interval = retry_interval
        self._lock = threading.Lock()
        self._conn = None
        self._observers = []

    @classmethod
    def from_conf(cls, conf):
        """Build a client from a group holding the RPC options.

        ``conf`` is e.g. ``CONF.spdk_vhost`` (Nova, os-brick) or a Cinder
        backend's ``configuration`` object.
        """
        agent = None
        # Only Cinder registers the agent options: a compute host drives
        # its own target.
        if getattr(conf, 'spdk_agent_url', None):
            agent = rpc_transport.Agent(
                conf.spdk_agent_url, conf.spdk_agent_user,
                conf.spdk_agent_password, conf.spdk_agent_ca_file)
        return cls(socket_path=conf.spdk_rpc_socket,
                   address=conf.spdk_rpc_address,
                   port=conf.spdk_rpc_port,
                   timeout=conf.spdk_rpc_timeout,
                   connect_retries=conf.spdk_rpc_connect_retries,
                   retry_interval=conf.spdk_rpc_retry_interval,
                   agent=agent)

    @property
    def through_agent(self):
        """Whether the target is on another host, behind its agent."""
        return self._agent is not None

    @property
    def target(self):
        """Where the target is, for messages."""
        if self._agent is not None:
            return self._agent.url
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

    def observe(self, observer):
        """Have ``observer(method, params, result)`` see every call.

        It runs after each call, failed ones too (``result`` None: a
        failed call may still have changed something), for a cache that
        must follow every change made through this client. An observer
        that raises is logged; the call's own result or error stands.
        """
        self._observers.append(observer)

    def call(self, method, params=None):
        """Run one RPC and return its ``result``.

        Raises a subclass of :class:`exception.SpdkRpcError`, never
        anything from the spdk package or the socket layer.
        """
        start = time.monotonic()
        outcome, result = 'ok', None
        try:
            with self._lock:
                result = self._exchange(method, params)
            return result
        except exc.SpdkRpcError as err:
            outcome = '%s(%s)' % (type(err).__name__, err.code)
            raise
        finally:
            LOG.debug('SPDK RPC %(method)s %(params)s on %(target)s: '
                      '%(outcome)s in %(secs).3fs',
                      {'method': method, 'params': exc.mask_params(params),
                       'target': self.target, 'outcome': outcome,
                       'secs': time.monotonic() - start})
            self._notify(method, params or {}, result)

    def _notify(self, method, params, result):
        for observer in self._observers:
            try:
                observer(method, params, result)
            except Exception:
                LOG.exception('Observer %(observer)r of SPDK RPC '
                              '%(method)s failed; the call stands',
                              {'observer': observer, 'method': method})

    # Everything below runs with self._lock held.

    def _exchange(self, method, params):
        if self._conn is not None and self._conn.readable():
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
        if self._conn is None:
            self._connect(method, params)
        try:
            return self._conn.send(method, params, self._timeout)
        except socket.timeout as err:
            self._drop()
            raise exc.Timeout(method, params, message='sending to %s took '
                              'over %ss' % (self.target, self._timeout)
                              ) from err

    def _receive(self, method, params):
        conn = self._conn
        try:
            return conn.recv()
        except socket.timeout as err:
            self._drop()
            raise exc.Timeout(
                method, params, message='no reply from %s within %ss'
                % (self.target, self._timeout)) from err
        except rpc_transport.Closed as err:
            self._drop()
            raise exc.ProtocolError(
                method, params, message='%s closed the connection before '
                'a complete reply' % self.target) from err
        except rpc_transport.MalformedReply as err:
            self._drop()
            raise exc.ProtocolError(method, params, message='reply from %s '
                                    'is not JSON-RPC: %s' % (self.target, err)
                                    ) from err
        except ConnectionResetError as err:
            self._drop()
            if not conn.replied:
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
                self._conn = self._open()
                return
            except OSError as err:
                last = err
            LOG.debug('SPDK target %(target)s not reachable (attempt '
                      '%(n)d of %(total)d): %(err)s',
                      {'target': self.target, 'n': attempt,
                       'total': attempts, 'err': last})
            if attempt < attempts:
                time.sleep(self._retry_interval)
        raise exc.TargetUnreachable(
            method, params, message='cannot connect to %s after %d '
            'attempt(s): %s' % (self.target, attempts, last)) from last

    def _open(self):
        """A connection to the target (host names are resolved)."""
        if self._agent is not None:
            return self._agent.connect(self._timeout)
        return rpc_transport.SocketConnection(rpc_transport.open_socket(
            self._socket_path, self._address, self._port, self._timeout))

    def _drop(self):
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
