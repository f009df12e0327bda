#!/bin/bash
# Live migration downtime and total time of a vhost-user-blk guest, from
# RUNS runs (default 3) of the two-host functional test
# (tests/nova/functional/test_live_migration.py): a TCG guest writing
# through SPDK migrates a -> b, then back idle. Prints each run's
# figures (libvirt's completed job stats, and the time of Nova's migrate
# call, which adds the destination QEMU's start) and their median.
# Needs what the test needs: root, hugepages, libvirtd (tools/*.sh).
set -euo pipefail

runs=${1:-3}
cd "$(dirname "$0")/.."
SPDK_DIR=${SPDK_DIR:-$(tools/build-spdk.sh)}
export SPDK_DIR
test=test_live_migration.LiveMigrationTest.test_migrate_writing_then_idle
figures=$(mktemp)
trap 'rm -f "$figures"' EXIT

for run in $(seq "$runs"); do
    if ! .venv/bin/stestr --test-path ./tests/nova run --concurrency 1 \
            "$test" >"$figures.out" 2>&1; then
        echo "run $run failed:" >&2
        tail -n 40 "$figures.out" >&2
        rm -f "$figures.out"
        exit 1
    fi
    grep '^MIGRATION' "$figures.out" | sed "s/^/run $run: /" | tee -a "$figures"
    rm -f "$figures.out"
done

# "run N: MIGRATION KIND guest: migrate call S s, libvirt total T ms,
#  downtime D ms" -> median per kind.
for kind in writing idle; do
    grep "MIGRATION $kind" "$figures" | awk -v kind="$kind" '
        { call[NR] = $8; total[NR] = $12; down[NR] = $15 }
        function median(a, n,    i, j, t) {
            for (i = 1; i <= n; i++)
                for (j = i + 1; j <= n; j++)
                    if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        END {
            printf "%s guest, median of %d: downtime %s ms, libvirt total %s ms, migrate call %s s\n",
                kind, NR, median(down, NR), median(total, NR), median(call, NR)
        }'
done
