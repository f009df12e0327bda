"""A chaos run: guests write through faults, and the figures are printed.

Guests on two compute targets attach, write and detach local, remote
and replicated volumes, one after another on each host, while storage
targets are SIGKILLed and brought back at random and the compute
targets are restarted now and then. It prints the operations done, the
target crashes it did not cause, the guests' I/O errors and wrong reads,
the longest stall a guest's writes saw, and what was left on any target
once every volume was deleted; it exits 1 unless all of those are 0.

    python -m tools.chaos --minutes 30

It is bounded in time (``--minutes``) and count (``--operations`` per
compute host), and is not a test: the short run in CI is
``tests/functional/test_chaos.py``.
"""
