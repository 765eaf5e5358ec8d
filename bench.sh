#!/usr/bin/env bash
# Runs the benchmark program (bench/, a module of its own): relock beside
# rueidislock, redsync and bsm/redislock, beside "minimal" (Redisson's lock
# algorithm alone, written in bench/minimal.go) and beside the limit of a
# no-op script's round trips, against redis-server processes it starts
# itself. Every table gives the commands the clients sent, the calls the
# server ran (inside scripts too) and the server's CPU per operation.
# After a full run it writes bench/results/latest.json, draws the charts
# of those results into docs/bench/*.svg and writes docs/benchmarks.md; a
# partial run (-quick, some -scenarios or -peers) writes only
# bench/results/partial.json, unless -json, -charts or -docs say otherwise.
# Installs redis-server first when it is missing. Flags go to the program:
#   ./bench.sh -quick                  # under a minute
#   ./bench.sh -scenarios contention -cpuprofile /tmp/cpu.out
#   ./bench.sh -scenarios clients16,waiters100 -peers relock,minimal
#   ./bench.sh -redraw results/latest.json  # charts and page only, no run
#   ./bench.sh -before results/2026-11-26.json  # charts draw that run's relock rows beside
#   ./bench.sh -h                      # every flag
set -euo pipefail
cd "$(dirname "$0")"
case " $* " in
*" -redraw "* | *" -redraw="* | *" --redraw "* | *" --redraw="*) ;; # runs nothing
*) source scripts/ensure-redis.sh ;;
esac
cd bench
exec go run . "$@"
