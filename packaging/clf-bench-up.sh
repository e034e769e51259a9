#!/bin/bash
# Clusterfile as a benchmark peer (shared/bench/peers/*-up.sh conventions): a
# fresh local 4-server cluster on loopback mounted at MOUNTPOINT.
# State (cluster file, secret, srv<K>/ data and logs) in $CLF_BENCH_DIR
# (default /var/tmp/bench-clf), wiped on every up. Needs a built tree
# (scripts/up.sh or meson + ninja in build/); $CLF overrides the clf binary;
# $CLF_BENCH_SET ("KEY=VALUE ...") sets [cluster] keys (clf up --set).
# Usage: clf-bench-up.sh MOUNTPOINT [SERVERS=4]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mnt="${1:?usage: $0 MOUNTPOINT [SERVERS]}"
servers="${2:-4}"
st="${CLF_BENCH_DIR:-/var/tmp/bench-clf}"
clf="${CLF:-$here/../build/tools/clf}"
[ -x "$clf" ] || { echo "clf-bench-up: $clf not built (run scripts/up.sh or ninja -C build)" >&2; exit 1; }
if compgen -G "$st/srv*/clfd.pid" > /dev/null; then
  echo "clf-bench-up: $st has pid files; run clf-bench-down.sh first" >&2
  exit 1
fi
rm -rf "$st"
mkdir -p "$st" "$mnt"
set_args=()
for kv in ${CLF_BENCH_SET:-}; do set_args+=(--set "$kv"); done
"$clf" up --servers "$servers" --dir "$st" --mount "$mnt" "${set_args[@]}"
echo "clf-bench-up: $servers clfd servers, mounted at $mnt (state in $st)${CLF_BENCH_SET:+, with $CLF_BENCH_SET}"
