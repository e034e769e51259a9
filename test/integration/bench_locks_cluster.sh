#!/bin/sh
# Runs `clf bench locks --cluster --quick` (real clfd processes, one worker
# process per client) and checks locks_cluster.csv: the header, one row per
# workload, client count and method, every run moved its bytes in a positive
# time, list locks are per-extent (1920 for 2 FLASH clients), and the raw
# lock-service table has its rows.
set -eu
clf="$1"
out=$(mktemp -d "${TMPDIR:-/tmp}/clf-bench-locks-cluster.XXXXXX")
trap 'rm -rf "$out"' EXIT
if ! "$clf" bench locks --cluster --quick --no-plots --out "$out" > "$out/stdout.txt" 2> "$out/stderr.txt"; then
  cat "$out/stdout.txt" "$out/stderr.txt"; exit 1
fi
csv="$out/locks_cluster.csv"
header=$(head -n 1 "$csv")
if [ "$header" != "workload,clients,method,locks_per_client,bytes,seconds,mb_per_s,lock_seconds_sum,runs_seconds" ]; then
  echo "bad header: $header"; exit 1
fi
for wc in 3d-block,1 3d-block,2 flash,1 flash,2 tile,6; do
  for m in none file range list; do
    n=$(grep -c "^$wc,$m," "$csv" || true)
    if [ "$n" != 1 ]; then echo "expected one row $wc,$m, got $n"; exit 1; fi
  done
done
awk -F, 'NR > 1 && ($5 <= 0 || $6 <= 0) { print "no bytes or no time: " $0; bad = 1 }
         $1 == "flash" && $2 == 2 && $3 == "list" && $4 != 1920 { print "flash list locks: " $0; bad = 1 }
         END { exit bad }' "$csv"
raw=$(($(wc -l < "$out/locks_cluster_raw.csv") - 1))
if [ "$raw" != 7 ]; then echo "expected 7 raw rows, got $raw"; exit 1; fi
grep -q "Lock service alone" "$out/stdout.txt"
echo "ok"
