"""Serve keystone's WSGI application on loopback: a test's keystone.

Keystone ships only a WSGI application (production runs it under Apache
or uWSGI). A test needs no more than the standard library's WSGI server,
with a thread per request: cinder-api's auth middleware validates a
token while tempest waits on the same keystone.

    python -m tests.deployment.keystone_wsgi --config-file F --port P
"""

import argparse
import os
import socketserver
import sys
from wsgiref import simple_server


class ThreadingServer(socketserver.ThreadingMixIn,
                      simple_server.WSGIServer):
    daemon_threads = True


class QuietHandler(simple_server.WSGIRequestHandler):
    """Requests go to keystone's own log, not one line each to stderr."""

    def log_message(self, *args):
        pass


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='python -m tests.deployment.keystone_wsgi')
    parser.add_argument('--config-file', required=True)
    parser.add_argument('--host', default='127.0.0.1')
    parser.add_argument('--port', type=int, required=True)
    args = parser.parse_args(argv)
    # Keystone reads its configuration when its application module is
    # imported: the files from the environment, options from sys.argv.
    os.environ['OS_KEYSTONE_CONFIG_FILES'] = os.path.abspath(
        args.config_file)
    sys.argv[1:] = []
    from keystone.wsgi import api

    server = simple_server.make_server(
        args.host, args.port, api.application,
        server_class=ThreadingServer, handler_class=QuietHandler)
    with server:
        server.serve_forever()
    return 0


if __name__ == '__main__':
    sys.exit(main())
