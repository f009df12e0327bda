"""Time an operation and count the JSON-RPC calls it makes."""

import time


def measure(counter, func, *args, **kwargs):
    """(func's result, {'seconds': s, 'rpc_calls': n, 'rpc': {method: n}})."""
    with counter.measure() as calls:
        start = time.monotonic()
        result = func(*args, **kwargs)
        seconds = time.monotonic() - start
    return result, {'seconds': seconds, 'rpc_calls': sum(calls.values()),
                    'rpc': dict(calls)}


def summarise(samples):
    """Mean/min/max seconds of repeated samples; RPCs of the first one.

    The RPC count of one operation does not vary between repeats (it is
    reported as a list when it does, rather than hidden).
    """
    seconds = [s['seconds'] for s in samples]
    counts = sorted({s['rpc_calls'] for s in samples})
    return {'seconds_mean': sum(seconds) / len(seconds),
            'seconds_min': min(seconds), 'seconds_max': max(seconds),
            'repeats': len(samples),
            'rpc_calls': counts[0] if len(counts) == 1 else counts,
            'rpc': samples[0]['rpc']}
