"""Print each failed test of a subunit stream with the end of its error.

tools/run-tests.sh prints this just before its summary line, so that
the last lines of a long run (all a CI page may keep) say what failed
and why, without the service logs the deployment tests attach.

Usage: python tools/failures.py < stream.subunit
"""

import re
import sys

import subunit
import testtools

#: Lines kept of each error message.
KEPT = 6
#: A traceback frame in this project's tests (not an installed package's).
TEST_FRAME = re.compile(r'^  File "(?!.*site-packages)(?:.*/)?(tests/[^"]+)"'
                        r', line (\d+), in (\S+)')


def failures(stream):
    """(test id, traceback text) of every failed test in ``stream``."""
    found = []

    def on_test(test):
        if test['status'] == 'fail':
            detail = test['details'].get('traceback')
            text = detail.as_text() if detail is not None else ''
            found.append((test['id'], text))

    result = testtools.StreamToDict(on_test)
    result.startTestRun()
    try:
        subunit.ByteStreamToStreamResult(
            stream, non_subunit_name='stdout').run(result)
    finally:
        result.stopTestRun()
    return found


def message(text):
    """The error's own lines: after the traceback's last frame.

    Not the end of the text: an error may carry service logs after
    its first lines (tests.deployment's timeouts do).
    """
    lines = text.splitlines()
    frames = [index for index, line in enumerate(lines)
              if line.startswith('  File ')]
    start = frames[-1] + 1 if frames else 0
    while start < len(lines) and lines[start].startswith(' '):
        start += 1
    return [line for line in lines[start:] if line.strip()][:KEPT]


def where(text):
    """The deepest frame of the traceback in this project's tests.

    ``path:line in function``, or None. The error says what SPDK or a
    service answered; this says which of the test's calls got it.
    """
    found = None
    for line in text.splitlines():
        match = TEST_FRAME.match(line)
        if match:
            found = '%s:%s in %s' % match.groups()
    return found


def main():
    for test_id, text in failures(sys.stdin.buffer):
        print('FAILED %s' % test_id)
        if where(text):
            print('    at %s' % where(text))
        for line in message(text):
            print('    %s' % line[:300])
    return 0


if __name__ == '__main__':
    sys.exit(main())
