"""fio jobs for the guest, and the figures taken from fio's JSON report."""

import collections

Job = collections.namedtuple('Job', 'name rw bs iodepth')

# The published evaluation's matrix: 4K random at QD1 and QD64, 128K seq.
DATAPLANE_JOBS = (
    Job('4k-randread-qd1', 'randread', '4k', 1),
    Job('4k-randread-qd64', 'randread', '4k', 64),
    Job('4k-randwrite-qd1', 'randwrite', '4k', 1),
    Job('4k-randwrite-qd64', 'randwrite', '4k', 64),
    Job('128k-read-qd8', 'read', '128k', 8),
    Job('128k-write-qd8', 'write', '128k', 8),
)
PERCENTILES = ('50', '99', '99.9')


def arguments(job, device, size_mib, runtime=None, ramp=0,
              rate_iops=None):
    """fio's command-line arguments (one job, direct I/O, libaio).

    runtime None: one pass over size_mib instead of a timed run.
    """
    args = ['--name=%s' % job.name, '--filename=%s' % device,
            '--direct=1', '--ioengine=libaio', '--rw=%s' % job.rw,
            '--bs=%s' % job.bs, '--iodepth=%d' % job.iodepth,
            '--size=%dM' % size_mib, '--randrepeat=0', '--norandommap',
            '--lat_percentiles=1',
            '--percentile_list=%s' % ':'.join(PERCENTILES)]
    if runtime is not None:
        args += ['--time_based', '--runtime=%d' % runtime,
                 '--ramp_time=%d' % ramp]
    if rate_iops:
        args.append('--rate_iops=%d' % rate_iops)
    return ' '.join(args)


def _percentile(lat, pct):
    table = lat.get('percentile', {})
    for key, value in table.items():
        if float(key) == float(pct):
            return value / 1000.0
    return None


def figures(report):
    """IOPS, MiB/s, latency (µs: mean, p50, p99, p99.9) and I/O count.

    Read and write sides are summed (a job does one of them); latency
    is of the side that did the I/O.
    """
    job = report['jobs'][0]
    if job.get('error'):
        raise ValueError('fio job %s failed: error %s'
                         % (job.get('jobname'), job['error']))
    side = max((job['read'], job['write']), key=lambda s: s['total_ios'])
    lat = side['lat_ns']
    result = {'iops': job['read']['iops'] + job['write']['iops'],
              'bw_mib_s': (job['read']['bw'] + job['write']['bw']) / 1024.0,
              'ios': job['read']['total_ios'] + job['write']['total_ios'],
              'lat_mean_us': lat['mean'] / 1000.0}
    for pct in PERCENTILES:
        result['lat_p%s_us' % pct] = _percentile(lat, pct)
    return result
