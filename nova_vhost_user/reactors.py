"""Start-up check: Nova's guest CPUs must not be SPDK's reactor cores.

SPDK reactors busy-poll their cores at 100%; a guest vCPU pinned or
floating onto one of them fights the reactor, which slows every volume
that reactor serves. In interrupt mode (every reactor sleeps when idle)
floating guests may share the cores, so only ``cpu_dedicated_set`` is
checked: a pinned vCPU expects its core to itself.
"""

from nova.virt import hardware
from oslo_log import log as logging

from os_brick_connector import exception as spdk_exception
from os_brick_connector import numa

LOG = logging.getLogger(__name__)


def reactor_cores(client):
    """The reactors' host CPU ids, and whether all sleep when idle.

    SPDK's lcore is the CPU id; ``in_interrupt`` says interrupt mode.
    """
    reactors = client.framework_get_reactors()['reactors']
    return ({reactor['lcore'] for reactor in reactors},
            numa.in_interrupt_mode(reactors))


def check_overlap(client):
    """Warn about each Nova CPU set overlapping the reactors.

    Returns {option name: overlapping CPUs}; an unreachable SPDK target
    is a warning too, not a failure: nova-compute must still start.
    """
    try:
        cores, interrupt_mode = reactor_cores(client)
    except spdk_exception.SpdkRpcError as err:
        LOG.warning('Could not check whether Nova\'s CPU sets overlap the '
                    'SPDK reactor cores: %s', err)
        return {}
    overlaps = {}
    checked = [('cpu_dedicated_set', hardware.get_cpu_dedicated_set())]
    if not interrupt_mode:
        checked.append(('cpu_shared_set', hardware.get_cpu_shared_set()))
    for option, cpus in checked:
        common = cores & (cpus or set())
        if common:
            overlaps[option] = common
            LOG.warning('[compute] %(option)s contains CPUs %(cpus)s that '
                        'SPDK polls on with its reactors (cores %(cores)s): '
                        'guests there slow down SPDK and every volume it '
                        'serves. Remove them from %(option)s, or move the '
                        'SPDK reactors (spdk_tgt -m).',
                        {'option': option,
                         'cpus': hardware.format_cpu_spec(common),
                         'cores': hardware.format_cpu_spec(cores)})
    return overlaps
