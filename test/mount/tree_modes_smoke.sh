#!/usr/bin/env bash
# tools/bench/tree_modes.sh end to end on a tiny tree (no timing checked):
# each metadata mode extracts, lists and removes the same 19 entries through
# a real mount, and the CSV has one row per mode with that count.
set -euo pipefail
script="${1:?usage: $0 TREE_MODES_SH}"
tmp="$(mktemp -d /tmp/clf-tree-smoke-XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
src="$tmp/src/linux-source-6.1"
for d in drivers/net include arch/x86 sound; do
  mkdir -p "$src/$d"
  for i in 1 2 3; do echo "$d $i" > "$src/$d/f$i"; done
done
tar -cf "$tmp/tiny.tar" -C "$tmp/src" linux-source-6.1
bash "$script" "$tmp/tiny.tar" "$tmp/out"
csv="$tmp/out/tree_modes.csv"
rows=$(tail -n +2 "$csv" | wc -l)
[ "$rows" = 3 ] || { echo "expected 3 rows, got $rows"; cat "$csv"; exit 1; }
for mode in client collective onehop; do
  entries=$(awk -F, -v m="$mode" '$1 == m { print $3 }' "$csv")
  [ "$entries" = 19 ] || { echo "$mode: $entries entries, expected 19"; cat "$csv"; exit 1; }
done
grep -q "collective vs client" "$tmp/out/tree_modes.txt"
echo "tree_modes smoke: ok"
