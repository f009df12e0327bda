#!/bin/bash
# Install the Debian packages bindep.txt lists for the "test" profile that
# are not installed yet. Parsed here rather than with bindep itself so that
# it also works before any virtualenv exists (python3-venv is in the list).
set -euo pipefail

bindep_file=${1:-bindep.txt}
mapfile -t wanted < <(awk '/^[a-z0-9]/ && /platform:dpkg/ && /test/ {print $1}' \
    "$bindep_file")

missing=()
for pkg in "${wanted[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    [[ $status == "install ok installed" ]] || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
    echo "Debian packages: all ${#wanted[@]} from $bindep_file installed"
    exit 0
fi
echo "Debian packages: installing ${missing[*]}"
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "${missing[@]}"
