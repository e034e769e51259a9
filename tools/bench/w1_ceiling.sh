#!/usr/bin/env bash
# w1's write (fio, 1 GiB in 1 MiB psync writes, fsync at the end) on
# Clusterfile, on Clusterfile with direct writes (direct_write_kib = 256), on
# MooseFS, and straight on the disk the servers store on (DIR: one fio
# writer, and four writers of 256 MiB each, as four servers write it), in
# turn, after IDLE seconds of quiet before each write. The disk rows are
# what this machine's page cache and disk take for the same bytes with no
# file system above them: a file system writing through the page cache
# cannot beat them. Prints each write and the mean per target (MB/s,
# 1 MB = 1e6 B, summed over jobs / the longest job, as the workloads count).
# Usage: tools/bench/w1_ceiling.sh [ROUNDS=4] [IDLE=10] [DIR=/var/tmp]
# Needs a built tree and root; MooseFS through ../shared/bench/peers.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
rounds="${1:-4}"
idle="${2:-10}"
dir="${3:-/var/tmp}"
src="${BENCH_SRC:-$repo/../shared/bench}"
clf="$repo/build/tools/clf"
[ -x "$clf" ] || { echo "w1_ceiling: build first" >&2; exit 1; }
work="$(mktemp -d "$dir/clf-w1c-XXXXXX")"
mkdir -p "$work/disk" /mnt/clf-w1c-a /mnt/clf-w1c-b /mnt/clf-w1c-mfs
cleanup() {
  "$clf" down --dir "$work/a" >/dev/null 2>&1 || true
  "$clf" down --dir "$work/b" >/dev/null 2>&1 || true
  bash "$src/peers/moosefs-down.sh" /mnt/clf-w1c-mfs >/dev/null 2>&1 || true
  rm -rf "$work"
  rmdir /mnt/clf-w1c-a /mnt/clf-w1c-b /mnt/clf-w1c-mfs 2>/dev/null || true
}
trap cleanup EXIT
"$clf" up --servers 4 --dir "$work/a" --mount /mnt/clf-w1c-a >"$work/up-a.log" 2>&1
"$clf" up --servers 4 --dir "$work/b" --mount /mnt/clf-w1c-b --set direct_write_kib=256 >"$work/up-b.log" 2>&1
bash "$src/peers/moosefs-up.sh" /mnt/clf-w1c-mfs >"$work/up-mfs.log" 2>&1
targets=(clf:/mnt/clf-w1c-a clf-direct:/mnt/clf-w1c-b moosefs:/mnt/clf-w1c-mfs
         disk-1-writer:"$work/disk" disk-4-writers:"$work/disk")
for r in $(seq "$rounds"); do
  for t in "${targets[@]}"; do
    name="${t%%:*}"; d="${t#*:}/w1c"
    jobs=1; size=1024M
    [ "$name" = disk-4-writers ] && { jobs=4; size=256M; }
    rm -rf "$d"; mkdir -p "$d"; sync; sleep "$idle"
    mb=$(fio --name=w1 --directory="$d" --numjobs="$jobs" --size="$size" --bs=1M --ioengine=psync \
           --fallocate=none --rw=write --end_fsync=1 --output-format=json |
         jq '[.jobs[].write] as $j | ($j|map(.io_bytes)|add)/(($j|map(.runtime)|max)/1000)/1e6|floor')
    rm -rf "$d"
    echo "round $r $name $mb MB/s"
  done
done | tee "$work/rows"
awk '{s[$3]+=$4; n[$3]++} END {for (k in s) printf "%-15s mean %5.0f MB/s (%d writes)\n", k, s[k]/n[k], n[k]}' "$work/rows" | sort
