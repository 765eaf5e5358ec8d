#!/usr/bin/env bash
# Flake hunt: runs tests many times under the race detector while
# stress-ng keeps one core busy, so that a test that depends on timing
# fails here rather than in CI. Installs stress-ng when it is missing (and
# runs without it if it cannot). Logs go to $OUT (default /tmp/relock-stress).
#
#   scripts/stress.sh                      # every package of the root module, 10 times
#   N=20 scripts/stress.sh ./rlock ./rwlock # some packages, 20 times
#   scripts/stress.sh -checker             # the randomized checker (every kind), 10 runs
#
# The package runs skip rlock's checker tests (TestRandomizedHolds, about
# 80s a run, and TestCheckerSpinLock, TestCheckerCountingSemaphore,
# TestCheckerRateLimiter, about 10s each); -checker runs them alone, one
# process per run, so that each run draws new seeds. Exit status 1 when any run failed.
set -uo pipefail
cd "$(dirname "$0")/.."
N=${N:-10}
OUT=${OUT:-/tmp/relock-stress}
mkdir -p "$OUT"
source scripts/ensure-redis.sh
if ! command -v stress-ng >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq stress-ng >/dev/null 2>&1 || true
fi
if command -v stress-ng >/dev/null 2>&1; then
  stress-ng --cpu 1 --timeout 7200s >/dev/null 2>&1 &
  hog=$!
  trap 'kill $hog 2>/dev/null' EXIT
else
  echo "stress: stress-ng is missing: running without a busy core" >&2
fi
failed=0
checker='^(TestRandomizedHolds|TestCheckerSpinLock|TestCheckerCountingSemaphore|TestCheckerRateLimiter)$'
if [ "${1:-}" = "-checker" ]; then
  for i in $(seq 1 "$N"); do
    log="$OUT/checker-$i.log"
    go test -race -count=1 -v -timeout 30m -run "$checker" ./rlock/ >"$log" 2>&1
    rc=$?
    echo "checker run $i: exit $rc, $(grep -c -- '--- FAIL' "$log") failing (sub)tests, log $log"
    [ $rc -eq 0 ] || failed=1
  done
  exit $failed
fi
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || mapfile -t pkgs < <(go list ./... | grep -v /examples/)
for pkg in "${pkgs[@]}"; do
  log="$OUT/$(echo "$pkg" | tr '/.' '__').log"
  start=$(date +%s)
  go test -race -count="$N" -timeout 60m -skip "$checker" "$pkg" >"$log" 2>&1
  rc=$?
  echo "$pkg: exit $rc, $(grep -c '^--- FAIL' "$log") failing tests in $N runs, $(( $(date +%s) - start ))s, log $log"
  [ $rc -eq 0 ] || failed=1
done
exit $failed
