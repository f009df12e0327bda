"""One side of OpenStack (Cinder or Nova) in a process of its own.

Nova and Cinder cannot be imported in one Python process (DuplicateOptError
on oslo.config's global options), yet the attach path is only proven when
a compute host uses the ``connection_info`` the real Cinder driver made.
So each side runs as ``python -m testbed.service_process MODULE:CLASS
--state-dir D``: it reads one request per line on stdin, ``{"method": M,
"args": {...}}``, calls ``do_M(**args)`` on its side object and answers
one line on stdout, ``{"result": R}`` or ``{"error": "..."}``. JSON in
between, like the REST APIs between the real services.
:class:`ServiceProcess` is the caller's end; it imports neither side.
"""

import argparse
import json
import os
import subprocess
import sys

import fixtures
from oslo_utils import importutils

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CINDER = 'tests.cinder.service:CinderSide'
NOVA = 'tests.nova.service:NovaSide'


class ServiceError(Exception):
    """The side reported an error (its text is the message)."""


class ServiceProcess(fixtures.Fixture):
    """Starts a side's process and calls its methods.

    Use as a fixture (tests) or a context manager (the demo); both stop
    the process (the side cleans up when its stdin closes) and remove
    its state directory.
    """

    def __init__(self, side, stop_timeout=60):
        super().__init__()
        self.side = side
        self.stop_timeout = stop_timeout
        self.process = None

    def _setUp(self):
        state = self.useFixture(fixtures.TempDir()).path
        self.log_path = os.path.join(state, 'service.log')
        log = open(self.log_path, 'wb')
        self.addCleanup(log.close)
        self.process = subprocess.Popen(
            [sys.executable, '-m', 'testbed.service_process', self.side,
             '--state-dir', state],
            cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=log, text=True, start_new_session=True)
        self.addCleanup(self._stop)

    def _stop(self):
        self.process.stdin.close()
        try:
            self.process.wait(self.stop_timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()

    def log(self):
        with open(self.log_path, errors='replace') as src:
            return src.read()[-4000:]

    def call(self, method, **args):
        """One request; its result, or ServiceError with the reason."""
        self.process.stdin.write(json.dumps({'method': method,
                                             'args': args}) + '\n')
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise ServiceError('%s exited (rc=%s): %s'
                               % (self.side, self.process.poll(),
                                  self.log()))
        reply = json.loads(line)
        if 'error' in reply:
            raise ServiceError(reply['error'])
        return reply['result']


def serve(side, requests, replies):
    """Answer requests until they end, then let the side clean up."""
    try:
        for line in requests:
            request = json.loads(line)
            method = getattr(side, 'do_' + request['method'])
            try:
                reply = {'result': method(**request.get('args') or {})}
            except Exception as err:  # the caller raises it, with this text
                reply = {'error': '%s: %s' % (type(err).__name__, err)}
            replies.write(json.dumps(reply) + '\n')
            replies.flush()
    finally:
        side.close()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('side', help='MODULE:CLASS of the side object')
    parser.add_argument('--state-dir', required=True)
    args = parser.parse_args(argv)
    # Replies own stdout; anything else printing there (logging) goes to
    # stderr, the log file, so it cannot corrupt the protocol.
    replies = os.fdopen(os.dup(sys.stdout.fileno()), 'w')
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    module, _sep, name = args.side.partition(':')
    side = getattr(importutils.import_module(module), name)(args.state_dir)
    serve(side, sys.stdin, replies)


if __name__ == '__main__':
    main()
