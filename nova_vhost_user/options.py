"""Options of the Nova side, in the ``[spdk_vhost]`` group.

The group is shared with the os-brick connector (its options, and the
RPC ones of :mod:`spdk_vhost_core.options`), so the options here carry
a ``guest_`` or ``nova_`` prefix: they describe how Nova builds the
guest, never how the SPDK target is driven. :func:`register_opts` is
nova-compute's one registration point for the whole group.
"""

from oslo_config import cfg

from os_brick_connector import options as brick_options

GROUP = 'spdk_vhost'

nova_opts = [
    cfg.IntOpt('guest_max_queues',
               default=4,
               min=1,
               max=256,
               help='Largest number of virtqueues given to one '
                    'vhost-user-blk disk. A guest gets min(its vCPUs, '
                    'this value): more queues than vCPUs hangs some '
                    'guest kernels, and each queue costs SPDK polling '
                    'time.'),
    cfg.IntOpt('guest_reconnect_timeout',
               default=10,
               min=1,
               help='Seconds between QEMU\'s attempts to reconnect a '
                    'vhost-user-blk disk whose SPDK target went away '
                    '(libvirt <reconnect timeout>). SPDK controllers '
                    'vanish when the target restarts; this is what lets '
                    'a guest carry on once the target is back.'),
    cfg.StrOpt('guest_memory_source',
               default='memfd',
               choices=[('memfd', 'memfd with hugetlb: no hugetlbfs '
                                  'mount needed by QEMU'),
                        ('file', 'a file on the hugetlbfs mount')],
               help='Backing of the shared hugepage memory given to '
                    'guests whose flavor or image asks for hugepages '
                    '(hw:mem_page_size), so vhost-user volumes can be '
                    'attached to them, also later.'),
    cfg.BoolOpt('nova_check_reactor_overlap',
                default=True,
                help='At start, ask the SPDK target for its reactor cores '
                     'and warn when guests may run on any: guests and '
                     'SPDK\'s busy-polling reactors must not share cores. '
                     'Guest CPUs are those Nova uses: [compute] '
                     'cpu_shared_set and cpu_dedicated_set, the deprecated '
                     '[DEFAULT] vcpu_pin_set, or, when none is set, every '
                     'online host CPU. Reactors in interrupt mode (asleep '
                     'when idle) may share cores with floating guests, '
                     'not with pinned ones.'),
    cfg.BoolOpt('nova_refuse_reactor_overlap',
                default=False,
                help='Make the nova_check_reactor_overlap finding fatal: '
                     'nova-compute refuses to start, naming the Nova '
                     'option and the CPUs, instead of warning. An SPDK '
                     'target that does not answer at start is still only '
                     'a warning.'),
    cfg.BoolOpt('nova_check_spdk_memory',
                default=True,
                help='At start, refuse a [DEFAULT] reserved_huge_pages '
                     'that reserves fewer hugepages (of the host\'s '
                     'default size) than the SPDK target holds (its -s), '
                     'or an SPDK target started without -s: Nova would '
                     'place hugepage guests into SPDK\'s memory. The '
                     'target is the process serving spdk_rpc_socket; one '
                     'that does not answer is only a warning.'),
]


def register_opts(conf):
    """Register the whole group: the connector's, RPC and Nova options."""
    brick_options.register_opts(conf)
    conf.register_opts(nova_opts, group=GROUP)
