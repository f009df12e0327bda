"""Hypothesis strategies for hostile connection_info and connector dicts.

Shared by the Cinder and Nova fuzz tests (this module imports neither).
Values are mostly near-misses of real ones, which reach deeper into the
checks than random bytes, mixed with arbitrary JSON.
"""

from hypothesis import strategies as st

from spdk_vhost_core import exception as spdk_exc

VOLUME_ID = '6a1c7b8e-0d2f-4c3e-9a51-0a2b3c4d5e6f'
GOOD_NQN = ('nqn.2014-08.org.nvmexpress:uuid:'
            '1b4e28ba-2fa1-11d2-883f-b9a761bde3fb')

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
    st.text(max_size=40))
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=8), inner,
                                            max_size=3)),
    max_leaves=8)

hostile_text = st.sampled_from([
    '', ' ', '../../etc/passwd', 'a/../../b', '/abs/path', 'x' * 300,
    'nqn', 'nqn.', 'nqn.2014-13.org.x:y', 'nqn.2014-08.org.x: space',
    'nqn.2014-08.org.x:\n', 'lvs0/vol\x00', 'vol;rm -rf /', '\u00e9t\u00e9',
    '-1', '1e999', 'NaN', '0x10', VOLUME_ID, GOOD_NQN, 'lvs0/volume-1',
    '192.0.2.1', '::1', '4420', '99999', 'tcp', 'local', 'rdma', 'fc'])

values = st.one_of(hostile_text, json_values,
                   st.integers(min_value=-2 ** 70, max_value=2 ** 70))

_KEYS = ('volume_id', 'bdev', 'lvol_uuid', 'transport', 'nqn', 'traddr',
         'trsvcid', 'adrfam', 'ns_id', 'host_nqn', 'access_mode',
         'block_size', 'qos_specs', 'numa_node')


@st.composite
def connection_data(draw):
    """A connection_info['data'] with some keys good, some hostile."""
    good = {'volume_id': VOLUME_ID, 'bdev': 'lvs0/volume-' + VOLUME_ID,
            'lvol_uuid': VOLUME_ID, 'transport': draw(st.sampled_from(
                ['local', 'tcp'])), 'nqn': GOOD_NQN, 'traddr': '192.0.2.1',
            'trsvcid': '4420', 'adrfam': 'ipv4', 'ns_id': 1,
            'host_nqn': GOOD_NQN, 'access_mode': 'rw', 'block_size': 512}
    data = {}
    for key in _KEYS:
        choice = draw(st.integers(0, 3))
        if choice == 0 and key in good:
            data[key] = good[key]
        elif choice == 1:
            data[key] = draw(values)
    extra = draw(st.dictionaries(st.text(max_size=8), values, max_size=2))
    data.update(extra)
    return data


anything = st.one_of(connection_data(), json_values, hostile_text)


@st.composite
def connectors(draw):
    """os-brick connector properties, possibly hostile."""
    props = {'host': draw(st.one_of(st.just('compute1'), values)),
             'initiator': 'iqn.x'}
    if draw(st.booleans()):
        props['nqn'] = draw(st.one_of(st.just(GOOD_NQN), values))
    if draw(st.booleans()):
        props['spdk_target_id'] = draw(st.one_of(
            st.sampled_from(['compute1', 'storage-target']), values))
    return props


connector_dicts = st.one_of(connectors(), json_values)


class AbsentTarget(object):
    """A stand-in SPDK client: counts calls, fails each as if no target.

    Fuzzed input must be refused before any RPC; a test asserts
    ``calls`` stayed empty, and a call that slips through still fails
    the documented way.
    """

    target = 'unix:/nonexistent'

    def __init__(self):
        self.calls = []

    def call(self, method, params=None):
        self.calls.append(method)
        raise spdk_exc.TargetUnreachable(method, params, message='fuzz')

    def observe(self, observer):
        """Nothing is ever answered, so there is nothing to see."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: self.call(name, kwargs)
