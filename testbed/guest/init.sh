#!/bin/busybox sh
# shellcheck shell=dash
# /init of the test guest (see testbed/guest/initramfs.py).
#
# Mounts the kernel filesystems, loads the virtio modules, waits for the
# vhost-user-blk disks, runs the per-run /run.sh in a subshell (so an
# `exit` in it cannot panic the kernel) and powers off, so QEMU exits.
# Everything the host parses is a line starting with the marker (gt_mark).

/bin/busybox --install -s /bin
export PATH=/bin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

# shellcheck source=testbed/guest/lib.sh
. /lib/guest.sh

gt_load_modules
gt_wait_disks
gt_mark "READY"

rc=0
if [ -f /run.sh ]; then
    # shellcheck disable=SC1091
    (. /run.sh)
    rc=$?
fi
# The background writer (lib.sh) points GT_FAILED elsewhere in its own
# subshell only; this is the foreground flag.
# shellcheck disable=SC2031
if [ "$rc" -ne 0 ] || [ -e "$GT_FAILED" ]; then
    gt_dump_dmesg
fi
gt_mark "DONE rc=$rc"
sync
poweroff -f
