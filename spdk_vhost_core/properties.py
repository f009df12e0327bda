"""The connection properties: what the Cinder driver hands the connector.

:class:`ConnectionProperties` is the wire format between the two sides;
its docstring is the reference, and the connector reads the dictionary
through it only, checked once when it is parsed.
"""

import collections.abc
import functools
import hashlib
import re

from spdk_vhost_core import exception
from spdk_vhost_core import replicas
from spdk_vhost_core import validation

CONTROLLER_PREFIX = 'vhost-'
LOCAL = validation.LOCAL
REMOTE_TRANSPORTS = validation.REMOTE_TRANSPORTS
# Also a safe socket file name, and short enough for sun_path.
VOLUME_ID = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$')
# Appended to a multiattach volume's controller name: which guest it is for.
ATTACHMENT_SEP = '.'
ATTACHMENT_TAG_LEN = 12


def attachment_tag(attached_to):
    """The short, socket-safe tag naming one guest's controller.

    ``attached_to`` is whatever tells the volume's guests on this host
    apart (Nova: the instance uuid). A hash keeps the socket path short
    (``sun_path`` holds 107 bytes) and its characters safe; 48 bits make
    two guests of one volume on one host colliding negligible.
    """
    if not isinstance(attached_to, str) or not attached_to:
        raise exception.InvalidProperties(
            'attached_to %r cannot name an SPDK controller'
            % (attached_to,))
    digest = hashlib.sha256(attached_to.encode('utf-8')).hexdigest()
    return digest[:ATTACHMENT_TAG_LEN]


def controller_name(volume_id, attached_to=None):
    """The vhost-blk controller of an attachment: a retry finds the same one.

    A volume attached to one guest per host (``attached_to`` None) has
    one controller named after it. A multiattach volume has one per guest
    (``attached_to`` given), all on the same bdev, so each guest gets its
    own socket and the disk serial stays the volume id.
    """
    if not isinstance(volume_id, str) or not VOLUME_ID.fullmatch(volume_id):
        raise exception.InvalidProperties(
            'volume_id %r cannot name an SPDK controller'
            % (volume_id,))
    name = CONTROLLER_PREFIX + volume_id
    if attached_to is None:
        return name
    return name + ATTACHMENT_SEP + attachment_tag(attached_to)


class ConnectionProperties(collections.abc.Mapping):
    """``connection_info['data']`` of an ``spdk_vhost`` volume.

    Cinder's ``initialize_connection`` returns ``{'driver_volume_type':
    'spdk_vhost', 'data': <these>}``:

    ``volume_id``
        The Cinder volume id; the controller and its socket are named
        from it (:func:`controller_name`).
    ``transport``
        ``local`` when the compute host's SPDK target holds the lvol
        itself (its ``spdk_target_id`` is the backend's), else ``tcp``
        or ``rdma``; ``replicated`` for a volume kept on several
        storage targets, whose exports are in ``replicas``.
    ``bdev``, ``lvol_uuid``
        The lvol (``<lvstore>/<name>`` alias and uuid); ``local``
        attaches it directly.
    ``nqn``, ``traddr``, ``trsvcid``, ``adrfam``, ``ns_id``, ``host_nqn``
        Remote only: the volume's NVMe-oF subsystem, where it listens,
        and the one host it admits.
    ``dhchap_key``, ``dhchap_ctrlr_key``
        Remote only, with ``spdk_nvmf_auth = dhchap``: this attachment's
        DH-HMAC-CHAP secrets.
    ``replicas``
        Replicated only: one dict per storage target holding a copy,
        each with the remote keys above and a ``target_id``
        (:mod:`~spdk_vhost_core.replicas`); the compute host mirrors them.
    ``access_mode``, ``block_size``
        ``rw`` or ``ro``; 512 or 4096.
    ``qos_specs``
        Front-end QoS limits, added by Cinder for ``front-end`` and
        ``both`` consumers; set on the compute target (:mod:`qos`).

    Nova adds two before it calls the connector:

    ``numa_node``
        The host NUMA node (int) of the guest, or absent when it has no
        preference; the controller is polled by a reactor there.
    ``attached_to``
        For a multiattach volume, what tells its guests on this host
        apart (the instance uuid): each guest gets its own controller.

    ``strict`` False (disconnect, extend, lookups) checks only what
    names the controller, so an attachment made from older properties
    can still be taken apart. Malformed properties raise
    :class:`~spdk_vhost_core.exception.InvalidProperties` naming the key,
    before any RPC; the connector raises it as os-brick's
    ``InvalidConnectionProperties``.
    """

    def __init__(self, data, strict=True):
        if not isinstance(data, dict):
            raise exception.InvalidProperties(
                'expected a dict, got %s' % type(data).__name__)
        if strict:
            validation.check_properties(data, VOLUME_ID)
        self._data = dict(data)
        self.volume_id = data.get('volume_id')
        self.attached_to = data.get('attached_to')
        self.controller = controller_name(self.volume_id, self.attached_to)

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)

    @property
    def transport(self):
        return self._data.get('transport')

    @property
    def is_local(self):
        return self.transport == LOCAL

    @property
    def is_remote(self):
        return self.transport in REMOTE_TRANSPORTS

    @property
    def bdev(self):
        return self._data.get('bdev')

    @property
    def read_only(self):
        return self._data.get('access_mode') == 'ro'

    @property
    def numa_node(self):
        return self._data.get('numa_node')

    @property
    def qos_specs(self):
        return self._data.get('qos_specs')

    @functools.cached_property
    def replicas(self):
        """A replicated volume's :class:`~replicas.Replica` list; else None.

        Parsed once, at the first use.
        """
        return replicas.replicas(self._data)
