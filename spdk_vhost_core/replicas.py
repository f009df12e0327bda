"""The wire format of a replicated volume: several exports of one volume.

A replicated volume is one lvol on each of 2 or 3 storage targets (each
target a failure domain), every one exported over NVMe-oF. Cinder's
connection properties then carry ``transport: replicated`` and
``replicas``, a list with one dict per lvol::

    {'volume_id': <id>, 'transport': 'replicated',
     'replicas': [{'target_id': 'storage-a', 'transport': 'tcp',
                   'nqn': ..., 'traddr': ..., 'trsvcid': ..., ...},
                  {'target_id': 'storage-b', ...}],
     'access_mode': 'rw', 'block_size': 512, ...}

Each replica holds the keys a single remote volume has at the top level
(``transport``, ``nqn``, ``traddr``, ``trsvcid``, ``adrfam``, ``ns_id``,
``host_nqn``, ``dhchap_key``, ``dhchap_ctrlr_key``; see
:class:`~spdk_vhost_core.properties.ConnectionProperties`), checked the
same way, plus ``target_id``: the storage target that holds it, as the
backend names it; two replicas on one target would fail together, so
they are refused. The top level keeps what describes the volume and its
guest (``volume_id``, ``access_mode``, ``block_size``, ``qos_specs``,
``numa_node``, ``attached_to``) and no remote keys of its own. While a
storage target is away, Cinder hands over the copies left, down to one:
the mirror, which its superblock names in full, starts degraded.

The compute side assembles the replicas into a RAID1 with a superblock
(``os_brick_connector.replicas``). A connector that predates replicas
refuses these properties (an unknown ``transport``) rather than attach a
single copy.
"""

import re

from spdk_vhost_core import exception

#: ``transport`` of a replicated volume's properties.
REPLICATED = 'replicated'
KEY = 'replicas'
TARGET_ID = 'target_id'
#: The copies a replicated volume has, and the fewest an attach may get.
MAX_REPLICAS = 3
MIN_REPLICAS = 1
#: Cinder's target identities: a host name, or tcp:<address>:<port>.
_TARGET_ID = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.:\[\]-]{0,254}$')
#: Keys of a single remote volume that a replicated one keeps per replica.
REMOTE_KEYS = ('nqn', 'traddr', 'trsvcid', 'adrfam', 'ns_id', 'host_nqn',
               'dhchap_key', 'dhchap_ctrlr_key')


def _bad(where, why):
    return exception.InvalidProperties(reason='%s %s' % (where, why))


def check(props, check_export, remote_transports):
    """Refuse a malformed replicated volume, naming the replica and key.

    ``props`` has ``transport: replicated``; ``check_export(replica)``
    is the check of one remote export's keys (validation's, the one a
    single remote volume gets), ``remote_transports`` the transports a
    replica may use.
    """
    stray = [key for key in REMOTE_KEYS if key in props]
    if stray:
        raise _bad(', '.join(stray), 'belong in each of %s, not at the top '
                   'level of a replicated volume' % KEY)
    replicas = props.get(KEY)
    if not isinstance(replicas, list):
        raise _bad(KEY, 'must be a list of %d to %d remote exports, got %.40r'
                   % (MIN_REPLICAS, MAX_REPLICAS, replicas))
    if not MIN_REPLICAS <= len(replicas) <= MAX_REPLICAS:
        raise _bad(KEY, 'has %d entries: a replicated volume is attached '
                   'with %d to %d' % (len(replicas), MIN_REPLICAS,
                                      MAX_REPLICAS))
    seen = {}
    for index, replica in enumerate(replicas):
        where = '%s[%d]' % (KEY, index)
        if not isinstance(replica, dict):
            raise _bad(where, 'must be a dict, got %s'
                       % type(replica).__name__)
        target = replica.get(TARGET_ID)
        if not isinstance(target, str) or not _TARGET_ID.fullmatch(target):
            raise _bad('%s.%s=%.80r' % (where, TARGET_ID, target),
                       'is not a storage target identity')
        if target in seen:
            raise _bad('%s.%s=%r' % (where, TARGET_ID, target),
                       'is also %s[%d]\'s: replicas on one storage target '
                       'fail together' % (KEY, seen[target]))
        seen[target] = index
        if replica.get('transport') not in remote_transports:
            raise _bad('%s.transport=%.40r' % (where,
                                               replica.get('transport')),
                       'must be one of %s' % ', '.join(remote_transports))
        try:
            check_export(replica)
        except exception.InvalidProperties as err:
            raise _bad(where + ':', err.reason) from err
    _check_distinct(replicas)


def _check_distinct(replicas):
    """Two entries naming one export would mirror a volume onto itself."""
    exports = {}
    for index, replica in enumerate(replicas):
        export = (replica['traddr'], str(replica.get('trsvcid', '4420')),
                  replica['nqn'], replica.get('ns_id', 1))
        if export in exports:
            raise _bad('%s[%d]' % (KEY, index), 'is the same export as '
                       '%s[%d]' % (KEY, exports[export]))
        exports[export] = index


class Replica(object):
    """One entry of ``replicas``, parsed: a copy's export and its target.

    Read through its attributes (``target_id``, ``transport``, ``nqn``,
    ``traddr``, ``trsvcid``, ``adrfam``, ``ns_id``, ``host_nqn``,
    ``dhchap_key``, ``dhchap_ctrlr_key``: None when absent, ``ns_id``
    1), so that no caller reads the wire format's dict; os-brick's
    ``NVMeOFConnProps`` parses its ``volume_replicas`` the same way.
    """

    def __init__(self, data):
        self._data = dict(data)
        get = self._data.get
        self.target_id = get(TARGET_ID)
        self.transport = get('transport')
        self.nqn, self.traddr, self.trsvcid = (get('nqn'), get('traddr'),
                                               get('trsvcid'))
        self.adrfam, self.host_nqn = get('adrfam'), get('host_nqn')
        self.ns_id = get('ns_id', 1)
        self.dhchap_key = get('dhchap_key')
        self.dhchap_ctrlr_key = get('dhchap_ctrlr_key')

    def __repr__(self):
        return 'Replica(%s: %s@%s)' % (self.target_id, self.nqn, self.traddr)

    def remote(self, volume_id):
        """The properties of a single remote volume ``volume_id`` on it.

        What the NVMe-oF initiator attaches: this replica's keys, as a
        single remote volume has them at the top level.
        """
        return dict(self._data, volume_id=volume_id)

    def to_wire(self):
        """The dict it was parsed from, for new connection properties."""
        return dict(self._data)


def replicas(props):
    """The :class:`Replica` s of ``props``; None if unreplicated."""
    if props.get('transport') != REPLICATED:
        return None
    return tuple(Replica(replica) for replica in props.get(KEY) or ())
