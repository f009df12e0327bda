"""The test deployment's WSGI server reads chunked request bodies."""

import http.client
import socket
import threading
from wsgiref import simple_server

import testtools

from tests.deployment import wsgi_server


def echo_length(environ, start_response):
    length = environ.get('CONTENT_LENGTH')
    body = environ['wsgi.input'].read(*([int(length)] if length else []))
    start_response('200 OK', [('Content-Type', 'text/plain')])
    return [b'%d %s' % (len(body), body[:16])]


class TestChunkedBodies(testtools.TestCase):

    def setUp(self):
        super().setUp()
        server = simple_server.make_server(
            '127.0.0.1', 0, wsgi_server.dechunking(echo_length),
            server_class=wsgi_server.ThreadingServer,
            handler_class=wsgi_server.QuietHandler)
        self.port = server.server_address[1]
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)

    def put(self, body, chunked=False):
        conn = http.client.HTTPConnection('127.0.0.1', self.port, timeout=10)
        self.addCleanup(conn.close)
        # With no length given, http.client sends an iterable chunked.
        conn.request('PUT', '/', body=body, encode_chunked=chunked)
        return conn.getresponse().read()

    def test_chunked_body_is_read_whole(self):
        chunks = [b'x' * 70000, b'hello', b'y' * 3]
        self.assertEqual(b'70008 ' + b'x' * 16,
                         self.put(iter(chunks), chunked=True))

    def test_chunk_extensions_and_trailers_are_skipped(self):
        sock = socket.create_connection(('127.0.0.1', self.port), timeout=10)
        self.addCleanup(sock.close)
        sock.sendall(b'PUT / HTTP/1.1\r\nHost: x\r\n'
                     b'Transfer-Encoding: chunked\r\n\r\n'
                     b'5;ext=1\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n')
        reply = b''
        while not reply.endswith(b'hello'):
            data = sock.recv(4096)
            if not data:
                break
            reply += data
        self.assertTrue(reply.endswith(b'5 hello'), reply)

    def test_plain_body_is_untouched(self):
        self.assertEqual(b'4 abcd', self.put(b'abcd'))
