"""Guests defined through Nova's libvirt config classes, on real libvirtd.

What the functional tests and ``make demo`` share on the Nova side: an
instance with a NUMA topology the way Nova's scheduler leaves it, the
domain Nova would define for it (named and identified like Nova's, so
the driver's own ``get_guest`` finds it), and the guest's results read
off its serial console file.
"""

import os
import random
import time
import uuid

from nova import objects
from nova.virt.libvirt import config as vconfig

from nova_vhost_user import libvirt_config
from testbed.guest import initramfs
from testbed.guest import qemu

objects.register_all()

GUEST_MIB = 256
HUGEPAGE_KIB = 2048


class GuestFailed(Exception):
    """The guest reported an error, or not what was waited for."""


def instance(vcpus=2, node=0, hugepages=True):
    """An Instance as Nova has it once scheduled to host NUMA ``node``.

    ``hugepages`` is the flavor's ``hw:mem_page_size``; without it the
    guest has no NUMA topology, like a plain flavor. Random id and UUID:
    test processes run in parallel and domains are named from them.
    """
    topology = None
    if hugepages:
        topology = objects.InstanceNUMATopology(cells=[
            objects.InstanceNUMACell(id=node, cpuset=set(range(vcpus)),
                                     pcpuset=set(), memory=GUEST_MIB,
                                     pagesize=HUGEPAGE_KIB)])
    return objects.Instance(
        uuid=str(uuid.uuid4()), id=random.randint(1, 2 ** 31),
        flavor=objects.Flavor(vcpus=vcpus, memory_mb=GUEST_MIB,
                              extra_specs={}),
        numa_topology=topology, system_metadata={})


def open_to_qemu(path):
    """Let other users (QEMU) traverse path and its private parents.

    Only adds search permission, and only on directories this process
    owns (temp dirs made 0700), never removes any: what an operator's
    /var/tmp or /var/lib/spdk already allows.
    """
    while path != os.path.dirname(path):
        info = os.stat(path)
        if info.st_uid == os.getuid() and not info.st_mode & 0o001:
            os.chmod(path, (info.st_mode & 0o7777) | 0o011)
        path = os.path.dirname(path)


def domain_config(inst, workdir, script, disks=(), disk_count=None):
    """The domain Nova defines for ``inst``, booting the test guest.

    Its memory backing is the one the compute driver gives a hugepage
    flavor (shared memfd hugepages); a guest without NUMA topology gets
    Nova's default, private memory.
    """
    cfg = vconfig.LibvirtConfigGuest()
    cfg.virt_type = 'qemu'
    cfg.name = inst.name
    cfg.uuid = inst.uuid
    cfg.memory = GUEST_MIB * 1024
    cfg.vcpus = inst.flavor.vcpus
    cfg.os_type = 'hvm'
    cfg.os_kernel = initramfs.find_kernel().image
    cfg.os_initrd = initramfs.make_initrd(
        os.path.join(workdir, 'initrd'), script)
    os.chmod(cfg.os_initrd, 0o644)
    cfg.os_cmdline = initramfs.kernel_cmdline(
        disks=len(disks) if disk_count is None else disk_count)
    # Without ACPI, PCI hotplug (a later volume attach) is refused.
    cfg.features = [vconfig.LibvirtConfigGuestFeatureACPI()]
    if inst.numa_topology is not None:
        cfg.cpu = vconfig.LibvirtConfigGuestCPU()
        cfg.cpu.numa = vconfig.LibvirtConfigGuestCPUNUMA()
        cell = vconfig.LibvirtConfigGuestCPUNUMACell()
        cell.id, cell.cpus = 0, set(range(inst.flavor.vcpus))
        cell.memory = GUEST_MIB * 1024
        cfg.cpu.numa.cells = [cell]
        page = vconfig.LibvirtConfigGuestMemoryBackingPage()
        page.size_kb, page.nodeset = HUGEPAGE_KIB, [0]
        backing = vconfig.LibvirtConfigGuestMemoryBacking()
        backing.hugepages = [page]
        cfg.membacking = libvirt_config.shared_hugepages(backing, memfd=True)
    for disk in disks:
        cfg.add_device(disk)
    serial = vconfig.LibvirtConfigGuestSerial()
    serial.type = 'file'
    serial.source_path = console_path(workdir)
    cfg.add_device(serial)
    return cfg


def console_path(workdir):
    return os.path.join(workdir, 'console.log')


def console_lines(workdir):
    try:
        with open(console_path(workdir), errors='replace') as src:
            return [line.rstrip('\r\n') for line in src]
    except FileNotFoundError:
        return []


def wait_result(workdir, key, timeout=180):
    """The value the guest reported for ``key``; GuestFailed otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        lines = console_lines(workdir)
        results = qemu.Results(lines, 0)
        if results.errors:
            raise GuestFailed('guest reported %s' % results.errors)
        if key in results.values:
            return results.values[key]
        if time.monotonic() > deadline:
            raise GuestFailed('no %s from the guest after %d s:\n%s'
                              % (key, timeout, '\n'.join(lines[-30:])))
        time.sleep(0.5)


def disks(dom):
    """Target names of the disks of a running domain, in order."""
    cfg = vconfig.LibvirtConfigGuest()
    cfg.parse_str(dom.XMLDesc(0))
    return [d.target_dev for d in cfg.devices
            if isinstance(d, vconfig.LibvirtConfigGuestDisk)]


def wait_detached(dom, target, timeout=180):
    """Wait until libvirt has dropped disk ``target`` from the domain.

    What Nova waits for (libvirt's device-removed event) before it
    disconnects the volume: QEMU lets the vhost-user socket go then, not
    when the guest's kernel has let the disk go.
    """
    deadline = time.monotonic() + timeout
    while target in disks(dom):
        if time.monotonic() > deadline:
            raise GuestFailed('disk %s still in the domain after %d s'
                              % (target, timeout))
        time.sleep(0.5)


def start(conn, cfg):
    """Define and start; returns the domain (see :func:`remove`)."""
    dom = conn.defineXML(cfg.to_xml())
    try:
        dom.create()
    except Exception:
        dom.undefine()
        raise
    return dom


def remove(dom):
    """Stop (if running) and undefine a domain made by :func:`start`."""
    if dom.isActive():
        dom.destroy()
    dom.undefine()
