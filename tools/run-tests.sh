#!/bin/bash
# Run the whole test suite with stestr and end with one plain summary line
# ("N passed, N failed, N skipped"). No test run at all is a failure.
set -uo pipefail

bin=${1:-.venv/bin}
"$bin/stestr" run --slowest
rc=$?

stats=$("$bin/stestr" last --subunit | "$bin/subunit-stats" 2>/dev/null)
count() { awk -v k="$1" -F': *' '$1 == k {print $2}' <<<"$stats"; }
total=$(count "Total tests")
passed=$(count "Passed tests")
failed=$(count "Failed tests")
skipped=$(count "Skipped tests")
echo "tests: ${passed:-0} passed, ${failed:-0} failed, ${skipped:-0} skipped"

if [[ ${total:-0} -eq 0 ]]; then
    echo "no tests ran: failing" >&2
    exit 1
fi
exit "$rc"
