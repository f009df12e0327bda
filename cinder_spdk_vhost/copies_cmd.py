"""spdk-vhost-copies: compare the copies of a detached replicated volume.

``spdk-vhost-copies --backend SECTION compare <volume id>`` reads every
copy of the volume through its own export and prints the regions of the
guest's disk that are not the same on all of them, each copy's digest
there, and which copies the RAID superblocks say lack writes
(:mod:`replica_compare`). Exit 0 when the copies agree and none is
stale, 1 when one differs or is stale, 3 on an error.

``spdk-vhost-copies --backend SECTION renew <volume id> --copy WHERE``
makes the copy on ``WHERE`` (a target as the compare names it) one the
next mirror rebuilds from the others: the operator's call, once the
compare showed which copy is wrong.

It runs where that backend's cinder-volume runs, with its cinder.conf
(``--config-file``): it needs the backend's section, Cinder's database
to find the volume, and ``[coordination]`` to take the volume's lock,
so that no operation of cinder-volume changes the copies meanwhile. The
volume must be detached (``available``).
"""

import argparse
import sys

from cinder import context
from cinder import coordination
from cinder import exception
from cinder import objects
from cinder.volume import configuration
from cinder.volume import driver as cinder_driver
from cinder.volume import volume_utils
from oslo_config import cfg

from cinder_spdk_vhost import driver
from cinder_spdk_vhost import replica_compare
from spdk_vhost_core import exception as spdk_exc

CONF = cfg.CONF
ERROR = 3


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog='spdk-vhost-copies',
        description='Compare, or renew, the copies of a detached '
                    'replicated volume of an SPDK vhost backend.')
    parser.add_argument('--config-file', action='append', default=[],
                        help='cinder.conf (default: oslo.config\'s search '
                             'for cinder.conf)')
    parser.add_argument('--backend', required=True,
                        help='the backend\'s section in cinder.conf')
    sub = parser.add_subparsers(dest='command', required=True)
    compare = sub.add_parser('compare', help='the regions where the '
                             'copies differ; exit 1 if any, or a stale copy')
    compare.add_argument('volume_id')
    compare.add_argument('--region-mib', type=int,
                         default=replica_compare.REGION_MIB,
                         help='size of the regions compared (default '
                              '%(default)s)')
    renew = sub.add_parser('renew', help='make a copy the next mirror '
                           'rebuilds from the others')
    renew.add_argument('volume_id')
    renew.add_argument('--copy', required=True, help='where the copy is, '
                       'as compare names it')
    return parser.parse_args(argv)


def write_report(report, out):
    """Print a :class:`replica_compare.Report`; its exit code."""
    mib = report.region // (1024 * 1024)
    out.write('copies: %s\n' % ', '.join(report.copies))
    out.write('superblocks: %s\n' % (
        'stale: %s' % ', '.join(report.stale) if report.stale
        else 'every copy in sync'))
    out.write('%d regions of %d MiB compared, %d differ\n'
              % (report.regions, mib, len(report.differ)))
    for offset, digests in report.differ:
        out.write('  at %d MiB: %s\n' % (offset // (1024 * 1024), ', '.join(
            '%s %s' % (where, digests[where][:16])
            for where in report.copies)))
    gib = report.read / 1024 ** 3
    out.write('read %.1f GiB in %.1f s (%.1f s per GiB)\n'
              % (gib, report.seconds, report.seconds / gib))
    return 1 if report.differ or report.stale else 0


def run(compare, volume, args, out):
    """The subcommand on ``volume``; its exit code."""
    if args.command == 'compare':
        return write_report(compare.report(volume, args.region_mib), out)
    compare.renew(volume, args.copy)
    out.write('the copy on %s is rebuilt by the next mirror of volume %s, '
              'once the volume is attached\n' % (args.copy, volume.id))
    return 0


def check_backend(volume, backend):
    """Refuse a volume of another backend than ``backend``."""
    host = volume_utils.extract_host(volume.host, 'backend') or ''
    if host.partition('@')[2] != backend:
        raise exception.InvalidInput(
            reason='volume %s is on %s, not on backend %s'
                   % (volume.id, volume.host, backend))


def _driver(backend):
    """The backend's driver, built as cinder-volume builds it.

    Only set up (:meth:`do_setup`): nothing of the target is prepared or
    swept, and no periodic task starts.
    """
    conf = configuration.Configuration(cinder_driver.volume_opts,
                                       config_group=backend)
    drv = driver.SpdkVhostDriver(configuration=conf, host=CONF.host)
    drv.do_setup(context.get_admin_context())
    return drv


def main(argv=None, out=sys.stdout):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        CONF(args=[], project='cinder',
             default_config_files=args.config_file or None)
        objects.register_all()
        volume = objects.Volume.get_by_id(context.get_admin_context(),
                                          args.volume_id)
        check_backend(volume, args.backend)
        coordination.COORDINATOR.start()
        try:
            drv = _driver(args.backend)
            return run(replica_compare.Compare(drv.replicas), volume, args,
                       out)
        finally:
            coordination.COORDINATOR.stop()
    except (exception.CinderException, spdk_exc.SpdkVhostError,
            cfg.Error, OSError) as err:
        print('spdk-vhost-copies: %s' % err, file=sys.stderr)
        return ERROR


if __name__ == '__main__':
    sys.exit(main())
