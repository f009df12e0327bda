"""The SPDK releases the drivers support, and the check at start.

The Cinder driver, the connector and the Nova driver each ask their
target ``spdk_get_version`` when they start and refuse one this table
does not hold, naming the versions it does; the upgrade command
(:mod:`spdk_vhost_core.upgrade`) checks the new binary the same way
before it stops anything. Patch releases of a supported release (e.g.
26.01.1) are supported too.

Where the supported releases answer an RPC differently, the caller
handles both; the recorded transcripts are replayed against each
(tests/functional/test_conformance.py).
"""

from spdk_vhost_core import exception

#: (major, minor) of every supported SPDK release, oldest first.
SUPPORTED = ((26, 1), (26, 5))


def label(version):
    """``(26, 1)`` as SPDK names its releases: ``'26.01'``."""
    return '%d.%02d' % tuple(version[:2])


def supported_text():
    return ', '.join('v' + label(v) for v in SUPPORTED)


def parse(answer):
    """``(major, minor, patch)`` of a ``spdk_get_version`` answer."""
    fields = answer.get('fields') if isinstance(answer, dict) else None
    try:
        return (int(fields['major']), int(fields['minor']),
                int(fields.get('patch') or 0))
    except (TypeError, KeyError, ValueError):
        return None


def describe(answer):
    """The target's own words for its version, for messages."""
    if isinstance(answer, dict) and answer.get('version'):
        return answer['version']
    return 'an unknown version (%r)' % (answer,)


def is_supported(version):
    return version is not None and tuple(version[:2]) in SUPPORTED


def check_answer(answer, target):
    """The parsed version of ``answer``; raise if it is not supported."""
    version = parse(answer)
    if not is_supported(version):
        raise exception.UnsupportedSpdkVersion(
            target=target, found=describe(answer),
            supported=supported_text())
    return version


def check(client):
    """Ask ``client``'s target its version; raise if unsupported.

    Returns ``(major, minor, patch)``. Transport and RPC errors of the
    call are the client's own exceptions, raised as they are.
    """
    return check_answer(client.spdk_get_version(), client.target)
