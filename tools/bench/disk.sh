#!/usr/bin/env bash
# The disk under the servers, measured with the same fio jobs as the shared
# w1_seq and w2_shared workloads' write and cold-read rows, on a plain file in
# DIR (default /var/tmp, where `clf up` and the bench peers keep their data).
# Run it just before and after tools/bench/compare.sh: this VM's disk swings
# by 2x within minutes, and a file system's write + fsync or cold read cannot
# beat the disk it stores on. Prints MB/s (1 MB = 1e6 B), one line per row.
# Usage: tools/bench/disk.sh [DIR]
set -euo pipefail
dir="${1:-/var/tmp}"
command -v fio >/dev/null || { echo "disk.sh: needs fio" >&2; exit 1; }
command -v jq >/dev/null || { echo "disk.sh: needs jq" >&2; exit 1; }
f="$(mktemp "$dir/clf-disk-XXXXXX")"
trap 'rm -f "$f"' EXIT
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
# MB/s of `dir` (read or write) summed over jobs / the longest job, as the workloads count.
agg() { jq -r --arg d "$1" '([.jobs[][$d].io_bytes] | add) / ([.jobs[].job_runtime] | max) / 1000 | floor'; }

out=$(fio --name=w1 --filename="$f" --bs=1M --size=1024M --ioengine=psync --fallocate=none \
  --rw=write --end_fsync=1 --output-format=json)
echo "disk_w1_write=$(echo "$out" | agg write) MB/s bs=1M size=1024MiB fsync=end"
drop
out=$(fio --name=w1 --filename="$f" --bs=1M --size=1024M --ioengine=psync --rw=read --output-format=json)
echo "disk_w1_read_cold=$(echo "$out" | agg read) MB/s mode=drop_caches+buffered"

rm -f "$f"
truncate -s 256M "$f"
w2=(--name=w2 --filename="$f" --numjobs=4 --size=64M --offset_increment=64M --bs=1m
    --ioengine=psync --fallocate=none)
out=$(fio "${w2[@]}" --rw=write --end_fsync=1 --output-format=json)
echo "disk_w2_write_bs1m=$(echo "$out" | agg write) MB/s nproc=4 region=64MiB fsync=end"
drop
out=$(fio "${w2[@]}" --rw=read --output-format=json)
echo "disk_w2_read_cold_bs1m=$(echo "$out" | agg read) MB/s mode=drop_caches+buffered"
