"""What the tests, ``make demo`` and ``tools/`` share to run the real parts.

Real SPDK targets built by ``tools/build-spdk.sh``, and the helpers that
start and stop them. Product code never imports this package.
"""
