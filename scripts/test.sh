#!/usr/bin/env bash
# Command (2): installs the Debian packages, builds, and runs every test suite
# (unit, integration, mount, slow; `package` only when SUITES names it), then
# a short fuzz of every libFuzzer harness. Run as root on Debian 12 (FUSE
# mounts and `runuser -u nobody` need it). Env:
#   BUILD_DIR   default build (gcc)
#   SUITES      e.g. "unit integration": only those suites; default all
#   SANITIZE=1  clang, ASan and UBSan in build-san/ (the fuzz harnesses too;
#               default suites "unit integration"); any report fails the test
#               that hit it
#   SANITIZE=thread  clang and TSan in build-tsan/ (default suites "unit
#               integration"; no fuzzing); a data race report fails the test
#               that hit it, and a report of any process (clfd too: see
#               build-tsan/tsan-logs) fails the run; scripts/tsan.supp lists
#               the false positives in uninstrumented Debian libraries
#   FUZZ_SECONDS=N  after the tests, each fuzz harness runs N seconds from its
#               corpus (default 5; 0: no fuzzing). scripts/fuzz.sh builds only
#               the harnesses (clang, ASan, UBSan, libFuzzer) in build-fuzz/
#               (with SANITIZE=1: build-san/); a crash fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize="${SANITIZE:-0}"
fuzz_secs="${FUZZ_SECONDS:-5}"
fuzz_build=build-fuzz
if [ "$sanitize" = 1 ]; then
  build="${BUILD_DIR:-build-san}"
  fuzz_build="$build"
  : "${SUITES:=unit integration}"
  export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:${ASAN_OPTIONS:-}"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
elif [ "$sanitize" = thread ]; then
  build="${BUILD_DIR:-build-tsan}"
  fuzz_secs=0
  : "${SUITES:=unit integration}"
  # A report makes the process exit 66 at its end: the test that hit it fails.
  # But the tests stop their clfd processes with signals and do not look at
  # their exit codes, so every process (tests, clfd, clf) writes its reports
  # to $tsan_logs/tsan.<pid> and any report there fails the run (below).
  # ignore_noninstrumented_modules: Debian's gRPC, protobuf, Abseil and RocksDB
  # are not built with TSan; accesses they make through interceptors (memcpy,
  # free) are not reported, since their synchronization is invisible to TSan.
  # scripts/tsan.supp lists the handoffs left, each with its reason;
  # common/tsan.h annotates libclf's and clfd's async call hand-offs.
  tsan_logs="$build/tsan-logs"  # emptied before the tests run
  case "$tsan_logs" in /*) ;; *) tsan_logs="$(pwd)/$tsan_logs" ;; esac
  export TSAN_OPTIONS="suppressions=$(pwd)/scripts/tsan.supp:ignore_noninstrumented_modules=1:second_deadlock_stack=1:history_size=4:log_path=$tsan_logs/tsan:${TSAN_OPTIONS:-}"
elif [ "$sanitize" != 0 ]; then
  echo "SANITIZE must be 0, 1 or thread" >&2
  exit 2
else
  build="${BUILD_DIR:-build}"
fi

bash scripts/install-deps.sh all
# meson wraps the compiler in ccache only when CXX is unset: name it for clang.
clang_cc=clang clang_cxx=clang++
if command -v ccache >/dev/null; then clang_cc="ccache clang" clang_cxx="ccache clang++"; fi
if [ -f "$build/build.ninja" ]; then
  # A build directory of command (1) has the suites switched off.
  meson setup --reconfigure "$build" -Dtests=true >/dev/null
elif [ "$sanitize" = 1 ]; then
  # werror off: clang warns where gcc (the -Werror build) does not.
  CXX="$clang_cxx" CC="$clang_cc" meson setup "$build" --buildtype=debugoptimized -Dfuzz=true \
    -Db_sanitize=address,undefined -Db_lundef=false -Dwerror=false
elif [ "$sanitize" = thread ]; then
  CXX="$clang_cxx" CC="$clang_cc" meson setup "$build" --buildtype=debugoptimized \
    -Db_sanitize=thread -Db_lundef=false -Dwerror=false
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
if [ "$sanitize" = thread ]; then rm -rf "$tsan_logs" && mkdir -p "$tsan_logs"; fi
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
if [ "$sanitize" = thread ]; then
  reports=$(grep -l "WARNING: ThreadSanitizer" "$tsan_logs"/tsan.* 2>/dev/null || true)
  if [ -n "$reports" ]; then
    echo "TSan reports in $(echo "$reports" | wc -l) process(es) ($tsan_logs):"
    grep -h "^SUMMARY: ThreadSanitizer" $reports | sort | uniq -c | sort -rn | head -20
    rc=1
  else
    echo "TSan: no report in any process"
  fi
fi
if [ "$fuzz_secs" != 0 ]; then
  BUILD_DIR="$fuzz_build" bash scripts/fuzz.sh "$fuzz_secs" || rc=1
fi
exit "$rc"
