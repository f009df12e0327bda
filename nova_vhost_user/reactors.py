"""Start-up check: Nova's guest CPUs must not be SPDK's reactor cores.

SPDK reactors busy-poll their cores at 100%; a guest vCPU pinned or
floating onto one of them fights the reactor, which slows every volume
that reactor serves. In interrupt mode (every reactor sleeps when idle)
floating guests may share the cores, but a pinned vCPU still expects its
core to itself.

Where guests run is Nova's libvirt driver's answer, mirrored here from
its ``_get_vcpu_available``, ``_get_pcpu_available`` and the legacy
fallback of ``_get_host_numa_topology``: floating vCPUs on
``[DEFAULT] vcpu_pin_set`` if set, else on ``[compute] cpu_shared_set``,
else nowhere if ``cpu_dedicated_set`` is set, else on every online host
CPU; pinned vCPUs on ``cpu_dedicated_set``, else (no shared set of the
new kind) on the floating CPUs, since the scheduler's fallback may pin
there too. Nova's default, neither set, thus lets guests onto the
reactor cores.
"""

import collections

from nova import exception
from nova.virt import hardware
from oslo_log import log as logging

from os_brick_connector import numa
from spdk_vhost_core import exception as spdk_exception

LOG = logging.getLogger(__name__)

VCPU_PIN_SET = '[DEFAULT] vcpu_pin_set'
SHARED_SET = '[compute] cpu_shared_set'
DEDICATED_SET = '[compute] cpu_dedicated_set'
# Not an option: Nova's default, where guests may use every online CPU.
UNSET = 'unset'

#: Host CPUs some guests may run on; ``pinned``: pinned vCPUs among them.
GuestCpus = collections.namedtuple('GuestCpus', 'source cpus pinned')


def reactor_cores(client):
    """The reactors' host CPU ids, and whether all sleep when idle.

    SPDK's lcore is the CPU id; ``in_interrupt`` says interrupt mode.
    """
    reactors = client.framework_get_reactors()['reactors']
    return ({reactor['lcore'] for reactor in reactors},
            numa.in_interrupt_mode(reactors))


def guest_cpus(online_cpus):
    """Where Nova may run guest vCPUs, per option (see the module doc).

    ``online_cpus``: the host's online CPU ids, as Nova reads them from
    libvirt (``Host.get_online_cpus``).
    """
    pin_set = hardware.get_vcpu_pin_set()
    shared = hardware.get_cpu_shared_set()
    dedicated = hardware.get_cpu_dedicated_set()
    found = []
    if pin_set:
        # Floating and (by the fallback) pinned vCPUs alike; Nova refuses
        # it together with cpu_dedicated_set.
        found.append(GuestCpus(VCPU_PIN_SET, pin_set, True))
    if shared:
        # Floating vCPUs, or with vcpu_pin_set emulator threads only.
        found.append(GuestCpus(SHARED_SET, shared, False))
    if dedicated:
        found.append(GuestCpus(DEDICATED_SET, dedicated, True))
    if not found:
        found.append(GuestCpus(UNSET, set(online_cpus), True))
    return found


def _problem(use, common, cores):
    """One sentence per overlap: which option, which CPUs, what to do."""
    cpus = hardware.format_cpu_spec(common)
    if use.source != UNSET:
        return ('%(option)s contains CPUs %(cpus)s that SPDK\'s reactors '
                'run on (cores %(cores)s): remove them from %(option)s, or '
                'move the reactors (spdk_tgt -m).' % {
                    'option': use.source, 'cpus': cpus,
                    'cores': hardware.format_cpu_spec(cores)})
    rest = use.cpus - cores
    if rest:
        advice = ('set %s (and %s for pinned guests) to CPUs without them, '
                  'e.g. cpu_shared_set = %s' % (
                      SHARED_SET, DEDICATED_SET,
                      hardware.format_cpu_spec(rest)))
    else:
        advice = ('this host has no CPU left for guests besides the '
                  'reactors\': give SPDK fewer cores (spdk_tgt -m)')
    return ('Neither %s nor %s nor %s is set, so guests, pinned ones too, '
            'may run on every online host CPU, SPDK\'s reactor cores %s '
            'included: %s.' % (SHARED_SET, DEDICATED_SET, VCPU_PIN_SET,
                               cpus, advice))


def check_overlap(client, online_cpus, refuse=False):
    """Warn about, or refuse, guest CPUs that are SPDK reactor cores.

    Returns {option (or ``UNSET``): overlapping CPUs}. ``refuse`` raises
    InvalidConfiguration instead of warning. An unreachable SPDK target
    is only a warning: nova-compute must still start.
    """
    try:
        cores, interrupt_mode = reactor_cores(client)
    except spdk_exception.SpdkRpcError as err:
        LOG.warning('Could not check whether Nova\'s guest CPUs include '
                    'the SPDK reactor cores: %s', err)
        return {}
    overlaps, problems = {}, []
    for use in guest_cpus(online_cpus):
        common = cores & use.cpus
        if common and (use.pinned or not interrupt_mode):
            overlaps[use.source] = common
            problems.append(_problem(use, common, cores))
    if not problems:
        return overlaps
    why = ('Guests on SPDK\'s busy-polling reactor cores slow down SPDK '
           'and every volume it serves' if not interrupt_mode else
           'SPDK\'s reactors sleep when idle (interrupt mode), but a '
           'pinned guest vCPU expects its core to itself')
    message = ' '.join(problems) + ' ' + why + '.'
    if refuse:
        raise exception.InvalidConfiguration(
            message + ' ([spdk_vhost] nova_refuse_reactor_overlap is set: '
            'nova-compute does not start.)')
    LOG.warning('%s', message)
    return overlaps
