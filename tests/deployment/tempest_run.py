"""Run tempest's own runner on the plugin's tests; read what it did.

Tempest runs in a subprocess, in a workspace of its own: its
``config.CONF`` must not meet this process's, and ``tempest run``
(stestr underneath) is what an operator runs. Its subunit stream says
which tests ran and how each ended, so a run that found no test, or
skipped them all, cannot pass for a green one.
"""

import ast
import glob
import io
import os
import re
import signal
import subprocess

import subunit
import testtools

from tests.deployment import processes

PLUGIN_TESTS = os.path.join(processes.REPO, 'tempest_plugin', 'tests')
# "id[-...],smoke]" tags that tempest appends to a test's name.
_TAGS = re.compile(r'\[[^\]]*\]$')
# How stestr names a class fixture: "setUpClass (module.Class)".
_CLASS_FIXTURE = re.compile(r'^\w+Class \((?P<cls>[\w.]+)\)$')

#: Classes of those tempest is not to run on this deployment, and why:
#: no tempest option skips them. None of them may run.
EXCLUDED = {
    'tempest.api.volume.admin.test_volume_retype.'
    'VolumeRetypeWithoutMigrationTest':
        'retypes between two types of equal specs, which Cinder does by '
        'itself, never asking the driver, and writes the scheduler\'s host '
        'as the volume\'s; with cinder-volume a cluster, that host names '
        'either member (the cluster is what stays) and the test asserts '
        'it unchanged. A retype the driver does keeps the host: '
        'VolumeRetypeMultiattachTest, the plugin\'s QoS retypes, '
        'tests/deployment/test_nova',
}
# Tempest's own tests of what operators do with volumes every day:
# snapshots, backups, manage/unmanage, retype and multiattach.
TEMPEST_VOLUME_TESTS = (
    ''.join(r'(?!%s\.)' % re.escape(cls) for cls in EXCLUDED) +
    r'^tempest\.api\.volume\.(test_volumes_snapshots'
    r'|test_volumes_snapshots_list|test_volumes_snapshots_negative'
    r'|test_volumes_backup|admin\.(test_snapshot_manage|test_volume_manage'
    r'|test_snapshots_actions|test_volume_retype|test_volumes_backup))\.'
    r'|^tempest\.api\.compute\.volumes\.test_attach_volume\.'
    r'AttachVolumeMultiAttachTest\.')
# Classes (or single tests) of those that do not apply to a cloud with
# one spdk_vhost backend, and why. Each must be skipped: the list stays
# true.
_DIRECT_LUN = ('a SCSI LUN passed through (virtio-scsi); an spdk_vhost '
               'volume is a vhost-user-blk (virtio-blk) device')
_MULTIATTACH = ('tempest.api.compute.volumes.test_attach_volume.'
                'AttachVolumeMultiAttachTest.')
NOT_APPLICABLE = {
    'tempest.api.volume.admin.test_volume_retype.'
    'VolumeRetypeWithMigrationTest':
        'needs a second backend and Cinder\'s generic migration (a host '
        'copy), which the driver refuses; moves between the pools of one '
        'backend are driver-assisted (tests/deployment/test_migration)',
    'tempest.api.volume.admin.test_volume_manage.VolumeManageAdminTest':
        'asserts that a volume managed again has the host it had; the '
        'deployment runs cinder-volume as a cluster, where Cinder\'s '
        'scheduler records the host of whichever member reported last '
        '(the cluster is what stays), so tempest_conf turns '
        'manage_volume off. Unmanage and manage of volumes through the '
        'API: tests/deployment/test_snapshots; of snapshots, tempest\'s '
        'SnapshotManageAdminTest too',
    _MULTIATTACH + 'test_boot_from_multiattach_volume_direct_lun':
        _DIRECT_LUN,
    _MULTIATTACH + 'test_boot_with_multiattach_volume_direct_lun':
        _DIRECT_LUN,
}
# One class per operation that must have passing tests, so a run that
# skipped its way through cannot pass.
MUST_PASS = (
    'tempest.api.volume.test_volumes_snapshots.VolumesSnapshotTestJSON',
    'tempest.api.volume.test_volumes_backup.VolumesBackupsTest',
    'tempest.api.volume.admin.test_volumes_backup.VolumesBackupsAdminTest',
    'tempest.api.volume.admin.test_snapshot_manage.SnapshotManageAdminTest',
    'tempest.api.volume.admin.test_volume_retype.'
    'VolumeRetypeMultiattachTest',
    'tempest.api.compute.volumes.test_attach_volume.'
    'AttachVolumeMultiAttachTest',
)


def regex(kind):
    """The ``--regex`` of the plugin's ``kind`` tests (api, scenario)."""
    return r'^tempest_plugin\.tests\.%s\.' % kind


def expected_tests(kind):
    """Ids of the ``test_*`` methods of the plugin's ``kind`` tests.

    Read from the source, not from tempest's discovery: a test that
    tempest failed to load must count as missing, not as absent.
    """
    directory = os.path.join(PLUGIN_TESTS, kind)
    package = 'tempest_plugin.tests.' + kind
    found = set()
    for path in sorted(glob.glob(os.path.join(directory, 'test_*.py'))):
        module = '%s.%s' % (package, os.path.basename(path)[:-3])
        with open(path) as src:
            tree = ast.parse(src.read(), path)
        for cls in tree.body:
            if not isinstance(cls, ast.ClassDef):
                continue
            found.update('%s.%s.%s' % (module, cls.name, node.name)
                         for node in cls.body
                         if isinstance(node, ast.FunctionDef) and
                         node.name.startswith('test_'))
    return found


def test_class(test_id):
    """The class a test id (or a class fixture's id) belongs to."""
    fixture = _CLASS_FIXTURE.match(test_id)
    if fixture:
        return fixture.group('cls')
    return test_id.rsplit('.', 1)[0]


def judge_tempest_tests(results):
    """What is wrong with a run of TEMPEST_VOLUME_TESTS: a list of lines.

    Every test passes, or is skipped because it or its class does not
    apply (``NOT_APPLICABLE``, each of which must then be skipped), none
    of ``EXCLUDED`` ran, and each class of ``MUST_PASS`` has passing
    tests.
    """
    problems = []
    passed, skipped = set(), set()
    for test_id, (status, details) in sorted(results.items()):
        cls = test_class(test_id)
        listed = test_id if test_id in NOT_APPLICABLE else cls
        if status == 'success':
            passed.add(cls)
        elif status == 'skip' and listed in NOT_APPLICABLE:
            skipped.add(listed)
        else:
            problems.append('%s: %s %s' % (
                test_id, status, details.get('reason', '') or
                details.get('traceback', '')))
    problems.extend('%s: no test of it passed' % cls
                    for cls in MUST_PASS if cls not in passed)
    problems.extend('%s: listed as not applicable but not skipped' % key
                    for key in sorted(set(NOT_APPLICABLE) - skipped))
    problems.extend('%s: excluded, but it ran' % test_id
                    for test_id in sorted(results)
                    if test_class(test_id) in EXCLUDED)
    return problems


def parse_subunit(stream):
    """Test id (tags stripped) -> (status, details) from a v2 stream."""
    results = {}

    def on_test(test):
        if test['status'] == 'exists':
            return
        details = {name: content.as_text()
                   for name, content in test['details'].items()
                   if content.content_type.type == 'text'}
        results[_TAGS.sub('', test['id'])] = (test['status'], details)

    case = subunit.ByteStreamToStreamResult(io.BytesIO(stream),
                                            non_subunit_name='stdout')
    result = testtools.StreamToDict(on_test)
    result.startTestRun()
    try:
        case.run(result)
    finally:
        result.stopTestRun()
    return results


def tempest_run(workspace, conf_path, test_regex, concurrency=2,
                timeout=600):
    """``tempest run --regex test_regex`` in ``workspace``.

    Returns (returncode, results, stderr).

    Tempest writes ``.stestr.conf`` into the empty workspace itself when
    given ``--config-file``.
    """
    argv = [processes.console_script('tempest'), 'run', '--config-file',
            conf_path, '--regex', test_regex,
            '--concurrency', str(concurrency), '--subunit']
    proc = subprocess.Popen(argv, cwd=workspace, env=processes.service_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        # stestr's workers are tempest's children: stop them all.
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise RuntimeError('tempest run still running after %ss'
                           % timeout) from exc
    return (proc.returncode, parse_subunit(out),
            err.decode(errors='replace'))
