"""spdk-vhost benchmark suite (issue 7): ``python -m tools.bench``.

Data plane (QEMU virtio-blk vs vhost-user-blk through our connector), QoS
isolation and accuracy, and the control plane (Cinder driver, connector),
written as one JSON file, PNG plots and a Markdown summary. See
doc/source/admin/benchmark.rst.
"""
