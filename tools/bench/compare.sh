#!/usr/bin/env bash
# Runs the shared workload scripts (../shared/bench) on Clusterfile and on a
# peer file system in the same session, one system up at a time, and prints
# the summary table (median [min-max] (runs) per metric and system).
#
# Usage: tools/bench/compare.sh [RUNS=1] [WORKLOADS="w1_seq w2_shared w3_meta w4_kernel w5_small"] [PEERS="moosefs"]
#        PEERS may name the shared peers and tools/bench/peers' (moosefs2: MooseFS goal 2).
# Env:   BENCH_SRC (default ../shared/bench next to the repo), OUT (default /var/tmp/clf-bench-results),
#        W4_SUBSET (e.g. "fs include": only those top-level folders of the Linux tree),
#        CLF_VARIANTS ("NAME=KEY=VALUE,KEY=VALUE;NAME2=..."): Clusterfile again with those
#        [cluster] keys (clf up --set), reported as clf-NAME, e.g. "direct=direct_write_kib=1024".
# Needs a built tree (build/tools/clf); run as root. Everything stays on loopback
# or in network namespaces the peer scripts create.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
runs="${1:-1}"
wls="${2:-w1_seq w2_shared w3_meta w4_kernel w5_small}"
peers="${3:-moosefs}"
src="${BENCH_SRC:-$repo/../shared/bench}"
out="${OUT:-/var/tmp/clf-bench-results}"
[ -x "$repo/build/tools/clf" ] || { echo "compare: build first (scripts/up.sh or ninja -C build)" >&2; exit 1; }
[ -d "$src/workloads" ] || { echo "compare: no workload scripts in $src (set BENCH_SRC)" >&2; exit 1; }

# The shared scripts are read-only and write results/ next to themselves: work on a copy.
work="$(mktemp -d /var/tmp/clf-bench-XXXXXX)"
trap 'rm -rf "$work"' EXIT
cp -r "$src/." "$work/"
chmod -R u+w "$work"
cp "$repo/packaging/clf-bench-up.sh" "$work/peers/clf-up.sh"
cp "$repo/packaging/clf-bench-down.sh" "$work/peers/clf-down.sh"
# Peer variants kept here (moosefs2: MooseFS with goal 2).
cp "$repo/tools/bench/peers/"*.sh "$work/peers/"
export CLF="$repo/build/tools/clf"
variants=""
IFS=';' read -ra specs <<< "${CLF_VARIANTS:-}"
for spec in "${specs[@]}"; do
  [ -n "$spec" ] || continue
  name="${spec%%=*}"; keys="${spec#*=}"
  [[ "$name" =~ ^[a-z0-9_]+$ && "$keys" != "$spec" ]] || { echo "compare: bad CLF_VARIANTS entry: $spec" >&2; exit 1; }
  printf '#!/bin/bash\nCLF_BENCH_SET="%s" exec "$(dirname "$0")/clf-up.sh" "$@"\n' "${keys//,/ }" > "$work/peers/clf-$name-up.sh"
  printf '#!/bin/bash\nexec "$(dirname "$0")/clf-down.sh" "$@"\n' > "$work/peers/clf-$name-down.sh"
  chmod +x "$work/peers/clf-$name-up.sh" "$work/peers/clf-$name-down.sh"
  variants="$variants clf-$name"
done
mkdir -p "$out"
for p in $peers clf $variants; do
  RESULTS="$out/$p.txt" "$work/run.sh" "$p" "$runs" "$wls"
  cp "$work/results/$p.log" "$out/$p.log" 2>/dev/null || true
done
"$work/summarize.sh" "$out"/*.txt | tee "$out/summary.txt"
