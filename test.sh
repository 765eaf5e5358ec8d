#!/usr/bin/env bash
# Runs the whole test suite: go vet, a gofmt check, and every test under the
# race detector, in the root module and then in the integration, relockotel
# and bench modules (modules of their own).
# Installs redis-server first when it is missing; the tests start their
# own servers on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")"
source scripts/ensure-redis.sh

echo "== go vet"
go vet ./...
(cd integration && go vet ./...)
(cd bench && go vet ./...)
(cd relockotel && go vet ./...)
echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
echo "== go test -race (packages)"
go test -race -timeout 15m -p 2 "$@" ./...
# The integration suites start many servers and processes and inject
# timed faults: they run on their own, one package at a time, so that the
# other packages' tests do not starve them of the machine's two cores.
echo "== go test -race (integration)"
# A passing package's skips show only with -v: the integration tests write
# what they skipped, and why, to a report printed after them.
skips=$(mktemp)
trap 'rm -f "$skips"' EXIT
(cd integration && RELOCK_SKIP_REPORT="$skips" go test -race -timeout 15m -p 1 "$@" ./...)
if [ -s "$skips" ]; then
  echo "== not covered by this run"
  cat "$skips"
fi
echo "== go test -race (relockotel)"
(cd relockotel && go test -race -timeout 15m -p 1 "$@" ./...)
# The benchmark program's own tests (its charts, its wire counting) need no
# server; its benchmarks run with ./bench.sh.
echo "== go test -race (bench)"
(cd bench && go test -race -timeout 5m -p 1 "$@" ./...)
