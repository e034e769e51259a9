#!/usr/bin/env bash
# Resync of a lost disk beside client I/O (docs/ARCHITECTURE.md "Replicated
# data", resync): a 4-server cluster with replicas = 2 on DIR holds a file of
# SIZE_MIB; server 3 is killed and its store removed (a lost disk), then
# started again. The client's write rate is measured alone first (CLIENT_MIB
# through the mount in 256 MiB dd writes, 1 MiB blocks, each with an fsync),
# then with the same writes repeated while any copy is stale. Printed beside
# them: the resync's bytes (every server's clf_resync_bytes_total) and rate
# (from its first byte to its last), and the disk's write rate
# (tools/bench/disk.sh's w1 row) as the yardstick. MB/s = 1e6 B/s.
# Usage: tools/bench/resync.sh [DIR=/var/tmp/clf-resync] [SIZE_MIB=4096] [CLIENT_MIB=1024]
# Needs a built tree (build/tools/clf), root, fio and jq. Loopback only.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
clf="$repo/build/tools/clf"
dir="${1:-/var/tmp/clf-resync}"
size_mib="${2:-4096}"
client_mib="${3:-1024}"
mnt="$dir/mnt"
[ -x "$clf" ] || { echo "resync.sh: build first" >&2; exit 1; }
command -v jq >/dev/null || { echo "resync.sh: needs jq" >&2; exit 1; }

cleanup() { "$clf" down --dir "$dir" >/dev/null 2>&1 || true; }
trap cleanup EXIT
cleanup
rm -rf "$dir"
mkdir -p "$dir"
now() { date +%s.%N; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
# Seconds for dd of $1 MiB to $2 with an fsync at the end.
dd_secs() {
  local t0 t1
  t0=$(now)
  dd if=/dev/zero of="$2" bs=1M count="$1" conv=fsync status=none
  t1=$(now)
  echo "$t1 - $t0" | bc -l
}
# Sum of a metric over every server.
metric_sum() {
  local sum=0 addr v
  for addr in $(sed -n "s/^metrics_address *= *[\"']\([^\"']*\)[\"'].*/\1/p" "$dir/cluster.toml"); do
    v=$(curl -s "http://$addr/metrics" | awk -v m="$1" '$1 == m {s += $2} END {print s + 0}')
    sum=$(echo "$sum + $v" | bc)
  done
  echo "$sum"
}
resync_bytes() { metric_sum clf_resync_bytes_total; }

disk=$(bash "$repo/tools/bench/disk.sh" "$(dirname "$dir")" | sed -n 's/^disk_w1_write=\([0-9]*\).*/\1/p')
"$clf" up --servers 4 --dir "$dir" --mount "$mnt" --set replicas=2 >/dev/null
dd if=/dev/urandom of="$mnt/big" bs=1M count="$size_mib" conv=fsync status=none
drop
# The client alone: CLIENT_MIB in new files of 256 MiB, each with its fsync.
chunk=256
alone_secs=0
for i in $(seq $((client_mib / chunk))); do
  alone_secs=$(echo "$alone_secs + $(dd_secs "$chunk" "$mnt/alone.$i")" | bc -l)
done
rm -f "$mnt"/alone.*
drop

# The lost disk: server 3 killed, its store gone, started again.
pid=$(cat "$dir/srv3/clfd.pid")
kill -9 "$pid"
while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
rm -rf "$dir/srv3/objects" "$dir/srv3/objects-r1" "$dir/srv3/objects-r2" "$dir/srv3/meta"
drop  # both phases start with the page cache empty
before=$(resync_bytes)
t_restart=$(now)
setsid "$repo/build/server/clfd" --cluster "$dir/cluster.toml" --id 3 --pid-file "$dir/srv3/clfd.pid" \
  --log-level info >> "$dir/srv3/clfd.log" 2>&1 < /dev/null &
# Until the resync has moved its first bytes (up to 60 s; the copies are
# recorded stale once the restarted server announced its new store).
for _ in $(seq 600); do
  [ "$(resync_bytes)" != "$before" ] && break
  sleep 0.1
done
t_first=$(now)
# The same client writes (CLIENT_MIB in new files) while the resync runs;
# then the resync is waited for until it copied what server 3 held: its own
# units and one neighbour's (2 x SIZE_MIB / 4).
want=$((size_mib / 2 * 1048576))
during_secs=0 resync_done_first=no
for i in $(seq $((client_mib / chunk))); do
  during_secs=$(echo "$during_secs + $(dd_secs "$chunk" "$mnt/during.$i")" | bc -l)
done
[ "$(echo "$(resync_bytes) - $before >= $want" | bc)" = 1 ] && resync_done_first=yes
until [ "$(echo "$(resync_bytes) - $before >= $want" | bc)" = 1 ]; do
  [ "$(echo "$(now) - $t_first > 600" | bc)" = 1 ] && { echo "resync.sh: not done in 600 s" >&2; exit 1; }
  sleep 0.05
done
t_done=$(now)
after=$(resync_bytes)
bytes=$(echo "$after - $before" | bc)
mbs() { echo "scale=1; $1 / $2 / 1000000" | bc -l; }
echo "disk_w1_write=$disk MB/s"
echo "client_write_alone=$(mbs $((client_mib * 1048576)) "$alone_secs") MB/s (${chunk} MiB writes, fsync each)"
echo "client_write_during_resync=$(mbs $((client_mib * 1048576)) "$during_secs") MB/s" \
     "(the resync ended before the client's writes: $resync_done_first)"
echo "resync_bytes=$bytes from_restart=$(printf '%.2f' "$(echo "$t_done - $t_restart" | bc -l)") s" \
     "resync_rate=$(mbs "$bytes" "$(echo "$t_done - $t_first" | bc -l)") MB/s (first byte to the last)"
