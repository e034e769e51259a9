#!/usr/bin/env bash
# The dependency arrows point one way: each folder includes only the folders
# below it (docs/ARCHITECTURE.md, "Layout"). Fails with every include that
# points the wrong way. Usage: test/layers_test.sh [SOURCE_ROOT]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
# folder: the include prefixes it may use ("clf/v1/" is the generated protocol).
rules=(
  "common:common/ clf/v1/"
  "locking:locking/ common/"
  "scheduler:scheduler/ common/"
  "client:client/ clf/ common/ scheduler/"
  "server/store:server/store/ common/ clf/v1/"
  "server/data:server/data/ server/store/ common/ scheduler/ clf/v1/"
  "server/ops:server/ops/ server/data/ server/store/ common/ locking/ scheduler/ clf/v1/"
  "server/service:server/service/ server/ops/ server/data/ server/store/ common/ locking/ scheduler/ clf/v1/"
  "fuse:fuse/ client/include/ common/"
  "tools:tools/ clf/ common/ locking/ scheduler/"
)
bad=0
for rule in "${rules[@]}"; do
  dir=${rule%%:*}
  allowed=(${rule#*:})
  while IFS= read -r line; do
    inc=$(sed -E 's/^[^:]+:[0-9]+:#include "([^"]+)".*/\1/' <<<"$line")
    [[ "$inc" == */* ]] || continue  # a file beside it
    ok=0
    for a in "${allowed[@]}"; do
      [[ "$inc" == "$a"* ]] && { ok=1; break; }
    done
    if [ "$ok" = 0 ]; then
      echo "wrong-way include: $line" >&2
      bad=1
    fi
  done < <(grep -rnE '^#include "' "$dir" --include=*.h --include=*.cc || true)
done
[ "$bad" = 0 ] && echo "layers: every include points down"
exit "$bad"
