#!/bin/bash
# Install the Debian packages that are not installed yet: those a bindep
# file lists for the "test" profile (tools/install-debs.sh bindep.txt), or
# the packages named (tools/install-debs.sh pkg...). bindep.txt is parsed
# here rather than with bindep itself so that it also works before any
# virtualenv exists (python3-venv is in the list).
set -euo pipefail

if [[ $# -eq 1 && -f $1 ]]; then
    mapfile -t wanted < <(awk '/^[a-z0-9]/ && /platform:dpkg/ && /test/ \
        {print $1}' "$1")
else
    wanted=("$@")
fi

missing=()
for pkg in "${wanted[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    [[ $status == "install ok installed" ]] || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
    echo "Debian packages: all ${#wanted[@]} wanted are installed"
    exit 0
fi
echo "Debian packages: installing ${missing[*]}"
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "${missing[@]}"
