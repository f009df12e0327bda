"""How long a compute host rides out its storage target being away.

A compute host's SPDK initiator (``bdev_nvme``) retries a lost NVMe-oF
connection every ``reconnect_delay_sec``; I/O fails to the guest once
``fast_io_fail_timeout_sec`` has passed (0: only when the controller is
dropped), and the controller, with the guest's disk, is dropped after
``ctrlr_loss_timeout_sec`` (-1: never). A storage target upgrade
(:mod:`upgrade`) may keep the target away for :func:`window` seconds,
so a host rides it out only if neither timeout ends before the target is
back and one more retry has had time to run (:func:`shortfall`).

The host reports its three settings to Cinder in its connector
properties under :data:`KEY`; Cinder records them beside the target's
saved config (:mod:`host_settings`) for the upgrade command to check.
"""

from spdk_vhost_core import exception

#: The connector properties' key holding this host's settings.
KEY = 'spdk_nvme_reconnect'
#: Its fields: ``bdev_nvme_attach_controller``'s own parameter names.
LOSS = 'ctrlr_loss_timeout_sec'
DELAY = 'reconnect_delay_sec'
FAST_FAIL = 'fast_io_fail_timeout_sec'
FIELDS = (LOSS, DELAY, FAST_FAIL)

#: ``spdk-vhost-upgrade --timeout`` default: the longest it waits for a
#: stop, and for a started target to list every object. Measured on a
#: loaded 2-core machine (upgrade guide): a stop takes 0.15 s, a start
#: about 1 s plus 35-45 ms per NVMe-oF export (100 exports: 4.2 s), so
#: larger targets need a larger --timeout, and hosts that ride it out.
UPGRADE_TIMEOUT = 10
#: Seconds the command waits for a target to go after SIGKILL.
KILL_WAIT = 10

# The connector's defaults: they cover window(UPGRADE_TIMEOUT) = 60 s plus
# one reconnect delay, with some margin (see the upgrade guide).
DEFAULT_LOSS = 120
DEFAULT_DELAY = 2
DEFAULT_FAST_FAIL = 70

# SPDK keeps the two timeouts in 32 bits.
_MAX = 2 ** 31 - 1


def window(timeout=UPGRADE_TIMEOUT):
    """Longest time an upgrade with ``timeout`` keeps a target away.

    The worst case is a failed upgrade: the old target's stop (``timeout``
    for SIGTERM, then SIGKILL), the new one not listing every object
    within ``timeout``, its stop, and the old one coming back within
    ``timeout``.
    """
    return int(round(4 * timeout + 2 * KILL_WAIT))


def from_conf(conf):
    """This host's settings, from its ``[spdk_vhost]`` options."""
    return {LOSS: conf.nvme_ctrlr_loss_timeout_sec,
            DELAY: conf.nvme_reconnect_delay_sec,
            FAST_FAIL: conf.nvme_fast_io_fail_timeout_sec}


class Invalid(exception.SpdkVhostError, ValueError):
    """Settings SPDK would refuse; ``field`` is the one to change."""

    def __init__(self, field, message):
        self.field = field
        super().__init__(message)


def _int(settings, field, low, name):
    value = settings.get(field)
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid(field, '%s=%.40r is not an integer' % (name, value))
    if not low <= value <= _MAX:
        raise Invalid(field, '%s=%d is out of range' % (name, value))
    return value


def check(settings, names=None):
    """The three settings of ``settings`` as SPDK accepts them.

    The same rules ``bdev_nvme_attach_controller`` applies (-22
    otherwise, see ``bdev_nvme_check_io_error_resiliency_params`` in
    SPDK's bdev_nvme.c): a loss timeout of 0 (never reconnect) needs the
    other two at 0; otherwise the delay must be above 0 and not above
    the loss timeout, and a fast-fail timeout other than 0 must lie
    between the delay and the loss timeout (-1: no upper bound).
    Raises :class:`Invalid`; messages call each field by ``names[field]``
    (e.g. the option that sets it), else by its own name.
    """
    name = dict(zip(FIELDS, FIELDS), **(names or {}))
    if not isinstance(settings, dict):
        raise Invalid(None, 'expected a dict of %s, got %s'
                      % (', '.join(FIELDS), type(settings).__name__))
    loss = _int(settings, LOSS, -1, name[LOSS])
    delay = _int(settings, DELAY, 0, name[DELAY])
    fast_fail = _int(settings, FAST_FAIL, 0, name[FAST_FAIL])
    if loss == 0:
        if delay or fast_fail:
            raise Invalid(LOSS, '%s is 0 (never reconnect), so %s and %s '
                          'must be 0 too' % (name[LOSS], name[DELAY],
                                             name[FAST_FAIL]))
    elif delay == 0:
        raise Invalid(DELAY, '%s must be above 0 when %s is not 0'
                      % (name[DELAY], name[LOSS]))
    elif loss != -1 and delay > loss:
        raise Invalid(DELAY, '%s (%d) exceeds %s (%d)'
                      % (name[DELAY], delay, name[LOSS], loss))
    elif loss != -1 and fast_fail > loss:
        raise Invalid(FAST_FAIL, '%s (%d) exceeds %s (%d)'
                      % (name[FAST_FAIL], fast_fail, name[LOSS], loss))
    elif fast_fail and fast_fail < delay:
        raise Invalid(FAST_FAIL, '%s (%d) is below %s (%d)'
                      % (name[FAST_FAIL], fast_fail, name[DELAY], delay))
    return {LOSS: loss, DELAY: delay, FAST_FAIL: fast_fail}


def needed(settings, seconds):
    """What each timeout must reach to ride out ``seconds`` away.

    The target may come back just after a failed retry: the next one
    runs ``reconnect_delay_sec`` later.
    """
    return seconds + settings[DELAY]


def shortfall(settings, seconds):
    """Why ``settings`` do not ride out ``seconds`` away, or None.

    ``settings`` must have passed :func:`check`.
    """
    need = needed(settings, seconds)
    loss, fast_fail = settings[LOSS], settings[FAST_FAIL]
    if loss == 0:
        return '%s is 0: it never reconnects' % LOSS
    short = ['%s %d < %d s' % (field, value, need)
             for field, value in ((LOSS, loss), (FAST_FAIL, fast_fail))
             if value not in (-1, 0) and value < need]
    return ', '.join(short) or None
