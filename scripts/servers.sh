#!/usr/bin/env bash
# Runs ./test.sh against other Redis-compatible servers than the installed
# redis-server: Redis 6.2.16, Redis 7.4.1 and Valkey 8.0.1, built from
# their source repositories (without TLS, so TestConnectTLS is skipped).
#
# Usage: scripts/servers.sh [-build-only] [SERVER...] [-- TEST.SH ARGS...]
#   SERVER is redis-6.2.16, redis-7.4.1 or valkey-8.0.1 (default: all
#   three, one after the other). Arguments after -- go to ./test.sh
#   (and so to go test): scripts/servers.sh valkey-8.0.1 -- -run TestWake
#
# Each server is $SRV_DIR/<server>/bin/redis-server (SRV_DIR defaults to
# $TMPDIR/srv, or /tmp/srv), the layout the project's build tool writes.
# A missing one is built: its sources come from a git directory of
# redis/redis (REDIS_GIT) or valkey-io/valkey (VALKEY_GIT) when given,
# else from a shallow clone of the tag on GitHub. A build takes a few
# minutes on two cores. The run stops at the first server whose suite
# fails, and says which.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
srv=${SRV_DIR:-${TMPDIR:-/tmp}/srv}

build_only=false
servers=()
while [ $# -gt 0 ]; do
  case $1 in
    -build-only) build_only=true ;;
    --) shift; break ;;
    redis-6.2.16 | redis-7.4.1 | valkey-8.0.1) servers+=("$1") ;;
    -h | -help | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "servers.sh: unknown server or flag $1 (see -h)" >&2; exit 64 ;;
  esac
  shift
done
[ ${#servers[@]} -gt 0 ] || servers=(redis-6.2.16 redis-7.4.1 valkey-8.0.1)

# build SERVER: makes $srv/SERVER/bin/{redis-server,redis-cli} unless there.
build() {
  local name=$1 out=$srv/$1/bin src=$srv/src-$1
  [ -x "$out/redis-server" ] && return 0
  local tag=${name#*-} repo git
  case $name in
    redis-*) repo=redis/redis git=${REDIS_GIT:-} ;;
    valkey-*) repo=valkey-io/valkey git=${VALKEY_GIT:-} ;;
  esac
  echo "== building $name (log: $srv/build-$name.log)"
  rm -rf "$src"
  mkdir -p "$src" "$out"
  if [ -n "$git" ]; then
    git -C "$git" archive "$tag" | tar -x -C "$src"
  else
    git clone -q --depth 1 --branch "$tag" "https://github.com/$repo.git" "$src"
  fi
  (cd "$src" && make -j"$(nproc)" BUILD_TLS=no MALLOC=libc >"$srv/build-$name.log" 2>&1) ||
    { echo "servers.sh: the build of $name failed: see $srv/build-$name.log" >&2; exit 1; }
  local bin=redis
  [ -x "$src/src/valkey-server" ] && bin=valkey
  ln -sf "$src/src/$bin-server" "$out/redis-server"
  ln -sf "$src/src/$bin-cli" "$out/redis-cli"
}

for s in "${servers[@]}"; do
  build "$s"
done
$build_only && exit 0

for s in "${servers[@]}"; do
  bin=$srv/$s/bin
  echo "== ./test.sh on $s ($("$bin/redis-server" --version | cut -d' ' -f1-3))"
  if ! PATH=$bin:$PATH "$root/test.sh" -skip 'TestConnectTLS' "$@"; then
    echo "servers.sh: the suite failed on $s" >&2
    exit 1
  fi
done
echo "== the suite passed on: ${servers[*]}"
