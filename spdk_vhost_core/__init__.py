"""The shared SPDK core: the client, errors, QoS, saved config, wire format.

Imported by the Cinder driver, the connector, the Nova driver and the
tempest plugin; it imports none of them.
"""
