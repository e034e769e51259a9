#!/usr/bin/env bash
# Command (1): installs the Debian packages, builds, starts a local 4-server
# cluster on loopback, mounts it and prints `clf status`.
# Usage: scripts/up.sh [DIR=/tmp/clf] [MNT=/mnt/clf]     (as root)
# Stop it with: build/tools/clf down --dir DIR
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-/tmp/clf}"
mnt="${2:-/mnt/clf}"
build="${BUILD_DIR:-build}"

bash scripts/install-deps.sh
if [ -f "$build/build.ninja" ]; then
  meson setup --reconfigure "$build" >/dev/null
else
  meson setup "$build" --buildtype=debugoptimized
fi
ninja -C "$build"

"$build/tools/clf" up --servers 4 --dir "$dir" --mount "$mnt"
"$build/tools/clf" status --cluster "$dir/cluster.toml"
