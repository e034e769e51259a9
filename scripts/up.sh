#!/usr/bin/env bash
# Command (1): installs the Debian packages that building and running need,
# builds the three programs (clfd, clfmount, clf; no tests), starts a local
# 4-server cluster on loopback, mounts it and prints `clf status`.
# Usage: scripts/up.sh [DIR=/tmp/clf] [MNT=/mnt/clf]     (as root)
# Stop it with: build/tools/clf down --dir DIR
# Command (2), scripts/test.sh, builds the rest in the same build directory.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-/tmp/clf}"
mnt="${2:-/mnt/clf}"
build="${BUILD_DIR:-build}"
start=$(date +%s)
step() { echo "== [$(( $(date +%s) - start ))s] $*"; }

step "installing packages (scripts/install-deps.sh)"
bash scripts/install-deps.sh
step "configuring $build"
if [ -f "$build/build.ninja" ]; then
  meson setup --reconfigure "$build" >/dev/null
else
  # The test suites are configured by command (2) (their packages come with it).
  # No debug info: a third less build time (-O2, assertions on as in command 2).
  meson setup "$build" --buildtype=debugoptimized -Ddebug=false -Dtests=false >/dev/null
fi
step "building clfd, clfmount and clf"
ninja -C "$build" server/clfd fuse/clfmount tools/clf
step "starting 4 servers in $dir, mounting at $mnt"
"$build/tools/clf" up --servers 4 --dir "$dir" --mount "$mnt"
"$build/tools/clf" status --cluster "$dir/cluster.toml"
step "done"
