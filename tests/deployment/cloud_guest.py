"""The test guest as glance images, and its shell once Nova booted it.

Nova boots the guest like an AMI: a kernel image and a ramdisk image
in glance, named by a root image's ``kernel_id``/``ramdisk_id``, with
the kernel command line in ``os_command_line``. A volume created from
the root image carries those properties (Cinder copies them), so Nova
boots that volume with the test guest's kernel and initramfs, whose
``/init`` serves shell commands on the serial console
(``gt_serve``), or reports disk events there (``gt_report``). The root
image itself is data: a known pattern the guest reads back from its
boot disk, proving the volume holds the image Cinder imported.
"""

import hashlib
import os

from testbed.guest import initramfs
from testbed.guest import pty_console

ROOT_TOKEN = 'spdk-vhost-root-image'
ROOT_BYTES = 1024 * 1024


def root_pattern():
    line = (ROOT_TOKEN + '\n').encode()
    return (line * (ROOT_BYTES // len(line) + 1))[:ROOT_BYTES]


def root_sha256():
    return hashlib.sha256(root_pattern()).hexdigest()


def _upload(glance, name, path, disk_format, **properties):
    image = glance.images.create(name=name, disk_format=disk_format,
                                 container_format=disk_format
                                 if disk_format in ('aki', 'ari') else
                                 'bare', visibility='public', **properties)
    with open(path, 'rb') as data:
        glance.images.upload(image['id'], data)
    return image['id']


# The guest's modes, each its own ramdisk and root image: ``shell``
# serves commands on the console (the tests' own checks), ``report``
# prints disk events for readers of the console log only (tempest,
# through Nova's console-output API).
MODES = {'shell': 'gt_serve\n', 'report': 'gt_report\n'}


def upload(glance, workdir):
    """The guest's images; returns {mode: root image id}."""
    kernel = _upload(glance, 'test-guest-kernel',
                     initramfs.find_kernel().image, 'aki')
    root_path = os.path.join(workdir, 'test-guest-root.raw')
    with open(root_path, 'wb') as out:
        out.write(root_pattern())
    images = {}
    for mode, script in sorted(MODES.items()):
        name = 'test-guest-' + mode
        ramdisk_path = initramfs.make_initrd(
            os.path.join(workdir, name + '-initrd'), script)
        ramdisk = _upload(glance, name + '-ramdisk', ramdisk_path, 'ari')
        images[mode] = _upload(
            glance, name, root_path, 'raw', kernel_id=kernel,
            ramdisk_id=ramdisk,
            os_command_line=initramfs.kernel_cmdline(disks=1))
    return images


def console(conn, server_id):
    """A shell on the running guest of Nova server ``server_id``."""
    dom = conn.lookupByUUIDString(server_id)
    path = pty_console.pty_path(dom.XMLDesc(0))
    if path is None:
        raise RuntimeError('server %s has no serial pty' % server_id)
    return pty_console.PtyConsole(path)
