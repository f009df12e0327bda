#!/bin/bash
# Run every test tree with stestr and end with one plain summary line
# ("tests: N passed, N failed, N skipped"). Nova and Cinder cannot be
# imported in one Python process (both register the same oslo.config
# options), so each tree gets its own stestr run. No test at all is a
# failure, never a success.
set -uo pipefail

bin=${1:-.venv/bin}
# Every SPDK-facing test runs real SPDK targets from this build (cached:
# instant once make test's spdk step has built it).
SPDK_DIR=$(tools/build-spdk.sh) || { echo "SPDK build failed" >&2; exit 1; }
export SPDK_DIR
# Each supported release's tree, for the upgrade tests and the transcript
# replay (testbed/spdk_build.py): SPDK_DIR_26_01 and so on.
for version in ${SPDK_VERSIONS:-26.01 26.05}; do
    tree=$(tools/build-spdk.sh "$version") ||
        { echo "SPDK $version build failed" >&2; exit 1; }
    export "SPDK_DIR_${version//./_}=$tree"
done
suites=(tests/unit tests/functional tests/cinder tests/nova tests/deployment)
stream=$(mktemp)
trap 'rm -f "$stream"' EXIT

rc=0
for suite in "${suites[@]}"; do
    [[ -d $suite ]] || continue
    echo "=== $suite"
    # One process, so one shared Cinder deployment (see tests/deployment).
    args=()
    [[ $suite == tests/deployment ]] && args=(--concurrency 1)
    "$bin/stestr" --test-path "./$suite" run --slowest "${args[@]}" || rc=1
    "$bin/stestr" last --subunit >>"$stream" || rc=1
done

stats=$("$bin/subunit-stats" <"$stream" 2>/dev/null)
count() { awk -v k="$1" -F': *' '$1 == k {print $2}' <<<"$stats"; }
total=$(count "Total tests")
echo "tests: $(count "Passed tests") passed, $(count "Failed tests")" \
    "failed, $(count "Skipped tests") skipped"

if [[ ${total:-0} -eq 0 ]]; then
    echo "no tests ran: failing" >&2
    exit 1
fi
exit "$rc"
