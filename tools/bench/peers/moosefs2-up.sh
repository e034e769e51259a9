#!/bin/bash
# MooseFS with goal 2 (two copies of every chunk on different chunkservers),
# the peer for Clusterfile's replicas = 2: the shared moosefs-up.sh, then
# goal 2 set recursively on the mount's root (new files inherit it).
# Usage: moosefs2-up.sh MOUNTPOINT [NCS=3]
here="$(cd "$(dirname "$0")" && pwd)"
"$here/moosefs-up.sh" "$@" || exit 1
# The master listens only inside the peer script's network namespace.
nsenter --net=/run/netns/benchmfs mfssetgoal -r 2 "$1" > /dev/null || { echo "moosefs2-up: mfssetgoal failed" >&2; exit 1; }
echo "moosefs2-up: goal 2 on $1"
