#!/bin/bash
# Reserve 2 MiB hugepages and mount hugetlbfs for the functional tests.
#
# SPDK vhost only works with hugepage-backed guest memory, and the tests
# boot their guests the way production does, so the host needs a pool of
# 2 MiB pages and a hugetlbfs mount. Safe to run again: it never shrinks
# an existing pool (guests may be using it) and never mounts twice.
#
# Environment:
#   HUGEPAGES       number of 2 MiB pages wanted (default 1024 = 2 GiB)
#   HUGEPAGES_MOUNT where to mount hugetlbfs (default /dev/hugepages)

set -euo pipefail

wanted=${HUGEPAGES:-1024}
mountpoint_dir=${HUGEPAGES_MOUNT:-/dev/hugepages}
pool=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages

die() {
    echo "setup-hugepages: error: $*" >&2
    exit 1
}

say() {
    echo "setup-hugepages: $*"
}

[[ $wanted =~ ^[0-9]+$ ]] || die "HUGEPAGES must be a number, got '$wanted'"
[[ $(id -u) -eq 0 ]] || die "must run as root (writes $pool, mounts hugetlbfs)"
[[ -w $pool ]] || die "$pool not writable: kernel without 2 MiB hugepages?"

current=$(<"$pool")
if ((current >= wanted)); then
    say "pool already has $current pages (wanted $wanted), left as is"
else
    # Compacting memory first makes large reservations more likely to
    # succeed on a host that has been running for a while.
    if [[ -w /proc/sys/vm/compact_memory ]]; then
        echo 1 >/proc/sys/vm/compact_memory || true
    fi
    echo "$wanted" >"$pool"
    got=$(<"$pool")
    if ((got < wanted)); then
        die "asked for $wanted pages, the kernel gave $got (not enough" \
            "contiguous free memory; try a smaller HUGEPAGES or reboot)"
    fi
    say "reserved $got 2 MiB pages ($((got * 2)) MiB)"
fi

if grep -qs " $mountpoint_dir hugetlbfs " /proc/mounts; then
    say "hugetlbfs already mounted on $mountpoint_dir"
else
    mkdir -p "$mountpoint_dir"
    mount -t hugetlbfs -o pagesize=2M nodev "$mountpoint_dir" ||
        die "could not mount hugetlbfs on $mountpoint_dir"
    say "mounted hugetlbfs on $mountpoint_dir"
fi

free_pages=$(awk '/^HugePages_Free:/ {print $2}' /proc/meminfo)
say "HugePages_Free: $free_pages"
