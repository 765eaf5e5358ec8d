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
echo "== go test -race"
go test -race -timeout 15m -p 2 "$@" ./...
