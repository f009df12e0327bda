#!/bin/bash
# Start virtlogd and libvirtd for the functional tests, if not running.
#
# Test machines run no init system, so the daemons are started by hand.
# libvirtd must start after hugetlbfs is mounted (setup-hugepages.sh):
# it looks for hugetlbfs mounts only at start-up, and guests for SPDK
# vhost need hugepage-backed memory.
set -euo pipefail

say() {
    echo "start-libvirt: $*"
}

[[ $(id -u) -eq 0 ]] || { echo "start-libvirt: must run as root" >&2; exit 1; }
grep -qs ' hugetlbfs ' /proc/mounts ||
    say "warning: no hugetlbfs mounted; run setup-hugepages.sh first"

for daemon in virtlogd libvirtd; do
    if pgrep -x "$daemon" >/dev/null; then
        say "$daemon already running"
    else
        "$daemon" -d
        say "$daemon started"
    fi
done

for _ in $(seq 50); do
    virsh -c qemu:///system version >/dev/null 2>&1 && exit 0
    sleep 0.2
done
echo "start-libvirt: libvirtd does not answer on qemu:///system" >&2
exit 1
