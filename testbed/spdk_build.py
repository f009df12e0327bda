"""Where the SPDK applications built by ``tools/build-spdk.sh`` are."""

import functools
import os
import pwd
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD_SCRIPT = os.path.join(REPO, 'tools', 'build-spdk.sh')
APPS = ('spdk_tgt', 'vhost', 'nvmf_tgt', 'spdk_dd')


class SpdkNotBuilt(RuntimeError):
    pass


@functools.lru_cache(maxsize=None)
def spdk_dir(version=None):
    """The built SPDK tree: ``$SPDK_DIR``, else the build script's cache.

    The script builds SPDK on its first run on a machine (minutes) and
    answers at once afterwards; ``make test`` runs it before any test.
    """
    tree = os.environ.get('SPDK_DIR')
    if not tree:
        cmd = [BUILD_SCRIPT] + ([version] if version else [])
        done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True,
                              env=_build_env())
        if done.returncode != 0:
            raise SpdkNotBuilt('%s failed (exit %d)'
                               % (' '.join(cmd), done.returncode))
        tree = done.stdout.strip().splitlines()[-1]
    for app in APPS:
        if not os.access(app_path(app, tree), os.X_OK):
            raise SpdkNotBuilt('%s has no build/bin/%s' % (tree, app))
    return tree


#: The SPDK releases the tests run (tools/build-spdk.sh builds each).
VERSIONS = ('26.01', '26.05')


@functools.lru_cache(maxsize=None)
def tree(version):
    """The built tree of SPDK ``version`` (e.g. ``'26.01'``).

    ``$SPDK_DIR_26_01`` (dots as underscores) when set, as
    tools/run-tests.sh exports for every version; else the build
    script's cache (built on first use, minutes).
    """
    given = os.environ.get('SPDK_DIR_' + version.replace('.', '_'))
    if given:
        return given
    cmd = [BUILD_SCRIPT, version]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True,
                          env=_build_env())
    if done.returncode != 0:
        raise SpdkNotBuilt('%s failed (exit %d)'
                           % (' '.join(cmd), done.returncode))
    return done.stdout.strip().splitlines()[-1]


def _build_env():
    """The caller's environment, with the real home for the build cache.

    oslotest points $HOME at a per-test temp dir: the script would find
    no cache there and build SPDK again (minutes) in every test.
    """
    env = dict(os.environ)
    env['HOME'] = pwd.getpwuid(os.getuid()).pw_dir
    return env


def app_path(app, tree=None):
    return os.path.join(tree or spdk_dir(), 'build', 'bin', app)


def app_env(tree=None):
    """The environment an SPDK application runs in: its libraries found."""
    env = dict(os.environ)
    libs = os.path.join(tree or spdk_dir(), 'build', 'lib')
    env['LD_LIBRARY_PATH'] = ':'.join(
        p for p in (libs, env.get('LD_LIBRARY_PATH')) if p)
    return env
