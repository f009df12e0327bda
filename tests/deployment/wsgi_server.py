"""Serve one OpenStack service's WSGI application on loopback.

Keystone, placement, nova-api, glance-api and neutron-api ship only a
WSGI application (production runs them under Apache or uWSGI). A test
needs no more than the standard library's WSGI server, with a thread per
request: an API's auth middleware validates a token while the caller
waits on the same keystone. Each application reads its configuration
from the environment (``OS_<SERVICE>_CONFIG_*``) when its module is
imported, which the caller sets.

    python -m tests.deployment.wsgi_server --app keystone.wsgi.api --port P
"""

import argparse
import importlib
import socketserver
import sys
from wsgiref import simple_server


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
        args.host, args.port, application,
        server_class=ThreadingServer, handler_class=QuietHandler)
    with server:
        server.serve_forever()
    return 0


if __name__ == '__main__':
    sys.exit(main())
