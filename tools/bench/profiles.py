"""How long and how big: the full run, and the one-minute smoke run."""

import collections

Profile = collections.namedtuple('Profile', [
    'name',
    'runtime',          # seconds per fio job
    'ramp',             # fio ramp time, seconds
    'size_mib',         # region each job works on
    'jobs',             # data-plane fio jobs (names from fio.DATAPLANE_JOBS)
    'victim_rate',      # IOPS of the QoS-isolation victim (light reads)
    'aggressor_limit',  # IOPS limit of the aggressor's QoS spec
    'iops_limits',      # QoS accuracy: IOPS limits
    'bw_limits',        # QoS accuracy: MiB/s limits
    'volume_sizes_gib',  # control plane: create/snapshot/clone sizes
    'repeats',          # control plane: repetitions per operation
    'attach_counts',    # N volumes attached to one host
    'idle_seconds',     # modes: CPU of an idle target measured over this
    'scale_pools',      # scale: volumes already in the pool
    'scale_controllers',  # scale: controllers already on the target
    'attach_memory_mib',  # attach_memory: guest sizes (2 MiB hugepages)
])

FULL = Profile(
    name='full', runtime=30, ramp=5, size_mib=1024, jobs=None,
    victim_rate=200, aggressor_limit=1000,
    iops_limits=(1000, 2000, 5000, 10000, 20000, 50000, 100000),
    bw_limits=(10, 50, 100, 500),
    volume_sizes_gib=(1, 64), repeats=5, attach_counts=(1, 2, 4, 8, 16, 32),
    idle_seconds=5, scale_pools=(10, 100, 1000),
    scale_controllers=(1, 10, 100),
    attach_memory_mib=(512, 1024, 2048, 4096))

# Every experiment and every figure, each as short as still gives a
# number: a functional check, never a performance measurement. One
# latency job and one throughput job; one IOPS limit a TCG guest reaches
# and one it does not (both ways a point is reported).
QUICK = Profile(
    name='quick', runtime=1, ramp=0, size_mib=32,
    jobs=('4k-randread-qd1', '4k-randwrite-qd64'),
    victim_rate=50, aggressor_limit=1000,
    iops_limits=(1000, 100000), bw_limits=(10,),
    volume_sizes_gib=(1, 64), repeats=1, attach_counts=(1, 2, 4),
    idle_seconds=2, scale_pools=(10, 200), scale_controllers=(1, 10),
    attach_memory_mib=(512,))

PROFILES = {p.name: p for p in (FULL, QUICK)}
