#!/usr/bin/env bash
# Runs the benchmark program (bench/, a module of its own): relock beside
# rueidislock, redsync and bsm/redislock, and beside the limit of a no-op
# script's round trips, against redis-server processes it starts itself.
# Installs redis-server first when it is missing. Flags go to the program:
#   ./bench.sh -quick                  # under a minute
#   ./bench.sh -scenarios contention -cpuprofile /tmp/cpu.out
#   ./bench.sh -h                      # every flag
set -euo pipefail
cd "$(dirname "$0")"
source scripts/ensure-redis.sh
cd bench
tags=()
# The RedLock scenario needs the multilock package; while that does not
# build (it is being written), the program is built without it and skips
# that scenario.
if ! go build -o /dev/null . 2>/dev/null; then
  if go build -tags nomultilock -o /dev/null . 2>/dev/null; then
    echo "bench: built without multilock (it does not build); the RedLock scenario will be skipped" >&2
    tags=(-tags nomultilock)
  fi
fi
exec go run "${tags[@]}" . "$@"
