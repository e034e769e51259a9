#!/usr/bin/env bash
# One client to one server over loopback: a 1-server cluster per transport,
# mounted, dd of GiB-sized files in 1 MiB O_DIRECT requests (each request is
# one 1 MiB data request to the server), then iperf3 on loopback for scale.
# Usage: scripts/bench-transports.sh [MiB=1024] [transports="tcp rdma grpc"]   (as root)
# Numbers on a shared machine are noisy: run it more than once.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build}"
mib="${1:-1024}"
transports="${2:-tcp rdma grpc}"
base=$((40000 + RANDOM % 20000))

run_one() {
  local t="$1" dir mnt pid mpid port
  dir=$(mktemp -d /tmp/clf-bench.XXXXXX)
  mnt="$dir/mnt"
  mkdir -p "$mnt" "$dir/srv0"
  port=$base
  base=$((base + 10))
  head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$dir/secret"
  chmod 600 "$dir/secret"
  cat > "$dir/cluster.toml" <<TOML
[cluster]
name = "bench"
secret_file = "$dir/secret"
stripe_size = 1048576
stripe_count = 1
transport = "$( [ "$t" = grpc ] && echo auto || echo "$t" )"
rdma_provider = "tcp"
[[server]]
id = 0
address = "127.0.0.1:$port"
data_address = "127.0.0.1:$((port + 1))"
rdma_address = "127.0.0.1:$((port + 2))"
data_dir = "$dir/srv0"
TOML
  "$build/server/clfd" --cluster "$dir/cluster.toml" --id 0 --log-file "$dir/clfd.log" \
    --pid-file "$dir/clfd.pid" &
  pid=$!
  for _ in $(seq 200); do [ -f "$dir/clfd.pid" ] && break; sleep 0.05; done
  local opts=()
  [ "$t" = grpc ] && opts=(-o transport=grpc)
  local dev0
  dev0=$(stat -c %d "$mnt")
  "$build/fuse/clfmount" "$dir/cluster.toml" "$mnt" -f "${opts[@]}" > "$dir/clfmount.log" 2>&1 &
  mpid=$!
  for _ in $(seq 200); do [ "$(stat -c %d "$mnt")" != "$dev0" ] && break; sleep 0.05; done
  local w r
  w=$(dd if=/dev/zero of="$mnt/f" bs=1M count="$mib" oflag=direct 2>&1 | tail -1)
  r=$(dd if="$mnt/f" of=/dev/null bs=1M iflag=direct 2>&1 | tail -1)
  echo "$t write: ${w##*, }   read: ${r##*, }"
  "$build/tools/clf" status --cluster "$dir/cluster.toml" | tail -2 | sed 's/^/  /'
  grep -o 'data to server 0 ([^)]*): [a-z]*[^,]*' "$dir/clfmount.log" | head -1 | sed 's/^/  /'
  fusermount3 -u "$mnt" || umount -l "$mnt"
  wait "$mpid" || true
  grep -o 'registration cache.*' "$dir/clfmount.log" | sed 's/^/  /' || true
  kill "$pid"
  wait "$pid" || true
  rm -rf "$dir"
}

for t in $transports; do run_one "$t"; done
if command -v iperf3 >/dev/null; then
  iperf3 -s -1 -p $((base + 5)) >/dev/null 2>&1 &
  sleep 0.3
  iperf3 -c 127.0.0.1 -p $((base + 5)) -t 5 -f g | grep -E 'sender|receiver' | sed 's/^/iperf3 /'
  wait || true
fi
