#!/usr/bin/env bash
# Builds the libFuzzer harnesses (test/fuzz: meta, data, peer, admin) with
# clang, ASan and UBSan in build-san/ (the same build dir as SANITIZE=1
# scripts/test.sh) and runs each for SECONDS (default 60) from the checked-in
# corpus. New inputs go to a scratch corpus, never into test/fuzz/corpus;
# a crash leaves its input as build-san/fuzz-out/<target>/crash-* and fails
# the script. Env: BUILD_DIR (default build-san), FUZZ_JOBS (default 1).
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(meta data peer admin)
build="${BUILD_DIR:-build-san}"

if [ ! -f "$build/build.ninja" ]; then
  CXX=clang++ CC=clang meson setup "$build" --buildtype=debugoptimized -Dfuzz=true \
    -Db_sanitize=address,undefined -Db_lundef=false -Dwerror=false
fi
ninja -C "$build" $(for t in "${targets[@]}"; do echo "test/fuzz/${t}_fuzz"; done)

export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
rc=0
for t in "${targets[@]}"; do
  out="$build/fuzz-out/$t"
  rm -rf "$out"
  mkdir -p "$out/corpus"
  start=$(date +%s)
  set +e
  (cd "$out" && "../../test/fuzz/${t}_fuzz" -max_total_time="$secs" -max_len=65536 \
      -rss_limit_mb=4096 -timeout=30 -print_final_stats=1 \
      corpus "../../../test/fuzz/corpus/$t") >"$out/log" 2>&1
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
