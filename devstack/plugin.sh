#!/bin/bash
# plugin.sh - devstack plugin for spdk-vhost: an SPDK target (the SPDK
# application this host's role needs, see settings), the Cinder SPDK
# backend and Nova's vhost-user-blk attach.
#
# devstack sources this file with the mode and phase as arguments:
#   stack pre-install | install | post-config | extra | test-config
#   unstack, clean

# settings is sourced by devstack beforehand; read it again when this
# file is used alone (it only sets defaults and defines functions).
if ! declare -F configure_cinder_backend_spdk_vhost >/dev/null; then
    # shellcheck source=devstack/settings
    source "$(dirname "${BASH_SOURCE[0]}")/settings"
fi

function spdk_vhost_stack {
    case $1 in
        pre-install)
            spdk_check_app
            echo_summary "spdk-vhost: building SPDK ($(spdk_app)," \
                "interrupt mode $(spdk_interrupt_mode)), reserving hugepages"
            install_spdk
            spdk_setup_hugepages
            spdk_create_group
            ;;
        install)
            echo_summary "spdk-vhost: installing the drivers"
            setup_develop "$SPDK_VHOST_PLUGIN_DIR"
            ;;
        post-config)
            # Before cinder-volume starts: its driver checks the lvstore.
            echo_summary "spdk-vhost: starting the SPDK target"
            configure_spdk
            start_spdk
            create_spdk_lvstore
            if is_service_enabled n-cpu; then
                configure_nova_spdk_vhost
                # libvirtd must see hugetlbfs, mounted by setup.sh.
                restart_service libvirtd
            fi
            ;;
        extra)
            echo_summary "spdk-vhost: volume type, QoS spec and flavor"
            if is_service_enabled c-api; then
                create_spdk_volume_type
            fi
            if is_service_enabled n-api; then
                create_spdk_flavor
            fi
            if is_service_enabled n-cpu; then
                start_nova_compute_spdk_vhost
            fi
            ;;
        test-config)
            if is_service_enabled tempest; then
                configure_tempest_spdk_vhost
            fi
            ;;
    esac
}

if is_service_enabled spdk-tgt; then
    case $1 in
        stack)
            spdk_vhost_stack "$2"
            ;;
        unstack)
            stop_spdk
            ;;
        clean)
            cleanup_spdk
            ;;
    esac
fi
