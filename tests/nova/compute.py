"""A compute host's Nova side, configured the way an operator would.

Shared by the functional tests and ``make demo``: the ``[spdk_vhost]``
settings of nova.conf for one SPDK target, and the compute driver built
on them. QEMU runs as ``libvirt-qemu`` (primary group ``kvm`` on Debian
and Ubuntu), SPDK as root: the connector gives each vhost socket to that
group, mode 0660, so QEMU and nobody else may connect.
"""

from nova.virt import fake
from os_brick import privileged as brick_privileged

from nova_vhost_user import driver
from nova_vhost_user import options as nova_options
from nova_vhost_user import volume
from os_brick_connector import privileged

CONF = volume.CONF
GROUP = 'spdk_vhost'
QEMU_GROUP = 'kvm'


def options(rpc_socket, target_id, **extra):
    """nova.conf ``[spdk_vhost]`` for a compute host using this target."""
    settings = {'spdk_rpc_socket': rpc_socket,
                'spdk_rpc_connect_retries': 0,
                'target_id': target_id,
                'vhost_socket_group': QEMU_GROUP,
                'vhost_socket_mode': '0660',
                'guest_max_queues': 2,
                'guest_reconnect_timeout': 5,
                'disconnect_retry_interval': 0.2,
                'nova_check_reactor_overlap': False}
    settings.update(extra)
    return settings


def register(conf=CONF):
    """Everything [spdk_vhost] holds, so it can be set before first use."""
    nova_options.register_opts(conf)


def apply(conf=CONF, **settings):
    """Set options as nova.conf would, for a process of its own (demo)."""
    register(conf)
    conf.set_override('virt_type', 'qemu', group='libvirt')
    for name, value in settings.items():
        conf.set_override(name, value, group=GROUP)


def run_privileged_in_process():
    """Run the connector's privsep calls here, as this process is root.

    A deployment starts the privsep daemons through rootwrap; a test or
    the demo already runs as root, so the same code runs in-process:
    this connector's socket access, and os-brick's own context (Nova's
    get_volume_connector reads the host's NVMe identity through it).
    Returns the undo.
    """
    contexts = (privileged.socket_access, brick_privileged.default)
    for context in contexts:
        context.set_client_mode(False)

    def undo():
        for context in contexts:
            context.set_client_mode(True)
    return undo


def make_driver():
    """The compute driver, as nova-compute builds it from nova.conf."""
    return driver.LibvirtVhostUserDriver(fake.FakeVirtAPI())


def close(compute_driver):
    """Close the RPC connection of the volume driver, if one was made."""
    vol_driver = compute_driver.volume_drivers.get(volume.DRIVER_TYPE)
    if vol_driver is not None:
        vol_driver.connector.client.close()
