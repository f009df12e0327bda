"""Time an operation and count the JSON-RPC calls it makes."""

import statistics
import time


def measure(counter, func, *args, **kwargs):
    """(func's result, its sample).

    The sample: ``seconds``, ``rpc_calls`` (n), ``rpc`` ({method: n}),
    ``reply_bytes`` (total) and ``rpc_reply_bytes`` ({method: bytes}).
    """
    with counter.measure() as calls:
        start = time.monotonic()
        result = func(*args, **kwargs)
        seconds = time.monotonic() - start
    return result, {'seconds': seconds, 'rpc_calls': sum(calls.values()),
                    'rpc': dict(calls),
                    'reply_bytes': sum(calls.reply_bytes.values()),
                    'rpc_reply_bytes': dict(calls.reply_bytes)}


def summarise(samples):
    """Mean/median/min/max seconds of repeated samples; RPCs of the first.

    The RPC count of one operation does not vary between repeats (it is
    reported as a list when it does, rather than hidden); reply bytes are
    the most any repeat got.
    """
    seconds = [s['seconds'] for s in samples]
    counts = sorted({s['rpc_calls'] for s in samples})
    return {'seconds_mean': sum(seconds) / len(seconds),
            'seconds_median': statistics.median(seconds),
            'seconds_min': min(seconds), 'seconds_max': max(seconds),
            'repeats': len(samples),
            'rpc_calls': counts[0] if len(counts) == 1 else counts,
            'rpc': samples[0]['rpc'],
            'reply_bytes': max(s.get('reply_bytes', 0) for s in samples),
            'rpc_reply_bytes': samples[0].get('rpc_reply_bytes', {})}
