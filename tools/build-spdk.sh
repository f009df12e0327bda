#!/bin/bash
# Build SPDK once per version and build recipe, and print where it is.
#
#   tools/build-spdk.sh [VERSION]        (default: $SPDK_VERSION or 26.05)
#
# Prints the built SPDK tree on its last line of standard output; its
# build/bin holds spdk_tgt, vhost, nvmf_tgt and spdk_dd, which run with
# LD_LIBRARY_PATH=<tree>/build/lib (the in-tree isa-l is found from there).
# The tree is cached outside the checkout, keyed by version, by the build
# recipe below and by the patches it applies, so a second run on the same
# machine is instant. Nothing Debian manages is replaced: DPDK is Debian's,
# isa-l and isa-l_crypto are built inside the SPDK tree.
#
# Sources, first found wins:
#   $SPDK_SOURCES, else ../shared/spdk beside the checkout: a directory with
#     spdk-v<VERSION>.tar.gz, isa-l-*.tar.gz and isa-l-crypto-*.tar.gz
#     (git archives of the upstream repositories and of SPDK's pins);
#   else git clone --recurse-submodules of the tag v<VERSION>.
# Patches: tools/spdk-patches/<VERSION>/*.patch, in name order, fixes of
# SPDK bugs that hurt users, each written to go upstream as is (SPDK's
# commit message style, a unit test in SPDK's own suite). The unit tests a
# patch touches are built and run after the build: a patch that no longer
# fixes what its test checks fails the build.
# Environment: SPDK_CACHE (default ~/.cache/spdk-vhost), SPDK_BUILD_JOBS.
set -euo pipefail

version=${1:-${SPDK_VERSION:-26.05}}
here=$(cd "$(dirname "$0")/.." && pwd)
cache=${SPDK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/spdk-vhost}
jobs=${SPDK_BUILD_JOBS:-$(nproc)}
sources=${SPDK_SOURCES:-$here/../shared/spdk}
upstream=https://github.com/spdk/spdk.git

say() { echo "build-spdk: $*" >&2; }
die() { say "error: $*"; exit 1; }

[[ $version =~ ^[0-9]+\.[0-9]+$ ]] || die "version must look like 26.05"

unpack_sources() {
    local dest=$1 tarball=$sources/spdk-v$version.tar.gz
    if [[ -f $tarball ]]; then
        say "sources from $sources"
        tar -xzf "$tarball" -C "$dest" --strip-components=1
        rm -rf "$dest/isa-l" "$dest/isa-l-crypto"
        mkdir "$dest/isa-l" "$dest/isa-l-crypto"
        local isal
        for isal in "$sources"/isa-l-*.tar.gz; do
            case $isal in
                */isa-l-crypto-*) tar -xzf "$isal" -C "$dest/isa-l-crypto" \
                    --strip-components=1 ;;
                *) tar -xzf "$isal" -C "$dest/isa-l" --strip-components=1 ;;
            esac
        done
    else
        say "no $tarball: cloning v$version from $upstream"
        git clone -q --depth 1 --branch "v$version" --recurse-submodules \
            --shallow-submodules "$upstream" "$dest"
    fi
}

# Debian 12 ships DPDK 22.11; SPDK 26.x expects a newer one. These three
# edits make it build and run against 22.11 (checked for 26.01 and 26.05).
adapt_to_debian_dpdk() {
    local src=$1
    sed -i 's/^CONFIG_IPSEC_MB?=.*/CONFIG_IPSEC_MB?=n/' "$src/mk/config.mk"
    sed -i '0,/^DPDK_LIB_LIST = /s/ rte_argparse\| rte_log//g' \
        "$src/lib/env_dpdk/env.mk"
    sed -i 's/if (minor > 4)/if (minor > 11)/' "$src/lib/env_dpdk/pci_dpdk.c"
}

patches=$here/tools/spdk-patches/$version

apply_patches() {
    local src=$1 patch
    for patch in "$patches"/*.patch; do
        [[ -f $patch ]] || continue
        say "applying $(basename "$patch")"
        patch -d "$src" -p1 --batch --forward --quiet <"$patch" ||
            die "$(basename "$patch") does not apply to v$version"
    done
}

# The unit tests (test/unit/.../*_ut.c) the patches change, built with
# assertions on and run; the product's binaries are not rebuilt for them.
check_patches() {
    local src=$1 dir
    local -a dirs
    mapfile -t dirs < <(cat "$patches"/*.patch 2>/dev/null |
        sed -n 's|^+++ b/\(test/unit/.*\)/[^/]*_ut\.c$|\1|p' | sort -u)
    [[ ${#dirs[@]} -gt 0 ]] || return 0
    local -a flags=(CONFIG_UNIT_TESTS=y CONFIG_DEBUG=y)
    for dir in lib/ut lib/ut_mock "${dirs[@]}"; do
        make -C "$src/$dir" "${flags[@]}" >>"$src/unittest.log" 2>&1 ||
            die "$dir failed to build, see $src/unittest.log"
    done
    for dir in "${dirs[@]}"; do
        say "running the patched unit tests in $dir"
        # Each test directory builds one program, named after its .c file.
        "$src/$dir/$(basename "$dir" .c)_ut" >>"$src/unittest.log" 2>&1 ||
            die "$dir failed, see $src/unittest.log"
    done
}

# The binaries find the in-tree isa-l through paths fixed at link time, so
# the tree is built where it stays; .built marks a finished one.
configure_flags=(--with-dpdk --without-crypto --disable-tests
    --disable-unit-tests --disable-examples --without-xnvme
    --without-vfio-user --without-ocf --with-uring --without-fio
    --without-fsdev)
# The cache key: what changes the binaries, not this file's comments.
recipe=$({ echo "${configure_flags[*]}"; declare -f adapt_to_debian_dpdk;
    cat "$patches"/*.patch 2>/dev/null || true; } | sha256sum | cut -c1-12)
tree=$cache/spdk-v$version-$recipe
if [[ -f $tree/.built ]]; then
    say "SPDK v$version already built in $tree"
    echo "$tree"
    exit 0
fi

mkdir -p "$cache"
work=$tree
rm -rf "$work"
mkdir -p "$work"
unpack_sources "$work"
apply_patches "$work"

# SPDK's code generators run with the first python3 on PATH: give them a
# private virtualenv with their modules rather than touching the system's.
tools_venv=$cache/build-venv
if ! "$tools_venv/bin/python3" -c 'import elftools, jinja2, tabulate' \
    2>/dev/null; then
    python3 -m venv "$tools_venv"
    "$tools_venv/bin/pip" install -q tabulate jinja2 pyelftools ||
        die "could not install SPDK's build modules in $tools_venv"
fi
export PATH=$tools_venv/bin:$PATH

cd "$work"
./configure "${configure_flags[@]}" >"$work/configure.log" 2>&1 ||
    die "configure failed, see $work/configure.log"
adapt_to_debian_dpdk "$work"

say "building SPDK v$version with $jobs jobs (a few minutes)"
# isa-l_crypto's assembler step can race under -j: a second make ends it.
if ! make -j"$jobs" >"$work/build.log" 2>&1; then
    make -j1 >>"$work/build.log" 2>&1 ||
        die "make failed, see $work/build.log"
fi
for app in spdk_tgt vhost nvmf_tgt spdk_dd; do
    [[ -x build/bin/$app ]] || die "build/bin/$app missing after make"
done
check_patches "$work"

touch "$tree/.built"
say "SPDK v$version built in $tree"
echo "$tree"
