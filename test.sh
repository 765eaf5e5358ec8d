#!/usr/bin/env bash
# Runs the whole test suite: go vet, a gofmt check, and every test under the
# race detector. Installs redis-server first when it is missing; the tests
# start their own servers on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")"
source scripts/ensure-redis.sh

echo "== go vet"
go vet ./...
(cd bench && go vet ./...)
echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
echo "== go test -race (packages)"
go test -race -timeout 15m -p 2 "$@" $(go list ./... | grep -v '/integration')
# The integration suites start many servers and processes and inject
# timed faults: they run on their own, one package at a time, so that the
# other packages' tests do not starve them of the machine's two cores.
echo "== go test -race (integration)"
go test -race -timeout 15m -p 1 "$@" ./integration/...
