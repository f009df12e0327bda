"""Serve one OpenStack service's WSGI application on loopback.

Keystone, placement, nova-api, glance-api and neutron-api ship only a
WSGI application (production runs them under Apache or uWSGI). A test
needs no more than the standard library's WSGI server, with a thread per
request: an API's auth middleware validates a token while the caller
waits on the same keystone, and which reads chunked request bodies (what
glanceclient sends, e.g. Cinder's upload-to-image), which wsgiref does
not. Each application reads its configuration
from the environment (``OS_<SERVICE>_CONFIG_*``) when its module is
imported, which the caller sets.

    python -m tests.deployment.wsgi_server --app keystone.wsgi.api --port P
"""

import argparse
import importlib
import io
import socketserver
import sys
from wsgiref import simple_server


class ChunkedReader(io.RawIOBase):
    """The body of a ``Transfer-Encoding: chunked`` request, de-chunked."""

    def __init__(self, stream):
        super().__init__()
        self._stream = stream
        self._left = 0          # bytes left in the current chunk
        self._done = False

    def readable(self):
        return True

    def _next_chunk(self):
        if self._left == 0 and not self._done:
            line = self._stream.readline()
            size = int(line.split(b';', 1)[0].strip() or b'0', 16)
            if size == 0:
                # Trailers, up to the blank line that ends the body.
                while self._stream.readline() not in (b'\r\n', b'\n', b''):
                    pass
                self._done = True
            self._left = size

    def readinto(self, buffer):
        self._next_chunk()
        if self._done:
            return 0
        data = self._stream.read(min(len(buffer), self._left))
        if not data:
            raise IOError('chunked request body ended early')
        buffer[:len(data)] = data
        self._left -= len(data)
        if self._left == 0:
            self._stream.readline()     # the CRLF after each chunk
        return len(data)


def dechunking(application):
    """``application`` reading chunked bodies as a plain, ended input."""

    def wrapped(environ, start_response):
        encoding = environ.get('HTTP_TRANSFER_ENCODING', '').lower()
        if 'chunked' in encoding:
            environ['wsgi.input'] = io.BufferedReader(
                ChunkedReader(environ['wsgi.input']))
            environ['wsgi.input_terminated'] = True
            environ.pop('CONTENT_LENGTH', None)
        return application(environ, start_response)
    return wrapped


class ThreadingServer(socketserver.ThreadingMixIn,
                      simple_server.WSGIServer):
    daemon_threads = True


class QuietHandler(simple_server.WSGIRequestHandler):
    """Requests go to the service's own log, not one line each to stderr."""

    def log_message(self, *args):
        pass


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='python -m tests.deployment.wsgi_server')
    parser.add_argument('--app', required=True,
                        help='module whose "application" is served')
    parser.add_argument('--preload', action='append', default=[],
                        help='modules to import before the application')
    parser.add_argument('--host', default='127.0.0.1')
    parser.add_argument('--port', type=int, required=True)
    args = parser.parse_args(argv)
    # The services parse sys.argv as their own command line.
    sys.argv[1:] = []
    for module in args.preload:
        importlib.import_module(module)
    application = importlib.import_module(args.app).application
    server = simple_server.make_server(
        args.host, args.port, dechunking(application),
        server_class=ThreadingServer, handler_class=QuietHandler)
    with server:
        server.serve_forever()
    return 0


if __name__ == '__main__':
    sys.exit(main())
