#!/usr/bin/env bash
# Builds the libFuzzer harnesses (test/fuzz: meta, data, peer, admin, lock,
# baseline, frame, handshake, datatype) with clang, ASan and UBSan and runs each for SECONDS
# (default 60) from the checked-in corpus. Only the harnesses and what they
# link are built (not the test suites or the daemons), in build-fuzz/ (ccache
# when installed). New inputs go to a scratch corpus, never into
# test/fuzz/corpus; a crash, a sanitizer report, a leaked exception, a hang
# past -timeout or an RSS over the limit leaves its input as
# <build>/fuzz-out/<target>/crash-* (or timeout-*, oom-*) and fails the script.
# Prints one line per target: executions, seconds, exit status.
# scripts/test.sh runs it for a few seconds per target; use it directly for
# long runs. Env: BUILD_DIR (default build-fuzz; SANITIZE=1 scripts/test.sh
# passes build-san, which has the harnesses too).
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(meta data peer admin lock baseline frame handshake datatype)
build="${BUILD_DIR:-build-fuzz}"

if [ ! -f "$build/build.ninja" ]; then
  # meson wraps the compiler in ccache only when CXX is unset: name it here.
  cc=clang cxx=clang++
  if command -v ccache >/dev/null; then cc="ccache clang" cxx="ccache clang++"; fi
  # werror off: clang warns where gcc (the -Werror build) does not.
  CXX="$cxx" CC="$cc" meson setup "$build" --buildtype=debugoptimized -Dfuzz=true \
    -Db_sanitize=address,undefined -Db_lundef=false -Dwerror=false
fi
build_start=$(date +%s)
ninja -C "$build" $(for t in "${targets[@]}"; do echo "test/fuzz/${t}_fuzz"; done)
echo "fuzz: harnesses built in $(( $(date +%s) - build_start )) s"

root=$(pwd)
bin=$(cd "$build" && pwd)/test/fuzz
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
rc=0
for t in "${targets[@]}"; do
  out="$build/fuzz-out/$t"
  rm -rf "$out"
  mkdir -p "$out/corpus"
  start=$(date +%s)
  set +e
  (cd "$out" && "$bin/${t}_fuzz" -max_total_time="$secs" -max_len=65536 \
      -rss_limit_mb=4096 -timeout=30 -print_final_stats=1 \
      corpus "$root/test/fuzz/corpus/$t") >"$out/log" 2>&1
  r=$?
  set -e
  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$out/log" | tail -1)
  echo "fuzz $t: ${execs:-?} executions in $(( $(date +%s) - start )) s, exit $r"
  if [ "$r" -ne 0 ]; then
    rc=1
    tail -40 "$out/log"
  fi
done
exit "$rc"
