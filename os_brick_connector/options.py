"""Options of the os-brick connector, in Nova's ``[spdk_vhost]`` group.

They sit next to the RPC options of :mod:`spdk_vhost_core.options`, which
point at this compute host's SPDK target; :func:`register_opts` registers
both.
"""

from oslo_config import cfg

from spdk_vhost_core import options as core_options
from spdk_vhost_core import reconnect

GROUP = 'spdk_vhost'

NUMA_POLICIES = ('required', 'preferred', 'none')

connector_opts = [
    cfg.StrOpt('target_id',
               help='Identity of this host\'s SPDK target, reported to '
                    'Cinder in the connector properties so that a volume '
                    'on the same target is attached locally (no NVMe-oF). '
                    'Must equal the Cinder backend\'s target identity for '
                    'a hyperconverged host. Default, as Cinder\'s: the '
                    'host name, or tcp:<address>:<port> when the RPC goes '
                    'over TCP.'),
    cfg.StrOpt('host_nqn',
               help='NVMe host NQN this host presents to NVMe-oF storage '
                    'targets; Cinder allows it on the volume\'s '
                    'subsystem. Default: the content of host_nqn_file, '
                    'else one derived from /etc/machine-id.'),
    cfg.StrOpt('host_nqn_file',
               default='/etc/nvme/hostnqn',
               help='File holding the host NQN (nvme-cli\'s), read when '
                    'host_nqn is not set.'),
    cfg.StrOpt('numa_policy',
               default='preferred',
               choices=[
                   ('required', 'Refuse an attachment when no SPDK reactor '
                                'runs on the guest\'s NUMA node.'),
                   ('preferred', 'Use the guest\'s node when it has a '
                                 'reactor, else the least loaded reactor '
                                 'anywhere, with a warning.'),
                   ('none', 'Ignore NUMA: the least loaded reactor '
                            'anywhere.')],
               help='How the SPDK reactor polling a volume\'s vhost '
                    'controller is chosen relative to the guest\'s NUMA '
                    'node.'),
    cfg.BoolOpt('vhost_packed_ring',
                default=False,
                help='Create vhost-blk controllers with packed virtqueue '
                     'support. The guest device must also be created with '
                     'packed=on for it to be used.'),
    cfg.IntOpt('vhost_coalescing_delay_base_us',
               default=0,
               min=0,
               help='Interrupt coalescing base delay (microseconds) of '
                    'each vhost-blk controller; 0 leaves SPDK\'s default '
                    '(no coalescing).'),
    cfg.IntOpt('vhost_coalescing_iops_threshold',
               default=60000,
               min=1,
               help='IOPS above which SPDK starts coalescing interrupts; '
                    'used only when vhost_coalescing_delay_base_us > 0.'),
    cfg.StrOpt('vhost_socket_owner',
               help='User to own each vhost-user socket (e.g. '
                    'libvirt-qemu), so QEMU can connect. Unset: unchanged.'),
    cfg.StrOpt('vhost_socket_group',
               help='Group to own each vhost-user socket (e.g. kvm). '
                    'Unset: unchanged.'),
    cfg.StrOpt('vhost_socket_mode',
               default='0660',
               help='Octal permission bits of each vhost-user socket. The '
                    'default lets only its owner and group (QEMU) in.'),
    cfg.IntOpt('disconnect_retries',
               default=10,
               min=0,
               help='How many more times to try deleting a vhost-blk '
                    'controller while a guest is still connected to it.'),
    cfg.FloatOpt('disconnect_retry_interval',
                 default=1.0,
                 min=0.0,
                 help='Seconds between two attempts to delete a vhost-blk '
                      'controller still in use by a guest.'),
    cfg.IntOpt('nvme_ctrlr_loss_timeout_sec',
               default=reconnect.DEFAULT_LOSS,
               min=-1,
               help='NVMe-oF: seconds a lost connection to the storage '
                    'target is retried before the controller, and the '
                    'guest\'s disk with it, is dropped (-1: retry '
                    'forever; 0: never retry). The default rides out a '
                    'storage target upgrade by spdk-vhost-upgrade, '
                    'failed and rolled back included (60 s with its '
                    'default --timeout, plus one reconnect delay); the '
                    'price is that a storage host that died for good is '
                    'given up this late. Reported to Cinder, and checked '
                    'by spdk-vhost-upgrade before it stops a storage '
                    'target this host is connected to.'),
    cfg.IntOpt('nvme_reconnect_delay_sec',
               default=reconnect.DEFAULT_DELAY,
               min=0,
               help='NVMe-oF: seconds between two reconnect attempts; '
                    'above 0 unless nvme_ctrlr_loss_timeout_sec is 0. A '
                    'guest waits up to this long more after its storage '
                    'target is back: a storage target upgrade stalled a '
                    'writing guest about 2.1 s with 2, 1.1 s with 1.'),
    cfg.IntOpt('nvme_fast_io_fail_timeout_sec',
               default=reconnect.DEFAULT_FAST_FAIL,
               min=0,
               help='NVMe-oF: seconds after a lost connection at which '
                    'guest I/O fails instead of waiting for a reconnect '
                    '(0: wait until the controller is dropped). Between '
                    'nvme_reconnect_delay_sec and '
                    'nvme_ctrlr_loss_timeout_sec. The default rides out a '
                    'storage target upgrade, failed and rolled back '
                    'included, with no I/O error in the guests; the price '
                    'is that when a storage host dies, guests see it '
                    'only after this long (their I/O hangs until then). '
                    'Below the upgrade window (60 s with '
                    'spdk-vhost-upgrade\'s default --timeout) plus '
                    'nvme_reconnect_delay_sec, the command refuses, '
                    'without --force, to upgrade a storage target this '
                    'host is connected to.'),
    cfg.IntOpt('nvme_replica_ctrlr_loss_timeout_sec',
               default=-1,
               min=-1,
               help='NVMe-oF, replicas of a replicated volume only: '
                    'nvme_ctrlr_loss_timeout_sec for them. The default '
                    '(-1, retry forever) keeps a lost replica\'s '
                    'controller, so that when its storage target returns '
                    'the controller reconnects by itself and '
                    '"spdk-vhost-replicas repair" rebuilds the replica '
                    'from SPDK\'s state alone; the price is one connect '
                    'attempt every nvme_replica_reconnect_delay_sec to a '
                    'storage target that never returns, until the replica '
                    'is replaced or the volume detached. A controller '
                    'given up must be attached again with the volume\'s '
                    'connection properties.'),
    cfg.IntOpt('nvme_replica_reconnect_delay_sec',
               default=1,
               min=0,
               help='NVMe-oF, replicas only: nvme_reconnect_delay_sec for '
                    'them; not above nvme_replica_fast_io_fail_timeout_sec '
                    'when that is not 0.'),
    cfg.IntOpt('nvme_replica_fast_io_fail_timeout_sec',
               default=1,
               min=0,
               help='NVMe-oF, replicas only: nvme_fast_io_fail_timeout_sec '
                    'for them, which sets the guest\'s stall when a '
                    'storage target dies: after this long its replica\'s '
                    'I/O fails, the RAID1 fails that replica and goes on, '
                    'degraded, with the others (1 s: longest guest write '
                    'stall 1.1 to 2.9 s measured). The price of a short '
                    'one: a storage target that is only restarting (an '
                    'upgrade) is failed out of every mirror it serves, '
                    'which then runs degraded until repaired and rebuilt. '
                    'Single-copy remote volumes keep the nvme_* settings '
                    'and ride out the upgrade.'),
    cfg.StrOpt('nvme_key_dir',
               help='NVMe-oF: directory, readable by this host\'s SPDK '
                    'process, where DH-HMAC-CHAP secrets received from '
                    'Cinder are written (mode 0600) for SPDK\'s keyring '
                    'while a volume is attached. Required to attach '
                    'volumes of a backend with spdk_nvmf_auth=dhchap.'),
]


def register_opts(conf):
    """Register everything the connector reads, RPC options included."""
    core_options.register_opts(conf, GROUP)
    conf.register_opts(connector_opts, group=GROUP)
