#!/usr/bin/env bash
# Checks what a user's module takes in when it uses relock. It makes a
# module outside the repository that imports rlock, fairlock, multilock and
# fence (with a replace to this checkout, or to the directory given as the
# first argument), runs go mod tidy, and fails unless `go list -m all` has
# at most $max modules and go.sum names no Docker, OpenTelemetry or
# fault-injection module: those belong to the integration and benchmark
# modules, never to the library's. It needs the Go module proxy.
set -euo pipefail
repo=$(cd "${1:-$(dirname "$0")/..}" && pwd)
max=15
heavy='testcontainers|docker|moby|containerd|opencontainers|opentelemetry|prometheus|toxiproxy|porcupine|zerolog|logrus|gopsutil|go-winio|go-ansiterm|redsync|go-redis|redislock'

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
go mod init example.com/relock-consumer >/dev/null 2>&1
go mod edit -go=1.25.0 -require=github.com/relock-go/relock@v0.0.0-00010101000000-000000000000 \
  -replace=github.com/relock-go/relock="$repo"
# Blank imports: the check is about the module graph, not the API.
cat >main.go <<'EOF'
package main

import (
	_ "github.com/relock-go/relock/fairlock"
	_ "github.com/relock-go/relock/fence"
	_ "github.com/relock-go/relock/multilock"
	_ "github.com/relock-go/relock/rlock"
)

func main() {}
EOF
go mod tidy
go build ./...

modules=$(go list -m all)
n=$(printf '%s\n' "$modules" | wc -l)
echo "consumer-check: a module importing rlock, fairlock, multilock and fence needs $n modules (at most $max):"
printf '  %s\n' $(printf '%s\n' "$modules" | awk '{print $1}')
status=0
if [ "$n" -gt "$max" ]; then
  echo "consumer-check: FAIL: $n modules, more than $max" >&2
  status=1
fi
if found=$(grep -Ei "$heavy" go.sum | awk '{print $1}' | sort -u) && [ -n "$found" ]; then
  echo "consumer-check: FAIL: go.sum names modules a library user must not need:" >&2
  printf '  %s\n' $found >&2
  status=1
fi
if [ "$status" = 0 ]; then echo "consumer-check: ok"; fi
exit "$status"
