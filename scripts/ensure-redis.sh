#!/usr/bin/env bash
# Installs redis-server (and redis-cli) from the distribution's packages
# when they are missing. Sourced by test.sh and demo.sh.
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
  echo "relock: installing redis-server (apt-get)..." >&2
  SUDO=""
  if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >/dev/null
  $SUDO apt-get install -y -qq redis-server redis-tools >/dev/null
fi
command -v redis-server >/dev/null 2>&1 || { echo "relock: redis-server is still missing" >&2; exit 1; }
