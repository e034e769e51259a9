#!/bin/bash
# Stops what clf-bench-up.sh started: unmounts MOUNTPOINT and every mount of the
# cluster, stops the servers by PID. Harmless if nothing is running.
# Usage: clf-bench-down.sh MOUNTPOINT
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mnt="${1:?usage: $0 MOUNTPOINT}"
st="${CLF_BENCH_DIR:-/var/tmp/bench-clf}"
clf="${CLF:-$here/../build/tools/clf}"
rc=0
if [ -d "$st" ]; then
  "$clf" down --dir "$st" || rc=$?
fi
if findmnt -rn -o TARGET | grep -qxF "$(realpath -m "$mnt")"; then
  fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt" || rc=1
fi
[ $rc -eq 0 ] && echo "clf-bench-down: unmounted $mnt, servers stopped"
exit $rc
