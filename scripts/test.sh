#!/usr/bin/env bash
# Command (2): installs the Debian packages, builds, and runs every test suite
# (unit, integration, mount, slow; `package` only when SUITES names it). Run as root on Debian 12 (FUSE mounts and
# `runuser -u nobody` need it). Env: BUILD_DIR (default build), SUITES (e.g.
# "unit integration": only those suites; default all), SANITIZE=1: build with
# clang, ASan and UBSan in build-san/ (the fuzz harnesses' build dir; default
# suites "unit integration"), any report fails the test that hit it,
# FUZZ_SECONDS=N: after the tests, run each fuzz harness N seconds from its
# corpus (scripts/fuzz.sh; needs SANITIZE=1's build dir).
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize="${SANITIZE:-0}"
if [ "$sanitize" = 1 ]; then
  build="${BUILD_DIR:-build-san}"
  : "${SUITES:=unit integration}"
  export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:${ASAN_OPTIONS:-}"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
else
  build="${BUILD_DIR:-build}"
fi

bash scripts/install-deps.sh
if [ -f "$build/build.ninja" ]; then
  meson setup --reconfigure "$build" >/dev/null
elif [ "$sanitize" = 1 ]; then
  # werror off: clang warns where gcc (the -Werror build) does not.
  CXX=clang++ CC=clang meson setup "$build" --buildtype=debugoptimized -Dfuzz=true \
    -Db_sanitize=address,undefined -Db_lundef=false -Dwerror=false
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
if [ -n "${FUZZ_SECONDS:-}" ]; then
  BUILD_DIR="$build" bash scripts/fuzz.sh "$FUZZ_SECONDS" || rc=1
fi
exit "$rc"
