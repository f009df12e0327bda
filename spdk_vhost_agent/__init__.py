"""spdk-vhost-agent: a storage node's SPDK target, reached from Cinder.

See :mod:`spdk_vhost_agent.server`.
"""
