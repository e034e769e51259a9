# Shared by the package tests: free ports, waits, and a cleanup stack that runs
# whatever happens (EXIT trap): unmounts, stops the clfd processes it started (by
# pid) and removes the scratch folder.
set -euo pipefail

CLEANUP=()
cleanup() {
  local i
  for ((i = ${#CLEANUP[@]} - 1; i >= 0; i--)); do eval "${CLEANUP[i]}" || true; done
}
trap cleanup EXIT
at_exit() { CLEANUP+=("$1"); }

fail() { echo "FAIL: $*" >&2; exit 1; }

# N free loopback TCP ports.
free_ports() {
  python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

# Runs "$@" every 0.2 s until it succeeds or SECONDS_MAX pass.
wait_for() {
  local max=$1; shift
  local deadline=$((SECONDS + max))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
}

# Stops pid with SIGTERM, SIGKILL after 10 s.
stop_pid() {
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || return 0
  for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
  kill -KILL "$pid" 2>/dev/null || true
}

unmount_if_mounted() {
  if mountpoint -q "$1"; then fusermount3 -u "$1" 2>/dev/null || umount -l "$1" 2>/dev/null || true; fi
}

# `clf status` of cluster file $1 reports HEALTH_OK.
health_ok() { "$CLF" status --cluster "$1" | grep -q '^health: HEALTH_OK'; }
