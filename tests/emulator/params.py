"""A declarative params decoder with spdk_json_decode_object's rules.

SPDK decodes every RPC's params against a table of (name, decoder,
optional). Anything the table does not know, a value of the wrong JSON
type, or a missing required key fails the whole call with the same -32603
"spdk_json_decode_object failed", so clients learn nothing more specific;
the emulator must be exactly that strict or tests would pass against it
and fail against SPDK.
"""

from tests.emulator import errors

DECODE_FAILED = 'spdk_json_decode_object failed'
UINT64_MAX = 2 ** 64 - 1
UINT32_MAX = 2 ** 32 - 1


def decode_failed():
    return errors.RpcError(errors.INTERNAL_ERROR, DECODE_FAILED)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def string(value):
    if not isinstance(value, str):
        raise decode_failed()
    return value


def boolean(value):
    if not isinstance(value, bool):
        raise decode_failed()
    return value


def _ranged(low, high):
    def decode(value):
        if not _is_int(value) or not low <= value <= high:
            raise decode_failed()
        return value
    return decode


uint64 = _ranged(0, UINT64_MAX)
uint32 = _ranged(0, UINT32_MAX)
uint16 = _ranged(0, 2 ** 16 - 1)
uint8 = _ranged(0, 255)
int32 = _ranged(-2 ** 31, 2 ** 31 - 1)


def list_of(item):
    def decode(value):
        if not isinstance(value, list):
            raise decode_failed()
        return [item(v) for v in value]
    return decode


class Opt(object):
    """Marks a field optional (SPDK's ``true`` in the decoder table)."""

    def __init__(self, decoder):
        self.decoder = decoder


class Object(object):
    """Decoder for a JSON object: ``Object(name=decoder, other=Opt(...))``.

    Calling it returns a dict holding only the keys that were sent, so
    handlers can tell "absent" from "given" (SPDK's NOT_DEFINED values).
    """

    def __init__(self, **fields):
        self.fields = {}
        self.required = set()
        for name, decoder in fields.items():
            if isinstance(decoder, Opt):
                self.fields[name] = decoder.decoder
            else:
                self.fields[name] = decoder
                self.required.add(name)

    def __call__(self, value):
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise decode_failed()
        unknown = set(value) - set(self.fields)
        missing = self.required - set(value)
        if unknown or missing:
            raise decode_failed()
        return {k: self.fields[k](v) for k, v in value.items()}


NO_PARAMS = Object()


def any_json(value):
    """For parameters the emulator stores but never interprets."""
    return value
