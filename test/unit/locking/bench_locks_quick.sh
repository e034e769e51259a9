#!/bin/sh
# Runs `clf bench locks --quick` and checks locks.csv: header, the row set, and
# that list locking of the non-overlapping 3-D block runs every client at once.
set -eu
clf="$1"
out=$(mktemp -d "${TMPDIR:-/tmp}/clf-bench-locks.XXXXXX")
trap 'rm -rf "$out"' EXIT
"$clf" bench locks --quick --skip-raw --out "$out" > "$out/stdout.txt" 2> "$out/stderr.txt"
csv="$out/locks.csv"
header=$(head -n 1 "$csv")
if [ "$header" != "workload,clients,method,locks_per_client,max_concurrent,seconds" ]; then
  echo "bad header: $header"; exit 1
fi
want="3d-block,8 3d-block,27 flash,2 flash,8 tile,6"
for wc in $want; do
  for m in none file range list; do
    n=$(grep -c "^$wc,$m," "$csv" || true)
    if [ "$n" != 1 ]; then echo "expected one row $wc,$m, got $n"; exit 1; fi
  done
done
rows=$(($(wc -l < "$csv") - 1))
if [ "$rows" != 20 ]; then echo "expected 20 rows, got $rows"; exit 1; fi
# 3-D block list locking: max_concurrent == clients; whole-file: 1.
awk -F, '$1 == "3d-block" && $3 == "list" && $5 != $2 { print "list not fully concurrent: " $0; bad = 1 }
         $1 == "3d-block" && $3 == "file" && $5 != 1 { print "whole-file not serialized: " $0; bad = 1 }
         END { exit bad }' "$csv"
echo "ok: $rows rows"
