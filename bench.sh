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
exec go run . "$@"
