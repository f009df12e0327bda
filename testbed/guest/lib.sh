# shellcheck shell=sh
# Helpers for test guest scripts, installed as /lib/guest.sh in the
# initramfs and sourced by /init, so /run.sh and serve-mode commands can
# call them.
#
# The host only reads lines that start with the marker, so a helper
# never prints the marker literally: an echoed command line (serial
# console echo) must not look like a result.

GT_M='@''@'
GT_FAILED=/tmp/gt.failed
GT_TMP=/tmp/gt

gt_mark() {
    printf '%s%s\n' "$GT_M" "$*"
}

gt_result() {
    gt_mark "RESULT $1=$2"
}

# Report a failure; /init dumps the kernel log when any was reported.
gt_error() {
    gt_mark "ERROR $*"
    : >"$GT_FAILED"
}

gt_load_modules() {
    while read -r mod; do
        insmod "/lib/modules/$mod.ko" || gt_error "insmod $mod failed"
    done </etc/modules
}

# Wait (up to 10 s) for the gt.disks=N disks the host attached, since
# virtio probing may finish after insmod returns.
gt_wait_disks() {
    want=0
    read -r cmdline </proc/cmdline
    for arg in $cmdline; do
        case $arg in
            gt.disks=*) want=${arg#gt.disks=} ;;
        esac
    done
    tries=0
    while [ "$(gt_count /sys/block/vd*)" -lt "$want" ]; do
        tries=$((tries + 1))
        if [ "$tries" -gt 100 ]; then
            gt_error "only $(gt_count /sys/block/vd*) of $want disks appeared"
            return 1
        fi
        usleep 100000
    done
}

# Number of existing paths among the arguments (an unmatched glob
# stays literal and does not exist).
gt_count() {
    n=0
    for path in "$@"; do
        [ -e "$path" ] && n=$((n + 1))
    done
    echo "$n"
}

gt_sha256() {
    sha256sum | cut -d' ' -f1
}

# Size in bytes, number of blk-mq queues and PCI address of a disk.
gt_disk_info() {
    sys=/sys/block/$1
    if [ ! -d "$sys" ]; then
        gt_error "$1: no such disk"
        return 1
    fi
    gt_result "$1.size" "$(($(cat "$sys/size") * 512))"
    gt_result "$1.queues" "$(gt_count "$sys"/mq/*)"
    gt_result "$1.pci" "$(basename "$(readlink -f "$sys/device/..")")"
}

# Report every virtio disk and the list of their names.
gt_disks() {
    names=
    for sys in /sys/block/vd*; do
        [ -e "$sys" ] || continue
        dev=${sys##*/}
        names=${names:+$names,}$dev
        gt_disk_info "$dev"
    done
    gt_result disks "$names"
}

# Largest dd block size dividing both the offset and the length; fails
# on offsets or lengths that are not multiples of 512 (O_DIRECT).
gt_bs() {
    for bs in 65536 4096 512; do
        if [ $(($1 % bs)) -eq 0 ] && [ $(($2 % bs)) -eq 0 ]; then
            echo "$bs"
            return 0
        fi
    done
    gt_error "offset $1 / length $2 not multiples of 512"
    return 1
}

# gt_write DEV OFFSET LENGTH TOKEN: write LENGTH bytes of "TOKEN\n"
# repeated at OFFSET with O_DIRECT and report the data's sha256.
gt_write() {
    bs=$(gt_bs "$2" "$3") || return 1
    mkdir -p "$GT_TMP"
    yes "$4" | head -c "$3" >"$GT_TMP/pattern"
    if ! dd if="$GT_TMP/pattern" of="/dev/$1" bs="$bs" \
            seek=$(($2 / bs)) oflag=direct conv=notrunc,fsync \
            2>"$GT_TMP/dd.err"; then
        gt_error "$1: write of $3 bytes at $2 failed:" \
            "$(grep -v records "$GT_TMP/dd.err" | tail -n 1)"
        return 1
    fi
    gt_result "$1.wrote@$2" "$(gt_sha256 <"$GT_TMP/pattern")"
}

# gt_read DEV OFFSET LENGTH: read back with O_DIRECT (past the guest's
# page cache) and report the sha256; a short read is an error.
gt_read() {
    bs=$(gt_bs "$2" "$3") || return 1
    mkdir -p "$GT_TMP"
    if ! dd if="/dev/$1" of="$GT_TMP/read" bs="$bs" skip=$(($2 / bs)) \
            count=$(($3 / bs)) iflag=direct 2>"$GT_TMP/dd.err"; then
        gt_error "$1: read of $3 bytes at $2 failed:" \
            "$(grep -v records "$GT_TMP/dd.err" | tail -n 1)"
        return 1
    fi
    got=$(wc -c <"$GT_TMP/read")
    if [ "$got" -ne "$3" ]; then
        gt_error "$1: short read at $2: $got of $3 bytes"
        return 1
    fi
    gt_result "$1.read@$2" "$(gt_sha256 <"$GT_TMP/read")"
}

# gt_time_read DEV OFFSET LENGTH: how long an O_DIRECT read takes on
# the guest's own clock (dev.read_ms@OFFSET), the data neither kept nor
# hashed: what a bandwidth limit lets through, free of the console's
# and a TCG sha256's time.
gt_time_read() {
    bs=$(gt_bs "$2" "$3") || return 1
    mkdir -p "$GT_TMP"
    gt_now_ms
    start=$GT_NOW_MS
    if ! dd if="/dev/$1" of=/dev/null bs="$bs" skip=$(($2 / bs)) \
            count=$(($3 / bs)) iflag=direct 2>"$GT_TMP/dd.err"; then
        gt_error "$1: read of $3 bytes at $2 failed:" \
            "$(grep -v records "$GT_TMP/dd.err" | tail -n 1)"
        return 1
    fi
    gt_now_ms
    gt_result "$1.read_ms@$2" $((GT_NOW_MS - start))
}

# gt_check DEV OFFSET LENGTH TOKEN: write, read back and compare.
gt_check() {
    gt_write "$@" || return 1
    gt_read "$1" "$2" "$3" || return 1
    if cmp -s "$GT_TMP/pattern" "$GT_TMP/read"; then
        gt_result "$1.verify@$2" ok
    else
        gt_error "$1: data read back at $2 differs from data written"
        return 1
    fi
}

# Milliseconds since boot in GT_NOW_MS, from the monotonic /proc/uptime
# (10 ms steps; busybox's date has no %N). No fork: the writer's loop
# times every write with it.
gt_now_ms() {
    read -r up _ </proc/uptime
    # 1${cs} - 100: the centiseconds' leading zero is not octal.
    GT_NOW_MS=$((${up%.*} * 1000 + (1${up#*.} - 100) * 10))
}

GT_WRITERS=/tmp/gt-writer

# gt_writer_start DEV OFFSET LENGTH TOKEN [BLOCKS [passes]]: keep writing
# the pattern in the background (for tests that act on the storage under
# a writing guest) until gt_writer_stop; one writer per disk, several may
# run. It rewrites LENGTH bytes at OFFSET, or with BLOCKS walks through
# that many LENGTH-byte blocks from OFFSET (wrapping around), a failed
# write retried in place: the first "writes" blocks then hold every
# acknowledged write, to be checked afterwards. With "passes" each pass
# over the blocks writes TOKEN.N (N from 0), so that a block that lost
# its last acknowledged write shows it. Each writer counts into
# its own directory, so it does not clash with foreground commands'
# files: writes, failures and the longest time without a completed
# write (from its start), the guest's I/O stall.
gt_writer_start() {
    dir=$GT_WRITERS/$1
    rm -rf "$dir"
    mkdir -p "$dir"
    echo "0 0 0" >"$dir/count"
    (
        GT_TMP=$dir
        GT_FAILED=$dir/failed
        ok=0
        failed=0
        max_gap=0
        gt_now_ms
        last=$GT_NOW_MS
        while [ ! -e "$dir/stop" ]; do
            at=$(($2 + ok % ${5:-1} * $3))
            token=$4
            [ -n "$6" ] && token=$4.$((ok / ${5:-1}))
            if gt_write "$1" "$at" "$3" "$token" >/dev/null 2>&1; then
                ok=$((ok + 1))
                gt_now_ms
                if [ $((GT_NOW_MS - last)) -gt "$max_gap" ]; then
                    max_gap=$((GT_NOW_MS - last))
                fi
                last=$GT_NOW_MS
            else
                failed=$((failed + 1))
            fi
            # Whole lines only: a status never reads a half-written file.
            echo "$ok $failed $max_gap" >"$dir/count.new"
            mv "$dir/count.new" "$dir/count"
        done
        : >"$dir/done"
    ) </dev/null >/dev/null 2>&1 &
}

# The directories of DEV's writer, or of every writer started; fails
# (reported) when DEV has none.
gt_writer_dirs() {
    if [ -n "$1" ] && [ ! -d "$GT_WRITERS/$1" ]; then
        gt_error "no background writer on $1"
        return 1
    fi
    GT_WRITER_DIRS=
    for dir in "$GT_WRITERS"/${1:-*}; do
        [ -d "$dir" ] && GT_WRITER_DIRS="$GT_WRITER_DIRS $dir"
    done
    return 0
}

# gt_writer_status [DEV]: report DEV's writer (default: all of them
# together) so far: writer.writes, writer.failures, writer.max_gap_ms.
gt_writer_status() {
    gt_writer_dirs "$1" || return 1
    writes=0
    failures=0
    gap=0
    for dir in $GT_WRITER_DIRS; do
        read -r ok failed max_gap 2>/dev/null <"$dir/count" || continue
        writes=$((writes + ok))
        failures=$((failures + failed))
        [ "$max_gap" -gt "$gap" ] && gap=$max_gap
    done
    gt_result writer.writes "$writes"
    gt_result writer.failures "$failures"
    gt_result writer.max_gap_ms "$gap"
}

# gt_writer_stop [DEV]: stop DEV's writer (default: all), waiting up to
# 30 s for the last writes, and report as gt_writer_status does.
gt_writer_stop() {
    gt_writer_dirs "$1" || return 1
    for dir in $GT_WRITER_DIRS; do
        : >"$dir/stop"
    done
    tries=0
    for dir in $GT_WRITER_DIRS; do
        while [ ! -e "$dir/done" ]; do
            tries=$((tries + 1))
            if [ "$tries" -gt 300 ]; then
                gt_error "background writer ${dir##*/} did not stop" \
                    "(I/O hung?)"
                return 1
            fi
            usleep 100000
        done
    done
    gt_writer_status "$1"
}

gt_dump_dmesg() {
    gt_mark "DMESG-BEGIN"
    dmesg
    gt_mark "DMESG-END"
}

# Report mode, for hosts that can only read the console log (Nova's
# console-output API). Lists the disks present at start, then polls once
# a second and prints one line per change:
#   DISK dev serial=S size=BYTES                 present at start
#   ATTACHED dev serial=S size=BYTES before=SHA verify=ok|failed
#   RESIZED dev size=BYTES
#   DETACHED dev
# and REPORTING once the disks present at start are listed. A disk that
# appears later gets its first MiB read (before=, sha256), then
# rewritten with "S\n" repeated, read back and compared (verify=): the
# pattern is known on the host from the serial alone, so data that
# survived a detach shows up as the next attach's before=.
gt_report() {
    state=/tmp/gt-report
    mkdir -p "$state"
    first=1
    while :; do
        for sys in /sys/block/vd*; do
            [ -e "$sys" ] || continue
            dev=${sys##*/}
            # A disk detached under the loop: an arithmetic error on an
            # empty read would end the shell, and the guest with it.
            sectors=$(cat "$sys/size" 2>/dev/null) || continue
            size=$((sectors * 512))
            if [ ! -e "$state/$dev" ]; then
                echo "$size" >"$state/$dev"
                serial=$(cat "$sys/serial" 2>/dev/null)
                if [ "$first" = 1 ]; then
                    gt_mark "DISK $dev serial=$serial size=$size"
                else
                    gt_report_attached "$dev" "$serial" "$size"
                fi
            elif [ "$(cat "$state/$dev")" != "$size" ]; then
                echo "$size" >"$state/$dev"
                gt_mark "RESIZED $dev size=$size"
            fi
        done
        for known in "$state"/*; do
            [ -e "$known" ] || continue
            dev=${known##*/}
            if [ ! -e "/sys/block/$dev" ]; then
                rm -f "$known"
                gt_mark "DETACHED $dev"
            fi
        done
        [ "$first" = 1 ] && gt_mark "REPORTING"
        first=0
        sleep 1
    done
}

gt_report_attached() {
    len=1048576
    before=$(dd if="/dev/$1" bs=65536 count=$((len / 65536)) \
        iflag=direct 2>/dev/null | gt_sha256)
    verify=failed
    gt_check "$1" 0 "$len" "$2" >/dev/null && verify=ok
    gt_mark "ATTACHED $1 serial=$2 size=$3 before=$before verify=$verify"
}

# Long-running mode: read "ID COMMAND" lines from the console, run each
# in a subshell (an exit or failure cannot end the loop) and mark its end.
gt_serve() {
    stty -echo 2>/dev/null
    gt_mark "SERVING"
    while IFS= read -r line; do
        id=${line%% *}
        (eval "${line#* }")
        gt_mark "END id=$id rc=$?"
    done
}
