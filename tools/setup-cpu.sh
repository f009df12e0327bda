#!/bin/bash
# Share the CPU between threads, not between sessions, for the test suite.
#
# With the kernel's autogroup scheduling on (Debian's default), CFS first
# shares the CPU equally between sessions, then between the threads of a
# session. The tests start every SPDK target and every OpenStack service
# in a session of its own (so that its whole process group can be
# stopped), while all the TCG guests of a lane sit in one session (the
# test runner's, or libvirtd's). A polling SPDK reactor then weighs as
# much as every guest of the run together: on two cores, with three
# polling targets and two lanes of guests, a guest got so little CPU that
# its kernel logged RCU stalls and a live migration failed (issue #34).
# Without autogroups each thread counts once, a guest's vCPU as much as
# a reactor. Safe to run again; a kernel without autogroups needs nothing.
set -euo pipefail

knob=/proc/sys/kernel/sched_autogroup_enabled

say() {
    echo "setup-cpu: $*"
}

if [[ ! -e $knob ]]; then
    say "kernel without autogroup scheduling: nothing to do"
    exit 0
fi
[[ $(id -u) -eq 0 ]] || { echo "setup-cpu: must run as root" >&2; exit 1; }
if [[ $(<"$knob") != 0 ]]; then
    echo 0 >"$knob"
    say "autogroup scheduling turned off (was on)"
else
    say "autogroup scheduling already off"
fi
