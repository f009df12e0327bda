"""Write a raw image file into an lvol with SPDK's ``spdk_dd``, thin.

The lvol lives in the running target, which alone may open its lvstore,
so ``spdk_dd`` reaches it the way a compute host would: the driver
exports the lvol on a scratch NVMe-oF subsystem admitting one random
host NQN (and, with ``spdk_nvmf_auth = dhchap``, fresh secrets), and
``spdk_dd`` attaches it with ``bdev_nvme_attach_controller`` from a JSON
config. ``--sparse`` skips the file's holes, so only clusters holding
data are allocated: the lvol stays thin (decoupling an esnap clone of
the file instead copies every cluster). No kernel module is involved.
"""

import json
import os
import tempfile
import uuid

from cinder import exception
from oslo_concurrency import processutils
from oslo_log import log

from cinder_spdk_vhost import export
from cinder_spdk_vhost import locks
from cinder_spdk_vhost import lvols
from cinder_spdk_vhost import rollback
from cinder_spdk_vhost import sparse

LOG = log.getLogger(__name__)

HOST_NQN_PREFIX = 'nqn.2014-08.org.nvmexpress:uuid:'
CONTROLLER = 'import'
BLOCK = 1024 * 1024
#: Block of the small reads and writes at an lvol's start.
HEAD = 4096


def scratch_name(exporter, nqn):
    """The export name behind a scratch subsystem's NQN, else None."""
    name = nqn[len(exporter.nqn('')):]
    if nqn == exporter.nqn(name) and lvols.is_temp(name):
        return name
    return None


def sweep_exports(exporter):
    """Delete the scratch subsystems an interrupted copy left.

    Not one a running copy uses, here or on another cinder-volume of
    the cluster: its volume's (or snapshot's) lock says so.
    """
    for sub in exporter.subsystems():
        name = scratch_name(exporter, sub['nqn'])
        if not name:
            continue
        with locks.idle(*locks.owner_locks(name)) as unused:
            if unused:
                LOG.warning('Deleting NVMe-oF subsystem %s, left by an '
                            'interrupted copy', sub['nqn'])
                exporter.unexport(name, None)


def scratch_export(exporter, lvol_uuid, volume_id, cleanup, name=None):
    """Export ``lvol_uuid`` to a one-off host; its attach params and key.

    ``name``: the export the host joins, made if missing; by default a
    scratch subsystem of its own. SPDK puts a bdev in one subsystem
    only, so an lvol a host attached is read through its own export.
    What the call made (subsystem or admitted host, key) is undone by
    ``cleanup``, a :class:`rollback.Cleanup` the caller leaves after.
    """
    if name is None:
        name = lvols.temp_name('dd', volume_id)
        exporter.delete(exporter.nqn(name))
    host = HOST_NQN_PREFIX + str(uuid.uuid4())
    data = exporter.export(name, _Ref(lvol_uuid), host, cleanup)
    params = {'name': CONTROLLER, 'trtype': data['transport'],
              'traddr': data['traddr'], 'trsvcid': data['trsvcid'],
              'adrfam': data['adrfam'], 'subnqn': data['nqn'],
              'hostnqn': host}
    return params, {field: data[field] for field in export.KEY_FIELDS
                    if field in data}


def data_clusters(path, cluster_size):
    """How many lvol clusters the data extents of ``path`` touch."""
    clusters = set()
    with open(path, 'rb') as src:
        for first, end in sparse.extents(src.fileno()):
            clusters.update(range(first // cluster_size,
                                  (end - 1) // cluster_size + 1))
    return len(clusters)


def fill(exporter, conf, path, lvol_uuid, volume_id, cluster_size,
         reread):
    """Write the data extents of raw ``path`` into the lvol, thin.

    Over a scratch export, gone afterwards. A file of holes only needs
    no copy (``spdk_dd --sparse`` aborts on one). ``reread()``: the lvol
    afterwards, whose allocation proves the copy (:func:`check_written`).
    """
    if not data_clusters(path, cluster_size):
        return
    with rollback.Cleanup('import %s' % path) as cleanup:
        params, secrets = scratch_export(exporter, lvol_uuid, volume_id,
                                         cleanup)
        write_file(conf, path, params, secrets)
    check_written(reread(), path, cluster_size)


def check_written(lvol, path, cluster_size):
    """Refuse a copy that left clusters of the file's data unallocated.

    spdk_dd (v26.05) exits 0 when writes fail, e.g. a thin lvol that
    found no free cluster (the target answers each write with an
    internal device error): the allocation count is what tells.
    """
    if lvol is None:
        raise exception.VolumeBackendAPIException(
            data='the lvol spdk_dd wrote %s into is gone' % path)
    needed = data_clusters(path, cluster_size)
    if (lvol.allocated_clusters or 0) < needed:
        raise exception.VolumeBackendAPIException(
            data='spdk_dd could not write %s into %s: %s of its %d '
                 'clusters allocated (is the lvol store full?)'
                 % (path, lvol.alias, lvol.allocated_clusters, needed))


class _Ref(object):
    """The little of an lvol that :meth:`NvmfExport.export` reads."""

    def __init__(self, lvol_uuid):
        self.uuid = lvol_uuid


def _config(params, secrets, workdir):
    """spdk_dd's JSON config: the keyring (with auth) and the controller."""
    subsystems = []
    keys = []
    for field, secret in sorted(secrets.items()):
        path = os.path.join(workdir, field)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, 'w') as out:
            out.write(secret)
        keys.append({'method': 'keyring_file_add_key',
                     'params': {'name': field, 'path': path}})
        params = dict(params, **{field: field})
    if keys:
        subsystems.append({'subsystem': 'keyring', 'config': keys})
    # Without examine: the raid module would claim a replicated volume's
    # copy (it carries a RAID superblock), an lvol module an lvstore.
    subsystems.append({'subsystem': 'bdev', 'config': [
        {'method': 'bdev_set_options', 'params': {'bdev_auto_examine': False}},
        {'method': 'bdev_nvme_attach_controller', 'params': params}]})
    return {'subsystems': subsystems}


def _library_env(program):
    """The environment spdk_dd runs in: a build tree's libraries found.

    An SPDK build tree (``tools/build-spdk.sh``, devstack) keeps its
    shared libraries in ``build/lib`` beside ``build/bin``, where the
    binaries do not look for them by themselves; an installed spdk_dd
    needs nothing.
    """
    libs = os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(program))), 'lib')
    if not (os.path.sep in program and
            os.path.isfile(os.path.join(libs, 'libspdk_event.so'))):
        return None
    env = dict(os.environ)
    env['LD_LIBRARY_PATH'] = os.pathsep.join(
        p for p in (libs, env.get('LD_LIBRARY_PATH')) if p)
    return env


def _run(conf, params, secrets, args, what):
    """Run spdk_dd on the exported lvol (``CONTROLLER``'s namespace)."""
    with tempfile.TemporaryDirectory(prefix='spdk-dd-') as workdir:
        config = os.path.join(workdir, 'dd.json')
        with open(config, 'w') as out:
            json.dump(_config(params, secrets, workdir), out)
        cmd = [conf.spdk_dd_path, '--json', config, '-m',
               conf.spdk_dd_core_mask, '--disable-cpumask-locks'] + args
        if conf.spdk_dd_mem_mb:
            cmd += ['-s', str(conf.spdk_dd_mem_mb)]
        try:
            processutils.execute(*cmd, env_variables=_library_env(
                conf.spdk_dd_path))
        except (processutils.ProcessExecutionError, OSError) as err:
            raise exception.VolumeBackendAPIException(
                data='spdk_dd could not %s: %s' % (what, err)) from err


def write_file(conf, path, params, secrets):
    """Run spdk_dd: the holes of raw ``path`` are skipped (``--sparse``)."""
    _run(conf, params, secrets,
         ['--if', path, '--ob', CONTROLLER + 'n1', '--sparse',
          '--bs', str(BLOCK)], 'write %s' % path)


def read_lvol(exporter, conf, lvol_uuid, volume_id, path, size,
              holes=True):
    """Fill raw ``path`` with the lvol's first ``size`` bytes.

    For a target behind its node's agent, which cannot write a file
    here: the lvol is exported on a scratch subsystem (gone afterwards)
    and spdk_dd reads all of it over NVMe/TCP, as a remote reader can
    only. With ``holes`` the blocks it read as zeros are made holes
    again, so that what is made from the file (:func:`fill`,
    ``--sparse``) stays thin; a reader that only reads the file once
    saves that pass.
    """
    with rollback.Cleanup('read lvol %s' % lvol_uuid) as cleanup:
        params, secrets = scratch_export(exporter, lvol_uuid, volume_id,
                                         cleanup)
        _run(conf, params, secrets,
             ['--ib', CONTROLLER + 'n1', '--of', path, '--bs', str(BLOCK),
              '--count', str(size // BLOCK)], 'read lvol %s' % lvol_uuid)
    if holes:
        sparse.dig_holes(path)


def read_head(conf, params, secrets, length):
    """The first ``length`` bytes (whole 4 KiB blocks) of the lvol."""
    with tempfile.TemporaryDirectory(prefix='spdk-dd-') as workdir:
        path = os.path.join(workdir, 'head')
        _run(conf, params, secrets,
             ['--ib', CONTROLLER + 'n1', '--of', path, '--bs', str(HEAD),
              '--count', str(-(-length // HEAD))], 'read the lvol\'s head')
        with open(path, 'rb') as src:
            return src.read(length)


def write_head(conf, params, secrets, data):
    """Write ``data`` (whole 4 KiB blocks) at the start of the lvol."""
    with tempfile.TemporaryDirectory(prefix='spdk-dd-') as workdir:
        path = os.path.join(workdir, 'head')
        with open(path, 'wb') as out:
            out.write(data)
        _run(conf, params, secrets,
             ['--if', path, '--ob', CONTROLLER + 'n1', '--bs', str(HEAD),
              '--count', str(len(data) // HEAD)], 'write the lvol\'s head')
