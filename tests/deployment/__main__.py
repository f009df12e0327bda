"""Run the Cinder deployment in the foreground: ``make cinder-deploy``.

For a human: start everything as the tests do, print how to reach it,
and stop (dropping the databases) on Ctrl-C or SIGTERM. With
``--tempest-conf`` also a keystone and a keystone-authenticated
cinder-api, and a tempest.conf for the plugin's API tests against them.
"""

import argparse
import os
import signal
import sys
import threading

from tests.deployment import cinder_conf
from tests.deployment import deployment
from tests.deployment import tempest_conf

TEMPEST_TYPE = 'high-iops'


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m tests.deployment')
    parser.add_argument('--tempest-conf', metavar='PATH',
                        help='also start keystone and a cinder-api behind '
                             'it, and write a tempest.conf for them here')
    args = parser.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_a: stop.set())
    dep = deployment.CinderDeployment()
    with dep:
        print('Cinder API (noauth): %s  token: %s:%s'
              % (dep.endpoint, deployment.USER, deployment.PROJECT))
        print('cinder.conf: %s' % dep.conf_path)
        print('logs: %s' % os.path.dirname(dep.log_path('cinder-api')))
        for target, _agent, _lvstores in dep.storage:
            print('storage node %s (nvmf_tgt at %s): socket %s  log: %s'
                  % (target.name, target.host.address, target.socket_path,
                     target.log_path))
        print('e.g. cinder --os-auth-type token_endpoint --os-endpoint %s '
              '--os-token %s:%s list'
              % (dep.endpoint, deployment.USER, deployment.PROJECT))
        if args.tempest_conf:
            front = dep.front()
            # The type the plugin's tests give their volumes by default.
            vtype = dep.admin.volume_types.create(TEMPEST_TYPE)
            vtype.set_keys({'volume_backend_name': cinder_conf.BACKEND})
            tempest_conf.write(args.tempest_conf, tempest_conf.build(
                dep, front.keystone.uri, front.keystone.admin_password,
                volume_type=TEMPEST_TYPE))
            print('keystone: %s  cinder-api (keystone): %s'
                  % (front.keystone.uri, front.endpoint))
            print('tempest.conf: %s' % args.tempest_conf)
        print('Ctrl-C stops everything and drops database %s'
              % dep.database.name)
        sys.stdout.flush()
        while not stop.wait(1):
            dead = dep.dead_services()
            if dead:
                print('%s exited; stopping' % ', '.join(dead))
                return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
