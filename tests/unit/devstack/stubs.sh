#!/bin/bash
# devstack's functions, stubbed for tests/unit/test_devstack_plugin.py.
#
# Configuration functions really write ini files; anything that would
# change the host (services, packages, users, OpenStack API calls) is only
# recorded, one line per call, in $STUB_LOG.

STUB_DIR=${STUB_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}

log_call() {
    echo "$*" >>"$STUB_LOG"
}

iniset() {
    "$STUB_PYTHON" "$STUB_DIR/ini.py" set "$@"
}

iniset_multiline() {
    "$STUB_PYTHON" "$STUB_DIR/ini.py" set_multiline "$@"
}

iniget() {
    "$STUB_PYTHON" "$STUB_DIR/ini.py" get "$@"
}

is_service_enabled() {
    local service
    for service in "$@"; do
        if [[ ,$ENABLED_SERVICES, == *,$service,* ]]; then
            return 0
        fi
    done
    return 1
}

enable_service() {
    is_service_enabled "$1" || ENABLED_SERVICES+=",$1"
}

echo_summary() {
    echo "$*"
}

die() {
    echo "die: $*" >&2
    exit 1
}

warn() {
    echo "warn: $*" >&2
}

sudo() {
    log_call sudo "$@"
    "$@"
}

# Commands that would change the host or need a cloud: recorded only.
for cmd in install_package setup_develop run_process stop_process \
        restart_service groupadd usermod systemctl make git; do
    eval "$cmd() { log_call $cmd \"\$@\"; }"
done

# No OpenStack resource exists yet: every "show" fails, every change succeeds.
openstack() {
    log_call openstack "$@"
    [[ " $* " != *" show "* ]]
}

# Users exist, the group does not.
getent() {
    log_call getent "$@"
    [[ $1 == passwd ]]
}

# A prebuilt SPDK tree whose scripts record their arguments.
make_fake_spdk() {
    local dir=$1 script
    mkdir -p "$dir/scripts" "$dir/build/bin"
    for script in scripts/setup.sh scripts/rpc.py build/bin/spdk_tgt \
            build/bin/vhost build/bin/nvmf_tgt; do
        cat >"$dir/$script" <<SCRIPT
#!/bin/bash
echo "$script HUGEMEM=\${HUGEMEM-} PCI_ALLOWED=\${PCI_ALLOWED-} \$*" >>"$STUB_LOG"
if [[ " \$* " == *" bdev_lvol_get_lvstores "* ]]; then
    [[ -n \${FAKE_LVSTORE_EXISTS:-} ]]
fi
SCRIPT
        chmod +x "$dir/$script"
    done
}

# A tools/build-spdk.sh that records how it was called and "builds" a
# fake tree in $FAKE_SPDK_BUILDS, printing its path last, as the real one.
# A command at $1 that does nothing and exits $2 (default 0).
make_fake_command() {
    mkdir -p "$(dirname "$1")"
    printf '#!/bin/sh\nexit %s\n' "${2:-0}" >"$1"
    chmod +x "$1"
}

make_fake_build_script() {
    local script=$1
    cat >"$script" <<SCRIPT
#!/bin/bash
echo "build-spdk.sh \$* SPDK_SOURCES=\${SPDK_SOURCES-}" >>"$STUB_LOG"
source "$STUB_DIR/stubs.sh"
tree=$FAKE_SPDK_BUILDS/spdk-v\$1
make_fake_spdk "\$tree"
echo "build-spdk: built" >&2
echo "\$tree"
SCRIPT
    chmod +x "$script"
}
