#!/usr/bin/env bash
# Long differential runs (test/torture: clf_torture) on a fresh local
# cluster, against a tmpfs: the file sequences on one mount (mmap on), the
# same with a second mount reading (close-to-open), and the multi-user
# permission sequences. CI runs a fixed budget of each (mount suite,
# MountTortureTest); this is for long runs. As root, after a build.
#   scripts/torture.sh [FILE_OPS=1000000] [TWO_MOUNT_OPS=100000] [PERM_OPS=100000]
# Env: BUILD_DIR (default build), SERVERS (4), OPS_PER_SEED (5000), SEED (1).
# Prints each mode's summary; exits 1 if any seed failed (its shortest
# failing sequence is printed above the summary).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build}"
file_ops="${1:-1000000}"
two_ops="${2:-100000}"
perm_ops="${3:-100000}"
per_seed="${OPS_PER_SEED:-5000}"
seed="${SEED:-1}"
clf="$build/tools/clf"
torture="$build/test/torture/clf_torture"
[ -x "$torture" ] || { echo "build first: $torture is missing" >&2; exit 2; }

work=$(mktemp -d /tmp/clf-torture-XXXXXX)
chmod 755 "$work"
mkdir -p "$work/mnt" "$work/mnt-b" "$work/ref"
mounted_b=""
cleanup() {
  [ -n "$mounted_b" ] && { fusermount3 -u -q "$work/mnt-b" 2>/dev/null || umount -l "$work/mnt-b" 2>/dev/null || true; }
  "$clf" down --dir "$work/cluster" >/dev/null 2>&1 || true
  umount -l "$work/ref" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

mount -t tmpfs -o size=2g,mode=0755 tmpfs "$work/ref"
"$clf" up --servers "${SERVERS:-4}" --dir "$work/cluster" --mount "$work/mnt" --stripe-size 64K >/dev/null
chmod 755 "$work/mnt"
"$build/fuse/clfmount" "$work/cluster/cluster.toml" "$work/mnt-b" -o "log=$work/mnt-b.log"
mounted_b=1

rc=0
seeds() { echo $(( ($1 + per_seed - 1) / per_seed )); }
run() {  # mode a b seeds [extra...]
  local mode=$1 a=$2 b=$3 n=$4
  shift 4
  mkdir -p "$a" "$b"
  "$torture" "$mode" "$a" "$b" --seed "$seed" --seeds "$n" --ops "$per_seed" "$@" || rc=1
}
run file "$work/mnt/file" "$work/ref/file" "$(seeds "$file_ops")"
run file "$work/mnt/two" "$work/ref/two" "$(seeds "$two_ops")" --reader "$work/mnt-b/two"
run perm "$work/mnt/perm" "$work/ref/perm" "$(seeds "$perm_ops")"
exit "$rc"
