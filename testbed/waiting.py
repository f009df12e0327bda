"""The one way a test waits: for what it needs to see, up to a deadline.

A test never sleeps for a time it hopes is enough: it polls what it
waits for, and a timeout names it (and, with ``on_timeout``, what was
seen instead), so a failure says what did not happen.
"""

import time


class TimedOut(AssertionError):
    """What was waited for did not happen in time: a test failure."""


def wait_for(what, predicate, timeout, interval=0.5, on_timeout=None):
    """Poll ``predicate`` until it returns a true value; return that.

    ``what``: what is waited for, in the failure's words.
    ``on_timeout``: called at the deadline for text to add (a log).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            detail = on_timeout() if on_timeout else ''
            raise TimedOut('timed out after %ss waiting for %s\n%s'
                           % (timeout, what, detail))
        time.sleep(interval)
