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

# Guests must run unprivileged, as in production (Debian's qemu.conf
# default: libvirt-qemu): as root, QEMU could open any vhost socket and
# the tests of socket access could not fail. qemu.conf is left as the
# distribution ships it; say who QEMU runs as.
qemu_identity() {
    virsh -c qemu:///system capabilities |
        sed -n "s|.*<baselabel type='qemu'>+\([0-9]*\):+\([0-9]*\)<.*|\1 \2|p" |
        head -n 1
}

for _ in $(seq 50); do
    if virsh -c qemu:///system version >/dev/null 2>&1; then
        read -r uid gid <<<"$(qemu_identity)"
        if [[ -z ${uid:-} ]]; then
            say "warning: cannot tell which user QEMU runs as"
        elif [[ $uid -eq 0 ]]; then
            say "warning: QEMU runs as root (user in /etc/libvirt/qemu.conf);" \
                "vhost socket access is not tested as in production"
        else
            say "QEMU runs as $(id -nu "$uid"):$(getent group "$gid" | cut -d: -f1)"
        fi
        exit 0
    fi
    sleep 0.2
done
echo "start-libvirt: libvirtd does not answer on qemu:///system" >&2
exit 1
