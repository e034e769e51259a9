#!/usr/bin/env bash
# CPU per operation: the CPU time (user + system, from /proc/PID/stat) that a
# file system's own processes spend per create, stat, unlink and small-file
# read, and per MiB written and read, measured around one single-process
# workload (python3) on its mount. The workload's own CPU (and the kernel's
# FUSE work done in its context) is not counted: only the daemons'.
#   clf          4 clfd + clfmount (packaging/clf-bench-up.sh)
#   fuseceiling  passthrough_hp over tmpfs (../shared/bench/peers, the FUSE ceiling)
#   moosefs      mfsmaster + chunkservers + mfsmount (../shared/bench/peers)
# Usage: tools/bench/cpu.sh [SYSTEMS="clf fuseceiling moosefs"] [FILES=5000]
# Prints one line per system and row: microseconds of CPU per operation (per
# MiB for the data rows), and the wall time of the phase. Run as root on an
# otherwise idle machine; loopback only.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
systems="${1:-clf fuseceiling moosefs}"
files="${2:-5000}"
peers="${BENCH_SRC:-$repo/../shared/bench}/peers"
mnt=/mnt/clf-cpu
tck=$(getconf CLK_TCK)
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }

# The daemons' pids of each system (after it is up).
pids_of() {
  case "$1" in
    clf)
      cat /var/tmp/bench-clf/srv*/clfd.pid
      pgrep -f "clfmount [^ ]+ $mnt( |\$)"
      ;;
    fuseceiling) cat "$mnt.src.pid" ;;
    moosefs) awk '{print $2}' /var/tmp/bench-mfs/pids ;;
  esac
}
# Clock ticks (user + system) of the pids, summed (threads included).
ticks() {
  local sum=0 p
  for p in "$@"; do
    [ -r "/proc/$p/stat" ] || continue
    sum=$((sum + $(awk '{print $14 + $15}' "/proc/$p/stat")))
  done
  echo "$sum"
}
up() {
  case "$1" in
    clf) CLF="$repo/build/tools/clf" bash "$repo/packaging/clf-bench-up.sh" "$mnt" >/dev/null ;;
    fuseceiling) bash "$peers/fuseceiling-up.sh" "$mnt" 8g >/dev/null ;;
    moosefs) bash "$peers/moosefs-up.sh" "$mnt" >/dev/null ;;
  esac
}
down() {
  case "$1" in
    clf) CLF="$repo/build/tools/clf" bash "$repo/packaging/clf-bench-down.sh" "$mnt" >/dev/null 2>&1 || true ;;
    *) bash "$peers/$1-down.sh" "$mnt" >/dev/null 2>&1 || true ;;
  esac
}

# One phase of the workload: python3 with the phase's name; prints its wall seconds.
phase() {
  python3 - "$mnt/cpu" "$files" "$1" <<'EOF'
import os, sys, time
d, n, what = sys.argv[1], int(sys.argv[2]), sys.argv[3]
t0 = time.time()
if what == "create":
    os.makedirs(d, exist_ok=True)
    for i in range(n):
        os.close(os.open(f"{d}/f{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
elif what == "write_small":  # 4 KiB into each (the small files the reads read)
    buf = b"x" * 4096
    for i in range(n):
        fd = os.open(f"{d}/f{i}", os.O_WRONLY)
        os.write(fd, buf)
        os.close(fd)
elif what == "stat":
    for i in range(n):
        os.stat(f"{d}/f{i}")
elif what == "read_small":
    for i in range(n):
        fd = os.open(f"{d}/f{i}", os.O_RDONLY)
        os.read(fd, 65536)
        os.close(fd)
elif what == "unlink":
    for i in range(n):
        os.unlink(f"{d}/f{i}")
elif what == "write_mib":  # 256 MiB, fsync at the end
    buf = b"\0" * (1 << 20)
    fd = os.open(f"{d}.big", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for _ in range(256):
        os.write(fd, buf)
    os.fsync(fd)
    os.close(fd)
elif what == "read_mib":
    fd = os.open(f"{d}.big", os.O_RDONLY)
    while os.read(fd, 1 << 20):
        pass
    os.close(fd)
print(f"{time.time() - t0:.3f}")
EOF
}

for sys in $systems; do
  down "$sys"
  up "$sys"
  mapfile -t pids < <(pids_of "$sys")
  # phase, operations in it, cache drop before it
  for spec in "create $files no" "write_small $files no" "stat $files yes" "read_small $files yes" \
              "unlink $files yes" "write_mib 256 no" "read_mib 256 yes"; do
    read -r name ops cold <<< "$spec"
    [ "$cold" = yes ] && drop
    t0=$(ticks "${pids[@]}")
    secs=$(phase "$name")
    t1=$(ticks "${pids[@]}")
    us=$(echo "scale=1; ($t1 - $t0) * 1000000 / $tck / $ops" | bc -l)
    unit=op; [ "$ops" = 256 ] && unit=MiB
    echo "cpu_${name}=$us us/$unit wall=${secs}s cold=$cold system=$sys processes=${#pids[@]}"
  done
  rm -f "$mnt/cpu.big"
  down "$sys"
done
