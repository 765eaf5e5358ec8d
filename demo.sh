#!/usr/bin/env bash
# Runs the relock demo: worker processes contend for one distributed lock
# on Redis while a live view shows holders, waiters and hand-off latency.
# Installs redis-server first when it is missing; the demo uses the Redis
# at $RELOCK_REDIS (or 127.0.0.1:6379) if one answers, else starts its own.
# Arguments go to 'relock demo', e.g. ./demo.sh --workers 8 --duration 30s --fair
set -euo pipefail
cd "$(dirname "$0")"
source scripts/ensure-redis.sh
go run ./cmd/relock demo "$@"
