# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""The emulator's stand-in for NVMe-oF/TCP between two emulator instances.

Real deployments export a volume from the storage node's SPDK over NVMe-oF
and the compute node's SPDK attaches it.  In tests two emulator instances
play the two nodes, and this module links them with what matters to the
code under test: a listen address really bound (so port conflicts and
"nothing listening" are real), host-NQN access control really enforced on
every new connection, and a real data path a guest can do I/O through.

It is not the NVMe/TCP protocol.  A connection starts with one JSON line
from the initiator and one JSON line back from the target; after a
successful ``connect`` the rest of the connection is the byte stream of an
NBD session, spliced to the namespace's NBD unix socket (served by the
storage side's qemu-storage-daemon).  The compute side's qemu-storage-daemon
is the NBD client, through an :class:`InitiatorProxy` unix socket.

Handshake (each a single line of UTF-8 JSON, at most ``MAX_LINE`` bytes)::

    initiator: {"proto": PROTO, "op": "probe" | "connect",
                "subnqn": ..., "hostnqn": ..., "nsid": N (connect only)}
    target:    {"status": "ok", "namespaces": [...]}        (probe)
               {"status": "ok"}                              (connect)
               {"status": "refused", "reason": ...}  -> PermissionError
               {"status": "error", "reason": ...}    -> HandshakeError
               {"status": "challenge", "nonce": HEX}  (host needs a key)
    initiator: {"proof": HEX | null}  -> the target's reply as above

Authentication: when the subsystem admits the host only with a
DH-HMAC-CHAP key, the target sends a fresh random nonce and the
initiator answers HMAC-SHA256(key, nonce|subnqn|hostnqn) computed with
the key file's content; the key itself never travels.  A missing or
wrong proof is refused, as SPDK refuses the fabrics connect (-5 on
attach).  This models the *check* SPDK makes, not the NVMe in-band
authentication protocol (no DH exchange, no controller authentication).

Every blocking step before the splice has a timeout, so a silent or dropped
peer never holds a thread for ever; during the splice, ``close()`` shuts
the sockets down, which wakes every thread blocked on them.
"""

import contextlib
import errno
import hashlib
import hmac
import json
import logging
import os
import secrets
import selectors
import socket
import threading

LOG = logging.getLogger(__name__)

PROTO = 'spdk-emulator-nvmf-link/1'
MAX_LINE = 64 * 1024
DEFAULT_TIMEOUT = 5.0
_CHUNK = 256 * 1024
# Namespace fields a probe returns; the NBD export name travels too (the
# initiator's NBD client must ask for it), the storage-local socket doesn't.
_NS_FIELDS = ('nsid', 'uuid', 'num_blocks', 'block_size')
_WIRE_NS_FIELDS = _NS_FIELDS + ('nbd_export',)


class HandshakeError(ConnectionError):
    """The peer broke the handshake: malformed, oversized or an error reply.

    A ConnectionError, so callers that treat "the link failed" as one case
    need not know about it.
    """


# -- line framing --

def _send_msg(sock, msg):
    sock.sendall(json.dumps(msg).encode('utf-8') + b'\n')


def _recv_msg(sock):
    """Read one JSON object line; return it and any bytes after it.

    The bytes after the newline already belong to the NBD session (the
    peer may send them in the same segment), so they must not be dropped.
    """
    buf = b''
    while b'\n' not in buf:
        if len(buf) > MAX_LINE:
            raise HandshakeError('handshake line longer than %d bytes'
                                 % MAX_LINE)
        chunk = sock.recv(4096)
        if not chunk:
            raise HandshakeError('peer closed the connection during the '
                                 'handshake')
        buf += chunk
    line, rest = buf.split(b'\n', 1)
    if len(line) > MAX_LINE:
        raise HandshakeError('handshake line longer than %d bytes' % MAX_LINE)
    try:
        msg = json.loads(line.decode('utf-8'))
    except ValueError as err:
        raise HandshakeError('handshake is not JSON: %s' % err) from err
    if not isinstance(msg, dict):
        raise HandshakeError('handshake is not a JSON object')
    return msg, rest


def _parse_request(msg):
    """Check an initiator's request; return (op, subnqn, hostnqn, nsid)."""
    if msg.get('proto') != PROTO:
        raise HandshakeError('unknown protocol %r' % msg.get('proto'))
    op = msg.get('op')
    if op not in ('probe', 'connect'):
        raise HandshakeError('unknown op %r' % op)
    subnqn, hostnqn = msg.get('subnqn'), msg.get('hostnqn')
    if not (isinstance(subnqn, str) and subnqn and
            isinstance(hostnqn, str) and hostnqn):
        raise HandshakeError('subnqn and hostnqn must be non-empty strings')
    nsid = msg.get('nsid')
    if op == 'connect' and (type(nsid) is not int or nsid < 1):
        raise HandshakeError('connect needs a positive integer nsid')
    return op, subnqn, hostnqn, nsid


def proof(secret, nonce, subnqn, hostnqn):
    """What an initiator holding ``secret`` answers to ``nonce``.

    Bound to the subsystem and host so a proof cannot be replayed for
    another pair (and the nonce is fresh per connection anyway).
    """
    msg = '|'.join((nonce, subnqn, hostnqn)).encode('utf-8')
    return hmac.new(secret.encode('utf-8'), msg, hashlib.sha256).hexdigest()


# -- client side of the handshake --

def _open(traddr, trsvcid, request, timeout, secret=None):
    """Connect to a Listener and run the handshake.

    Returns the connected socket (blocking, no timeout), the target's reply
    and the bytes that followed it.  The socket is closed on any failure.
    ``secret`` answers a challenge; without one the challenge is answered
    with no proof, which the target refuses.
    """
    sock = socket.create_connection((traddr, int(trsvcid)), timeout=timeout)
    try:
        _send_msg(sock, dict(request, proto=PROTO))
        reply, rest = _recv_msg(sock)
        if reply.get('status') == 'challenge':
            nonce = str(reply.get('nonce'))
            _send_msg(sock, {'proof': None if secret is None else proof(
                secret, nonce, request['subnqn'], request['hostnqn'])})
            reply, rest = _recv_msg(sock)
        status = reply.get('status')
        if status == 'refused':
            raise PermissionError(errno.EACCES, reply.get('reason'))
        if status != 'ok':
            raise HandshakeError('target answered %s: %s'
                                 % (status, reply.get('reason')))
        sock.settimeout(None)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    except BaseException:
        sock.close()
        raise
    return sock, reply, rest


def _probe(traddr, trsvcid, subnqn, hostnqn, timeout, secret=None):
    """Handshake a probe; the namespaces with their NBD export names."""
    request = {'op': 'probe', 'subnqn': subnqn, 'hostnqn': hostnqn}
    sock, reply, _rest = _open(traddr, trsvcid, request, timeout, secret)
    sock.close()
    namespaces = reply.get('namespaces')
    if not isinstance(namespaces, list) or not all(
            isinstance(ns, dict) and set(_WIRE_NS_FIELDS) <= set(ns)
            for ns in namespaces):
        raise HandshakeError('malformed namespace list: %r' % (namespaces,))
    return namespaces


def probe(traddr, trsvcid, subnqn, hostnqn, timeout=5.0, secret=None):
    """Connect + handshake; the namespaces a target offers this host.

    Each as {'nsid', 'uuid', 'num_blocks', 'block_size'}: what
    bdev_nvme_attach_controller learns before it creates bdevs.
    Raises ConnectionRefusedError (nothing listening) or PermissionError
    (unknown subsystem, not listening there, host not allowed, or a
    missing or wrong key: NVMe-oF does not tell an initiator which).
    """
    return [{k: ns[k] for k in _NS_FIELDS}
            for ns in _probe(traddr, trsvcid, subnqn, hostnqn, timeout,
                             secret)]


# -- moving bytes --

def _pump(src, dst):
    """Copy src to dst until src ends, then pass the end on to dst."""
    try:
        while True:
            data = src.recv(_CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError as err:
        # The other side reset, or close() shut the sockets down.
        LOG.debug('splice direction ended: %s', err)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def _splice(a, b):
    """Carry bytes both ways between a and b until both directions end.

    One thread per direction, so a peer that stops reading one way can
    never stall the other (NBD replies and requests flow independently).
    """
    other = threading.Thread(target=_pump, args=(b, a), daemon=True,
                             name='nvmf-link-splice')
    other.start()
    _pump(a, b)
    other.join()


# -- a small threaded server --

class _Server:
    """Accept loop, one thread per connection, and a close() that ends all.

    Subclasses bind the listening socket and handle one connection.  Every
    socket a handler uses is registered, so close() can shut it down and
    wake the thread blocked on it; the handler itself closes its sockets
    (closing from another thread could hit a reused descriptor).
    """

    thread_name = 'nvmf-link'
    # Bounds every blocking step before a splice (handshake, connects).
    timeout = DEFAULT_TIMEOUT
    join_timeout = DEFAULT_TIMEOUT * 2

    def __init__(self):
        self._lock = threading.Lock()
        self._socks = set()
        self._threads = []
        self._closing = False
        self._lsock = None
        self._wake_r = self._wake_w = None
        self._accepter = None

    def _bind(self):
        raise NotImplementedError

    def _handle(self, conn):
        raise NotImplementedError

    def _unbound(self):
        """Called once the listening socket is closed."""

    def start(self):
        if self._lsock is not None or self._closing:
            raise RuntimeError('already started or closed')
        self._lsock = self._bind()
        self._wake_r, self._wake_w = socket.socketpair()
        self._accepter = threading.Thread(target=self._accept_loop,
                                          daemon=True,
                                          name=self.thread_name + '-accept')
        self._accepter.start()

    def close(self):
        """Unbind, drop every connection, and wait for the threads."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
            for sock in self._socks:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        if self._accepter is None:
            return
        self._wake_w.send(b'x')
        self._accepter.join(self.join_timeout)
        # Handlers accepted after the shutdown above find the link
        # closing (see _tracked) and end at once.
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(self.join_timeout)
            if thread.is_alive():
                LOG.warning('%s did not end within %ss', thread.name,
                            self.join_timeout)
        self._wake_w.close()
        self._wake_r.close()

    def _accept_loop(self):
        try:
            with selectors.DefaultSelector() as sel:
                sel.register(self._lsock, selectors.EVENT_READ)
                sel.register(self._wake_r, selectors.EVENT_READ)
                while True:
                    ready = {key.fileobj for key, _ in sel.select()}
                    if self._wake_r in ready:
                        return
                    try:
                        conn, _addr = self._lsock.accept()
                    except OSError as err:
                        LOG.warning('accept failed: %s', err)
                        continue
                    self._spawn(conn)
        finally:
            self._lsock.close()
            self._unbound()

    def _spawn(self, conn):
        thread = threading.Thread(target=self._run_handler, args=(conn,),
                                  daemon=True, name=self.thread_name + '-conn')
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def _run_handler(self, conn):
        try:
            with self._tracked(conn):
                self._handle(conn)
        except OSError as err:
            # A peer that drops, refuses or times out (HandshakeError and
            # socket.timeout are OSErrors too) ends only its own connection.
            LOG.info('%s: connection ended: %s', self.thread_name, err)

    @contextlib.contextmanager
    def _tracked(self, sock):
        """Register sock for close(); close it when the block ends."""
        with self._lock:
            closing = self._closing
            if not closing:
                self._socks.add(sock)
        try:
            if closing:
                raise ConnectionAbortedError(errno.ECONNABORTED,
                                             'link is closing')
            yield sock
        finally:
            with self._lock:
                self._socks.discard(sock)
            sock.close()


# -- storage side --

class Listener(_Server):
    """Storage side: one bound TCP address, for every subsystem on it."""

    thread_name = 'nvmf-listener'

    def __init__(self, traddr, trsvcid, admit, secret_for=None):
        """admit(subnqn, hostnqn) -> None (refused) or a namespace list.

        Namespaces: [{'nsid', 'uuid', 'num_blocks', 'block_size',
        'nbd_socket', 'nbd_export'}].  It is called for every connection,
        so a host removed from a subsystem is refused from then on while
        its existing connections carry on, as with NVMe-oF.
        ``secret_for(subnqn, hostnqn)`` -> None (no key needed) or the
        secret an admitted host must prove it holds.
        """
        super().__init__()
        self.traddr = traddr
        self.trsvcid = str(trsvcid)
        self._admit = admit
        self._secret_for = secret_for or (lambda subnqn, hostnqn: None)

    def _bind(self):
        info = socket.getaddrinfo(self.traddr, int(self.trsvcid),
                                  type=socket.SOCK_STREAM,
                                  flags=socket.AI_NUMERICHOST)
        family, socktype, proto, _name, sockaddr = info[0]
        sock = socket.socket(family, socktype, proto)
        try:
            # REUSEADDR only lets a restarted target rebind past TIME_WAIT;
            # on Linux it still refuses a port someone is listening on.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(sockaddr)
            sock.listen()
        except BaseException:
            sock.close()
            raise
        # Port 0 asks the kernel for one: report which.
        self.trsvcid = str(sock.getsockname()[1])
        return sock

    def _handle(self, conn):
        conn.settimeout(self.timeout)
        try:
            msg, rest = _recv_msg(conn)
            op, subnqn, hostnqn, nsid = _parse_request(msg)
        except HandshakeError as err:
            with contextlib.suppress(OSError):
                _send_msg(conn, {'status': 'error', 'reason': str(err)})
            raise
        namespaces = self._admit(subnqn, hostnqn)
        if namespaces is not None:
            rest = self._authenticate(conn, rest, subnqn, hostnqn)
        if namespaces is None or rest is None:
            LOG.info('refused host %s on %s at %s:%s', hostnqn, subnqn,
                     self.traddr, self.trsvcid)
            _send_msg(conn, {'status': 'refused',
                             'reason': 'host %s may not connect to %s here'
                                       % (hostnqn, subnqn)})
            return
        if op == 'probe':
            _send_msg(conn, {'status': 'ok', 'namespaces': [
                {k: ns[k] for k in _WIRE_NS_FIELDS} for ns in namespaces]})
            return
        self._connect_namespace(conn, rest, subnqn, nsid, namespaces)

    def _authenticate(self, conn, rest, subnqn, hostnqn):
        """Challenge the host if it needs a key.

        Returns the bytes after the host's last handshake line, or None
        when the proof is missing or wrong (or the host sent data before
        it was challenged).
        """
        secret = self._secret_for(subnqn, hostnqn)
        if secret is None:
            return rest
        if rest:
            return None
        nonce = secrets.token_hex(32)
        _send_msg(conn, {'status': 'challenge', 'nonce': nonce})
        answer, rest = _recv_msg(conn)
        given = answer.get('proof')
        wanted = proof(secret, nonce, subnqn, hostnqn)
        if not (isinstance(given, str) and
                hmac.compare_digest(given, wanted)):
            LOG.info('host %s failed authentication on %s', hostnqn, subnqn)
            return None
        return rest

    def _connect_namespace(self, conn, rest, subnqn, nsid, namespaces):
        found = [ns for ns in namespaces if ns['nsid'] == nsid]
        if not found:
            _send_msg(conn, {'status': 'error',
                             'reason': 'no namespace %d in %s'
                                       % (nsid, subnqn)})
            return
        nbd = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with self._tracked(nbd):
            nbd.settimeout(self.timeout)
            try:
                nbd.connect(found[0]['nbd_socket'])
            except OSError as err:
                _send_msg(conn, {'status': 'error',
                                 'reason': 'namespace %d unavailable: %s'
                                           % (nsid, err)})
                raise
            nbd.settimeout(None)
            conn.settimeout(None)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            _send_msg(conn, {'status': 'ok'})
            if rest:
                nbd.sendall(rest)
            _splice(conn, nbd)


# -- compute side --

class InitiatorProxy(_Server):
    """Compute side: a unix socket that QSD's NBD client connects to.

    Each connection is carried to the storage target over TCP (a handshake
    naming the nsid, then a byte splice to the namespace's NBD unix socket
    on the storage side), so each NBD (re)connect is admitted afresh.
    """

    thread_name = 'nvmf-initiator'

    def __init__(self, unix_path, traddr, trsvcid, subnqn, hostnqn, nsid,
                 secret=None):
        super().__init__()
        self.secret = secret
        self.unix_path = unix_path
        self.traddr = traddr
        self.trsvcid = str(trsvcid)
        self.subnqn = subnqn
        self.hostnqn = hostnqn
        self.nsid = nsid
        self.export_name = None

    def start(self):
        """Check the namespace is reachable, then listen on unix_path.

        The NBD export name is the storage side's, so it is learned here;
        like bdev_nvme_attach_controller, this fails early with
        ConnectionRefusedError or PermissionError.  A namespace the
        subsystem lacks raises LookupError.
        """
        namespaces = _probe(self.traddr, self.trsvcid, self.subnqn,
                            self.hostnqn, self.timeout, self.secret)
        for ns in namespaces:
            if ns['nsid'] == self.nsid:
                self.export_name = ns['nbd_export']
                break
        else:
            raise LookupError('no namespace %s in %s' % (self.nsid,
                                                         self.subnqn))
        super().start()

    def _bind(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(self.unix_path)
            sock.listen()
        except BaseException:
            sock.close()
            raise
        return sock

    def _unbound(self):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.unix_path)

    def _handle(self, conn):
        request = {'op': 'connect', 'subnqn': self.subnqn,
                   'hostnqn': self.hostnqn, 'nsid': self.nsid}
        try:
            remote, _reply, rest = _open(self.traddr, self.trsvcid, request,
                                         self.timeout, self.secret)
        except PermissionError as err:
            # The NBD client sees its connection closed: an I/O error,
            # as a guest sees when its host loses access.
            LOG.warning('target refused %s on %s: %s', self.hostnqn,
                        self.subnqn, err)
            return
        with self._tracked(remote):
            if rest:
                conn.sendall(rest)
            _splice(conn, remote)
