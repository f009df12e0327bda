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


def tempest_run(workspace, conf_path, kind, concurrency=2, timeout=600):
    """``tempest run`` in ``workspace``: (returncode, results, stderr).

    Tempest writes ``.stestr.conf`` into the empty workspace itself when
    given ``--config-file``.
    """
    argv = [processes.console_script('tempest'), 'run', '--config-file',
            conf_path, '--regex', regex(kind),
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
