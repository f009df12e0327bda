"""The two ways a JSON-RPC request reaches an SPDK target.

A target on this host is reached on its own socket (Unix, or TCP where
an operator exposed one): one JSON object per request and per reply, no
other framing. A target on another host is reached through that host's
``spdk-vhost-agent`` (:mod:`spdk_vhost_agent`): the same JSON objects,
each in an HTTPS POST with basic credentials, over a connection kept
open between calls. Both connections offer one interface to
:class:`spdk_vhost_core.spdk_rpc.SpdkClient`: ``send`` one request,
``recv`` its reply, ``readable`` (the peer closed an idle connection),
``close``.
"""

import base64
import codecs
import http.client
import itertools
import json
import select
import socket
import ssl
import time
import urllib.parse

from oslo_log import log

LOG = log.getLogger(__name__)

_CHUNK = 65536
#: The largest reply an agent may send (a big target's bdev list).
MAX_REPLY = 64 << 20


class MalformedReply(Exception):
    """The bytes cannot start a JSON-RPC reply."""


class Closed(Exception):
    """The target closed the connection before a complete reply."""


def request_body(req_id, method, params):
    """One JSON-RPC 2.0 request, as SPDK's own client writes it."""
    request = {'jsonrpc': '2.0', 'method': method, 'id': req_id}
    if params:
        # SPDK refuses "params" on methods that take none, even {}.
        request['params'] = params
    return json.dumps(request).encode('utf-8')


class _Deadline(object):
    """One wall-clock deadline per call, armed on the socket each time."""

    def __init__(self):
        self._ids = itertools.count(1)
        self._deadline = 0.0
        self.replied = False  # a reply byte arrived for this request

    def _start(self, timeout):
        self._deadline = time.monotonic() + timeout
        self.replied = False
        return next(self._ids)

    def expired(self):
        return time.monotonic() >= self._deadline

    def _arm(self, sock):
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout('SPDK RPC deadline passed')
        sock.settimeout(left)


def _readable(sock):
    """Bytes (or EOF) waiting on an idle socket: it is unusable."""
    if sock is None:
        return True
    try:
        readable, _w, _x = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


class SocketConnection(_Deadline):
    """One stream socket to the target; one request and its reply at a time."""

    def __init__(self, sock):
        super().__init__()
        self.sock = sock

    def send(self, method, params, timeout):
        """Send one request; its reply must come within ``timeout``."""
        req_id = self._start(timeout)
        self._arm(self.sock)
        self.sock.sendall(request_body(req_id, method, params))
        return req_id

    def recv(self):
        """The next reply: the first complete JSON value on the stream."""
        decoder = codecs.getincrementaldecoder('utf-8')('replace')
        text = ''
        while True:
            self._arm(self.sock)
            data = self.sock.recv(_CHUNK)
            if not data:
                raise Closed()
            text += decoder.decode(data)
            text = text.lstrip()
            if not text:
                continue
            self.replied = True
            if not text.startswith('{'):
                raise MalformedReply(text[:80])
            try:
                reply, _end = json.JSONDecoder().raw_decode(text)
            except ValueError:
                continue  # not complete yet
            return reply

    def readable(self):
        return _readable(self.sock)

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError as err:
            LOG.debug('Shutting down the SPDK RPC socket: %s', err)
        finally:
            self.sock.close()


def open_socket(socket_path, address, port, timeout):
    """A connected socket to a target's own listener."""
    if address is not None:
        return socket.create_connection((address, port), timeout=timeout)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(socket_path)
    except OSError:
        sock.close()
        raise
    return sock


class Agent(object):
    """Where a node's agent listens, and how to prove who we are."""

    def __init__(self, url, user, password, ca_file=None):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != 'https' or not parts.hostname:
            raise ValueError('an spdk-vhost-agent URL is https://HOST:PORT, '
                             'not %r' % url)
        self.url = url
        self.host = parts.hostname
        self.port = parts.port or 443
        self.path = parts.path or '/'
        token = base64.b64encode(
            ('%s:%s' % (user, password)).encode('utf-8')).decode('ascii')
        self.authorization = 'Basic ' + token
        # The system's CAs unless the operator names the CA of the cloud.
        self.context = ssl.create_default_context(cafile=ca_file)

    def connect(self, timeout):
        conn = http.client.HTTPSConnection(
            self.host, self.port, timeout=timeout, context=self.context)
        conn.connect()
        return HttpsConnection(self, conn)


class HttpsConnection(_Deadline):
    """One kept-alive HTTPS connection to a node's agent."""

    def __init__(self, agent, conn):
        super().__init__()
        self.agent = agent
        self.http = conn

    def send(self, method, params, timeout):
        req_id = self._start(timeout)
        self._arm(self.http.sock)
        self.http.request('POST', self.agent.path,
                          body=request_body(req_id, method, params),
                          headers={'Content-Type': 'application/json',
                                   'Authorization': self.agent.authorization})
        return req_id

    def recv(self):
        self._arm(self.http.sock)
        try:
            response = self.http.getresponse()
        except http.client.RemoteDisconnected as err:
            # Unlike a socket reset with the request unread, an agent may
            # have run the call before it went: never send it again.
            raise Closed() from err
        except http.client.HTTPException as err:
            raise MalformedReply(str(err)) from err
        self.replied = True
        body = response.read(MAX_REPLY + 1)
        if response.status != http.client.OK:
            raise MalformedReply('HTTP %d %s from the agent%s' % (
                response.status, response.reason,
                ': the agent refused spdk_agent_user/spdk_agent_password'
                if response.status == http.client.UNAUTHORIZED else ''))
        if len(body) > MAX_REPLY:
            raise MalformedReply('a reply over %d bytes' % MAX_REPLY)
        try:
            return json.loads(body.decode('utf-8'))
        except ValueError as err:
            raise MalformedReply(body[:80]) from err

    def readable(self):
        return _readable(self.http.sock)

    def close(self):
        self.http.close()
