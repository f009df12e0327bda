"""A test cloud's certificate authority and the node certificates it signs.

Each storage node's agent serves HTTPS with a certificate naming the
node's address, signed by one CA whose certificate cinder-volume trusts
(``spdk_agent_ca_file``), as a deployment would have it. Keys are
written 0600.
"""

import datetime
import ipaddress
import os

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography import x509
from cryptography.x509.oid import NameOID

_DAYS = 2


def _name(common_name):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(path, data, mode=0o644):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, 'wb') as out:
        out.write(data)
    return path


def _key_pem(key):
    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


class Authority(object):
    """A CA in ``directory``: ``ca_file``, and :meth:`issue` for nodes."""

    def __init__(self, directory, name='spdk-vhost test CA'):
        self.directory = directory
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name)).issuer_name(_name(name))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0),
                           critical=True)
            .sign(self._key, hashes.SHA256()))
        self.ca_file = _write(
            os.path.join(directory, 'ca.pem'),
            self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name, addresses, directory=None):
        """(cert_file, key_file) of a server named ``name`` at ``addresses``.

        Written in ``directory`` (the node's own, by default the CA's).
        """
        directory = directory or self.directory
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        alt = [x509.DNSName(name)] + [
            x509.IPAddress(ipaddress.ip_address(a)) for a in addresses]
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name)).issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=_DAYS))
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None),
                           critical=True)
            .sign(self._key, hashes.SHA256()))
        cert_file = _write(os.path.join(directory, '%s.pem' % name),
                           cert.public_bytes(serialization.Encoding.PEM))
        key_file = _write(os.path.join(directory, '%s.key' % name),
                          _key_pem(key), mode=0o600)
        return cert_file, key_file
