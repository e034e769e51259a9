#!/usr/bin/env bash
# Command (2): installs the Debian packages, builds, and runs every test suite
# (unit, integration, mount, slow; `package` only when SUITES names it). Run as root on Debian 12 (FUSE mounts and
# `runuser -u nobody` need it). Env: BUILD_DIR (default build), SUITES (e.g.
# "unit integration": only those suites; default all).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build}"

bash scripts/install-deps.sh
if [ -f "$build/build.ninja" ]; then
  meson setup --reconfigure "$build" >/dev/null
else
  meson setup "$build" --buildtype=debugoptimized
fi
ninja -C "$build"

# Mounts a crashed test left behind (the harness unmounts in its destructor;
# this only catches a test killed by a timeout).
cleanup_stale_mounts() {
  local m
  while read -r m; do
    case "$m" in
      /tmp/clf-test-*) fusermount3 -u -q "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true ;;
    esac
  done < <(findmnt -rn -o TARGET,FSTYPE | awk '$2 ~ /^fuse/ {print $1}')
}
trap cleanup_stale_mounts EXIT

suite_args=()
for s in ${SUITES:-}; do suite_args+=(--suite "$s"); done
# The package suite builds every .deb (minutes): only when SUITES names it.
[ -n "${SUITES:-}" ] || suite_args+=(--no-suite package)
log="$build/meson-logs/test-summary.txt"
start=$(date +%s)
set +e
meson test -C "$build" --print-errorlogs "${suite_args[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
end=$(date +%s)
ok=$(awk '/^Ok:/ {print $2}' "$log" | tail -1)
fail=$(awk '/^Fail:/ {print $2}' "$log" | tail -1)
timeout=$(awk '/^Timeout:/ {print $2}' "$log" | tail -1)
skipped=$(awk '/^Skipped:/ {print $2}' "$log" | tail -1)
echo "meson test took $((end - start)) s"
echo "tests: ${ok:-0} passed, $(( ${fail:-0} + ${timeout:-0} )) failed, ${skipped:-0} skipped"
exit "$rc"
