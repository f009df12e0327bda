"""The agent's HTTPS listener: JSON-RPC in a POST, after credentials.

Why an agent (the design note in the contributor guide's architecture
page has the whole argument): SPDK's RPC server listens on a Unix socket
only, and three things must be written on the storage node itself (key
files, the saved config, the record of connected hosts). So each
storage node runs this small service: the only way into its target from
the network. TLS is not optional, every request must carry the
configured credentials (compared in constant time; a failure is logged
with the peer's address), and a request body is bounded. Requests are
served in threads; the SPDK client serialises them on the target's one
socket, as SPDK runs one RPC at a time anyway.
"""

import base64
import hmac
import http
import http.server
import json
import ssl
import sys

from oslo_log import log

LOG = log.getLogger(__name__)

MAX_REQUEST = 1 << 20
#: Seconds an idle kept-alive connection stays open.
IDLE_TIMEOUT = 300


def _authorization(user, password):
    token = base64.b64encode(('%s:%s' % (user, password)).encode('utf-8'))
    return ('Basic ' + token.decode('ascii')).encode('ascii')


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    timeout = IDLE_TIMEOUT

    def do_POST(self):
        given = self.headers.get('Authorization', '').encode(
            'utf-8', 'replace')
        if not hmac.compare_digest(given, self.server.authorization):
            LOG.warning('Refused a request from %s: wrong or missing '
                        'credentials', self.client_address[0])
            self._reply(http.HTTPStatus.UNAUTHORIZED, b'',
                        {'WWW-Authenticate': 'Basic realm="spdk-vhost"'})
            return
        try:
            length = int(self.headers.get('Content-Length', ''))
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_REQUEST:
            self._reply(http.HTTPStatus.LENGTH_REQUIRED
                        if length < 0 else
                        http.HTTPStatus.REQUEST_ENTITY_TOO_LARGE, b'')
            self.close_connection = True
            return
        try:
            request = json.loads(self.rfile.read(length).decode('utf-8'))
        except ValueError:
            self._reply(http.HTTPStatus.BAD_REQUEST, b'')
            return
        reply = self.server.dispatch(request)
        self._reply(http.HTTPStatus.OK, json.dumps(reply).encode('utf-8'),
                    {'Content-Type': 'application/json'})

    def _reply(self, status, body, headers=None):
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self._reply(http.HTTPStatus.METHOD_NOT_ALLOWED, b'',
                    {'Allow': 'POST'})

    def log_message(self, fmt, *args):
        LOG.debug('%s %s', self.client_address[0], fmt % args)


class AgentServer(http.server.ThreadingHTTPServer):
    """Serves ``dispatch`` (request -> reply) on an HTTPS listener."""

    daemon_threads = True

    def __init__(self, address, port, cert_file, key_file, user, password,
                 dispatch):
        super().__init__((address, port), _Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(cert_file, key_file)
        # The handshake happens in the request's thread, at its first
        # read: a peer that stalls it holds up no one else.
        self.socket = context.wrap_socket(self.socket, server_side=True,
                                          do_handshake_on_connect=False)
        self.authorization = _authorization(user, password)
        self.dispatch = dispatch

    def handle_error(self, request, client_address):
        # A peer that fails the TLS handshake or goes away mid-request.
        LOG.info('Connection from %s ended: %s', client_address[0],
                 sys.exc_info()[1])
