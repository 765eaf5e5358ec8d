#!/usr/bin/env bash
# Checks what a user's module takes in when it uses relock. It makes a
# module outside the repository that imports rlock, fairlock, multilock and
# fence (with a replace to this checkout, or to the directory given as the
# first argument), runs go mod tidy, and fails unless the binary links at
# most $max modules (the library's test-only requirements, testify among
# them, are in the module graph but never linked) and go.sum names no
# Docker, OpenTelemetry or fault-injection module: those belong to the
# integration and benchmark modules, never to the library's. It needs the
# Go module proxy.
set -euo pipefail
repo=$(cd "${1:-$(dirname "$0")/..}" && pwd)
max=6
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

modules=$(go list -deps -f '{{with .Module}}{{.Path}}{{end}}' . | sort -u)
n=$(printf '%s\n' "$modules" | wc -l)
echo "consumer-check: a binary importing rlock, fairlock, multilock and fence links $n modules (at most $max):"
printf '  %s\n' $modules
echo "consumer-check: its module graph (go list -m all) has $(go list -m all | wc -l) modules"
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
