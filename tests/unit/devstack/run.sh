#!/bin/bash
# Runs the spdk-vhost devstack plugin the way stack.sh, unstack.sh and
# clean.sh do, over the stubs of stubs.sh. Arguments: the steps to run,
# in order (pre-install, cinder, install, post-config, extra,
# test-config, unstack, clean); "cinder" is lib/cinder's backend hook,
# "upgrade=VERSION" what an operator runs in a stacked shell.
set -eu

STUB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/unit/devstack/stubs.sh
source "$STUB_DIR/stubs.sh"
plugin=$PLUGIN_DIR/devstack

# stack.sh: override-defaults before the lib/ files, settings after.
# shellcheck source=devstack/override-defaults
source "$plugin/override-defaults"
# shellcheck source=devstack/settings
source "$plugin/settings"

for step in "$@"; do
    case $step in
        cinder)
            for be in ${CINDER_ENABLED_BACKENDS//,/ }; do
                if type "configure_cinder_backend_${be%%:*}" >/dev/null 2>&1; then
                    "configure_cinder_backend_${be%%:*}" "${be##*:}"
                fi
            done
            ;;
        upgrade=*)
            upgrade_spdk "${step#upgrade=}"
            ;;
        unstack|clean)
            # shellcheck source=devstack/plugin.sh
            source "$plugin/plugin.sh" "$step"
            ;;
        *)
            # shellcheck source=devstack/plugin.sh
            source "$plugin/plugin.sh" stack "$step"
            ;;
    esac
done
