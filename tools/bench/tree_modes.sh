#!/usr/bin/env bash
# Paper 004's file-tree tasks in each metadata mode: tar -x of a Linux source
# tree, ls -lR of it, rm -rf of it, on a fresh local cluster (clf up, loopback)
# per mode: client (the paper's client-driven baseline), collective (its
# per-file binary-tree collectives) and onehop (the default). Writes
# OUT/tree_modes.csv (mode,servers,entries,tar_s,ls_s,rm_s) and prints each
# mode's time against the client mode's, as the paper reports it
# ("improves the execution time by X%": -X% here, t_mode / t_client - 1).
# The paper used Linux 2.6.9 (~17,000 entries); by default this extracts a
# subset of the same size from the tarball (drivers/net, include, arch/x86,
# sound of Linux 6.1: 16,585 entries); --all takes the whole tree.
# Needs a built tree (build/tools/clf), root (FUSE). Never run it beside a
# build or another benchmark: it measures wall time.
# Usage: tools/bench/tree_modes.sh [--servers N] [--modes a,b,c] [--all] TARBALL OUT
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
clf="${CLF:-$repo/build/tools/clf}"
servers=4
modes="client,collective,onehop"
all=0
while [ $# -gt 0 ]; do
  case "$1" in
    --servers) servers="$2"; shift 2 ;;
    --modes) modes="$2"; shift 2 ;;
    --all) all=1; shift ;;
    -*) echo "tree_modes: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
tarball="${1:?usage: $0 [--servers N] [--modes a,b,c] [--all] TARBALL OUT}"
out="${2:?usage: $0 [--servers N] [--modes a,b,c] [--all] TARBALL OUT}"
[ -x "$clf" ] || { echo "tree_modes: build first ($clf)" >&2; exit 1; }
[ -r "$tarball" ] || { echo "tree_modes: cannot read $tarball" >&2; exit 1; }
mkdir -p "$out"
# (head closes the pipe early: tar's SIGPIPE is not an error here)
top="$(set +o pipefail; tar -tf "$tarball" | head -1 | cut -d/ -f1)"
[ -n "$top" ] || { echo "tree_modes: $tarball lists nothing" >&2; exit 1; }
members=()
if [ "$all" = 0 ]; then
  for d in drivers/net include arch/x86 sound; do members+=("$top/$d"); done
fi

work="$(mktemp -d /var/tmp/clf-tree-modes-XXXXXX)"
state=""
cleanup() {
  if [ -n "$state" ]; then "$clf" down --dir "$state" >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

csv="$out/tree_modes.csv"
echo "mode,servers,entries,tar_s,ls_s,rm_s" > "$csv"
IFS=, read -r -a mode_list <<< "$modes"
for mode in "${mode_list[@]}"; do
  state="$work/$mode"
  mnt="$work/$mode.mnt"
  mkdir -p "$mnt"
  "$clf" up --servers "$servers" --dir "$state" --mount "$mnt" --metadata-mode "$mode" >/dev/null
  t0=$(now)
  tar -xf "$tarball" -C "$mnt" "${members[@]}"
  t1=$(now)
  entries=$(find "$mnt/$top" | wc -l)
  sleep 2  # the mount's attribute and name caches expire, as in w3/w4
  t2=$(now)
  ls -lR "$mnt/$top" > /dev/null
  t3=$(now)
  rm -rf "$mnt/$top"
  t4=$(now)
  "$clf" down --dir "$state" >/dev/null
  state=""
  row="$mode,$servers,$entries,$(secs "$t0" "$t1"),$(secs "$t2" "$t3"),$(secs "$t3" "$t4")"
  echo "$row" >> "$csv"
  echo "tree_modes: $row"
done

# Each mode against the client-driven baseline (the paper's comparison).
awk -F, 'NR > 1 { t[$1] = $4; l[$1] = $5; r[$1] = $6; m[NR] = $1 }
  END {
    if (!("client" in t)) exit
    for (i = 2; i <= NR; i++) {
      k = m[i]; if (k == "client") continue
      printf "tree_modes: %s vs client, change of the time: tar %+.0f%%, ls -lR %+.0f%%, rm -rf %+.0f%% (paper 004, collective: -49%%, -75%%, -83%%)\n",
        k, 100 * (t[k] / t["client"] - 1), 100 * (l[k] / l["client"] - 1), 100 * (r[k] / r["client"] - 1)
    }
  }' "$csv" | tee "$out/tree_modes.txt"
