"""The Nova side of :mod:`testbed.service_process`: a compute host.

nova-compute's libvirt driver (this project's subclass) with the real
SPDK connector, on the real libvirtd: it reports its volume connector,
boots a guest with the memory a hugepage flavor gets, hot-attaches a
volume from Cinder's ``connection_info`` the way
``LibvirtDriver.attach_volume`` does (connect, disk config, live attach;
without Nova's database), and detaches it again. The guest writes a
pattern to the volume and reads it back.
"""

import os

from nova import context as nova_context
from nova.virt.libvirt import guest as libvirt_guest
from oslo_concurrency import lockutils

from testbed.guest import qemu
from tests.nova import compute
from tests.nova import libvirt_guest as guests

try:
    import libvirt
except ImportError:  # the demo checks this before it starts
    libvirt = None

DEV = 'vda'
DISK = {'bus': 'virtio', 'type': 'disk', 'dev': DEV}


def guest_script(offset, length, token):
    """Wait for the disk, write, read back, then wait for its removal."""
    return '\n'.join([
        'gt_result booted yes',
        'while [ ! -e /sys/block/%s ]; do usleep 100000; done' % DEV,
        qemu.disk_info(DEV),
        qemu.write_pattern(DEV, offset, length, token),
        qemu.read_back(DEV, offset, length),
        'gt_result io done',
        'while [ -e /sys/block/%s ]; do usleep 100000; done' % DEV,
        'gt_result detached yes',
        'while :; do sleep 10; done', ''])


class NovaSide(object):
    """One compute host running one guest."""

    def __init__(self, state_dir):
        self.workdir = state_dir
        guests.open_to_qemu(state_dir)
        # The connector's lock, shared by the compute host's processes.
        lockutils.set_defaults(os.path.join(state_dir, 'locks'))
        self.undo_privileged = compute.run_privileged_in_process()
        self.driver = None
        self.conn = None
        self.dom = None
        self.inst = None
        self.context = nova_context.get_admin_context()

    def do_start(self, rpc_socket, target_id, vhost_dir=None,
                 uri='qemu:///system'):
        """Configure [spdk_vhost] like nova.conf, build the driver.

        ``vhost_dir``: an SPDK socket directory QEMU may not traverse yet
        (a test target's temp dir, ``SpdkTarget.vhost_dir``; a deployed
        target's ``-S`` directory already is).
        """
        if vhost_dir:
            guests.open_to_qemu(vhost_dir)
        compute.apply(**compute.options(rpc_socket, target_id))
        compute.CONF.set_override('connection_uri', uri, group='libvirt')
        self.conn = libvirt.open(uri)
        self.driver = compute.make_driver()
        self.inst = guests.instance(vcpus=2, node=0)
        return {'instance': self.inst.name}

    def do_connector(self):
        """What Nova sends Cinder with every attachment of this guest."""
        return self.driver.get_volume_connector(self.inst)

    def do_boot(self, offset, length, token):
        """Boot the guest (no volume yet) and wait until it runs."""
        cfg = guests.domain_config(self.inst, self.workdir,
                                   guest_script(offset, length, token),
                                   disk_count=0)
        self.dom = guests.start(self.conn, cfg)
        guests.wait_result(self.workdir, 'booted')
        return {'domain': self.inst.name}

    def do_attach(self, connection_info):
        """Hot-attach: connect (SPDK controller), disk config, live attach.

        Returns the disk libvirt now has and the controller behind it.
        """
        self.connection_info = connection_info
        self.driver._connect_volume(self.context, connection_info,
                                    self.inst)
        disk = self.driver._get_volume_config(connection_info, DISK)
        libvirt_guest.Guest(self.dom).attach_device(disk, persistent=True,
                                                    live=True)
        data = connection_info['data']
        return {'socket': data['device_path'],
                'controller': data['vhost_controller'],
                'queues': data['vhost_queues'],
                'disks': guests.disks(self.dom)}

    def do_guest_io(self):
        """What the guest saw and did on the attached volume."""
        guests.wait_result(self.workdir, 'io')
        results = qemu.Results(guests.console_lines(self.workdir), 0)
        return results.values

    def do_detach(self):
        """Live detach as Nova does, then delete the SPDK controller."""
        guest = self.driver._host.get_guest(self.inst)
        guest.detach_device(guest.get_disk(DEV), persistent=True, live=True)
        guests.wait_result(self.workdir, 'detached')
        guests.wait_detached(self.dom, DEV)
        self.driver._disconnect_volume(self.context, self.connection_info,
                                       self.inst)
        return {'disks': guests.disks(self.dom),
                'socket_left': os.path.exists(
                    self.connection_info['data']['device_path'])}

    def close(self):
        """Remove the guest and close connections, whatever happened."""
        if self.dom is not None:
            guests.remove(self.dom)
        if self.driver is not None:
            compute.close(self.driver)
        if self.conn is not None:
            self.conn.close()
        self.undo_privileged()
