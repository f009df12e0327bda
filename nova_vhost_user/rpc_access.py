"""Start-up check: no guest's QEMU can open SPDK's RPC socket.

Whoever connects to the target's JSON-RPC socket drives it: creates,
exports or deletes any volume on the host. QEMU needs only its guest's
vhost-user sockets, and a QEMU taken over by its guest must get no
further. libvirt starts every guest's QEMU as one identity (qemu.conf
``user`` and ``group``, plus that user's groups), which it reports as
the DAC base label in its capabilities: the check asks whether that
identity passes the permission bits of the socket and of every
directory above it. ACLs are not read (the units set none).
"""

import grp
import os
import pwd
import stat
from xml.etree import ElementTree

from nova import exception
from oslo_log import log as logging

LOG = logging.getLogger(__name__)

BASELABEL = "secmodel[model='dac']/baselabel"


class QemuIdentity(object):
    """The uid and groups libvirt gives every QEMU it starts."""

    def __init__(self, uid, gid):
        self.uid = uid
        self.gids = {gid}
        try:
            entry = pwd.getpwuid(uid)
        except KeyError:  # no passwd entry: no other groups
            self.user = str(uid)
            return
        self.user = entry.pw_name
        # As libvirt lists them: the user's groups, its passwd one too.
        self.gids.update(os.getgrouplist(entry.pw_name, entry.pw_gid))

    @classmethod
    def from_capabilities(cls, xml, virt_type):
        """From libvirt's capabilities; None if they hold no DAC label."""
        host = ElementTree.fromstring(xml).find('host')
        labels = {} if host is None else {
            label.get('type'): label.text
            for label in host.findall(BASELABEL)}
        label = labels.get(virt_type) or next(iter(labels.values()), None)
        if not label:
            return None
        uid, gid = (int(part.lstrip('+')) for part in label.split(':'))
        return cls(uid, gid)

    def may(self, path, bit):
        """Whether this identity passes ``bit`` on ``path``.

        As the kernel checks it: the owner's bits, else the group's, else
        the others'. ``bit``: the others' one (``stat.S_IWOTH``...).
        """
        info = os.stat(path)
        if self.uid == 0:
            return True
        if info.st_uid == self.uid:
            return bool(info.st_mode & (bit << 6))
        if info.st_gid in self.gids:
            return bool(info.st_mode & (bit << 3))
        return bool(info.st_mode & bit)

    def can_connect(self, socket_path):
        """Whether this identity may connect to the Unix socket."""
        path = os.path.realpath(socket_path)
        parents = [os.path.dirname(path)]
        while parents[-1] != os.path.dirname(parents[-1]):
            parents.append(os.path.dirname(parents[-1]))
        return (all(self.may(p, stat.S_IXOTH) for p in parents) and
                self.may(path, stat.S_IWOTH))

    def describe(self):
        names = sorted(_group_name(gid) for gid in self.gids)
        return '%s (groups %s)' % (self.user, ', '.join(names))


def _group_name(gid):
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def check(capabilities_xml, virt_type, socket_path):
    """Refuse to start when libvirt's QEMU could open ``socket_path``.

    A socket not there yet (the target not started) or capabilities
    without a DAC label (another security driver decides) are only
    logged: nova-compute must still start.
    """
    identity = QemuIdentity.from_capabilities(capabilities_xml, virt_type)
    if identity is None:
        LOG.warning('Could not tell which user libvirt runs QEMU as (no '
                    'DAC label in its capabilities): not checking that '
                    'guests cannot open the SPDK RPC socket %s.',
                    socket_path)
        return
    try:
        info = os.stat(socket_path)
        reachable = identity.can_connect(socket_path)
    except OSError as err:
        LOG.warning('Could not check that guests cannot open the SPDK RPC '
                    'socket: %s', err)
        return
    if reachable:
        raise exception.InvalidConfiguration(
            'QEMU runs as %(who)s and can open the SPDK RPC socket '
            '%(path)s (%(owner)s:%(group)s, mode %(mode)04o): a guest that '
            'takes over its QEMU could create, export or delete any '
            'volume on this host. Keep QEMU\'s user out of the socket\'s '
            'group; QEMU needs only the vhost sockets\' group '
            '([spdk_vhost] vhost_socket_group).' % {
                'who': identity.describe(), 'path': socket_path,
                'owner': _user_name(info.st_uid),
                'group': _group_name(info.st_gid),
                'mode': stat.S_IMODE(info.st_mode)})
    LOG.info('QEMU (%(who)s) cannot open the SPDK RPC socket %(path)s.',
             {'who': identity.describe(), 'path': socket_path})


def _user_name(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
