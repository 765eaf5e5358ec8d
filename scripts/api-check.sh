#!/usr/bin/env bash
# Compares the exported API of each published module (the library at the
# root, relockotel) with the checked-in listing under api/, so that a
# change to the API is always deliberate. With -update it rewrites the
# listings instead; then say in CHANGELOG.md what the change means for
# users. The listing is made by internal/apidump (source only, one
# declaration a line, sorted).
set -euo pipefail
cd "$(dirname "$0")/.."
update=${1:-}
status=0
for m in relock:. relockotel:relockotel; do
  name=${m%%:*} dir=${m#*:}
  want=api/$name.txt
  got=$(go run ./internal/apidump -dir "$dir")
  if [ "$update" = -update ]; then
    printf '%s\n' "$got" >"$want"
    echo "wrote $want"
    continue
  fi
  if ! diff -u "$want" <(printf '%s\n' "$got") >/tmp/api-check.$$ 2>&1; then
    echo "the exported API of module $name differs from $want:" >&2
    cat /tmp/api-check.$$ >&2
    echo "if the change is deliberate: scripts/api-check.sh -update, and a line in CHANGELOG.md" >&2
    status=1
  fi
  rm -f /tmp/api-check.$$
done
exit $status
