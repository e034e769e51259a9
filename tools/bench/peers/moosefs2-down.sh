#!/bin/bash
# Stops what moosefs2-up.sh started (the shared moosefs-down.sh).
exec "$(dirname "$0")/moosefs-down.sh" "$@"
