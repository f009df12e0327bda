#!/bin/bash
# Run every test tree with stestr and end with one plain summary line
# ("tests: N passed, N failed, N skipped"). Nova and Cinder cannot be
# imported in one Python process (both register the same oslo.config
# options), so each tree gets its own stestr run. No test at all is a
# failure, never a success.
#
# Two lanes side by side, each with a deployment of its own where it needs
# one (tests/deployment: one per stestr process). The deployment tests
# through Nova are the longest part (TCG guests that mostly wait on the
# services): they start first, in the background, with their own stestr
# repository (.stestr-deployment); their output is printed when they end.
# Meanwhile the other trees run one after the other, then the rest of
# tests/deployment (Cinder alone). SERIAL_TREES=1 runs it all in one lane,
# as does a machine where deployments cannot have RabbitMQ vhosts of
# their own (tests/deployment/backing.py).
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
suites=(tests/unit tests/functional tests/cinder tests/nova)
# A target that crashes fails its test and leaves its core file here
# (testbed/spdk_target.py); this run's are named at the end.
cores=${SPDK_TEST_CORES:-.test-cores}
started=$(date +%s)
deployment=tests/deployment
# The deployment tests on the clustered deployment (two cinder-volume
# services on etcd, three storage nodes): those that need the Nova cloud
# (and keystone), the cluster's own, and the install guide's configs.
nova_cloud='^tests\.deployment\.test_(cluster|install_guide|live_migration|multiattach|nova|tempest)\.'
background_repo=.stestr-deployment
stream=$(mktemp)
background_stream=$(mktemp)
background_log=$(mktemp)
pid=
# An interrupted run stops the background lane too (SIGINT, so that its
# deployment's clean-up runs).
# shellcheck disable=SC2317  # a trap
stop_background() {
    [[ -n $pid ]] && kill -INT -- "-$pid" 2>/dev/null
    exit 130
}
trap stop_background INT TERM
trap 'rm -f "$stream" "$background_stream" "$background_log"' EXIT

# run_suite SUITE STREAM REPO [stestr run options]: one stestr run of a
# tree (REPO: its stestr repository, default if empty), its results
# appended to STREAM; non-zero if anything failed.
run_suite() {
    local suite=$1 out=$2 repo=() rc=0
    [[ -n $3 ]] && repo=(--repo-url "$3")
    shift 3
    "$bin/stestr" "${repo[@]}" --test-path "./$suite" run --slowest "$@" ||
        rc=1
    "$bin/stestr" "${repo[@]}" last --subunit >>"$out" || rc=1
    return $rc
}

rc=0
start=$SECONDS
runs=()
for suite in "${suites[@]}"; do
    [[ -d $suite ]] && runs+=("$suite")
done
private_vhosts() {
    "$bin/python" -c 'import sys
from tests.deployment import backing
sys.exit(not backing.private_vhosts())'
}
if [[ -d $deployment ]]; then
    if [[ ${SERIAL_TREES:-0} == 1 ]] || ! private_vhosts; then
        runs+=("$deployment")
    else
        mkdir -p "$background_repo"
        echo "=== $deployment (through Nova): started in the background"
        # One process, so one shared Cinder deployment and Nova cloud
        # (see tests/deployment). A process group of its own (set -m),
        # so that stop_background reaches all of it.
        set -m
        run_suite "$deployment" "$background_stream" "$background_repo" \
            --concurrency 1 "$nova_cloud" >"$background_log" 2>&1 &
        pid=$!
        set +m
        runs+=("$deployment:rest")
    fi
fi

for run in "${runs[@]}"; do
    suite=${run%:rest}
    echo "=== $run"
    args=()
    [[ $suite == "$deployment" ]] && args=(--concurrency 1)
    # Its guests and the background lane's would be three TCG guests'
    # worth of load on two cores: a starved guest's migration hung.
    [[ $suite == tests/nova && -n $pid ]] && args=(--concurrency 1)
    [[ $run == *:rest ]] && args+=(--exclude-regex "$nova_cloud")
    run_suite "$suite" "$stream" "" "${args[@]}" || rc=1
    echo "=== $run: done at $((SECONDS - start)) s"
done

if [[ -n $pid ]]; then
    echo "=== $deployment (through Nova): waiting for it"
    wait "$pid" || rc=1
    pid=
    echo "=== $deployment (through Nova): done at $((SECONDS - start)) s"
    cat "$background_log"
    cat "$background_stream" >>"$stream"
fi

# What failed and why, where the last lines of a long log show it.
"$bin/python" tools/failures.py <"$stream"
if [[ -d $cores ]]; then
    find "$cores" -name '*.core' -newermt "@$started" |
        sed 's/^/core file of an SPDK target that crashed: /'
fi
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
