#!/usr/bin/env bash
# Runs the mutant suite (scripts/mutants/mutants.txt) from any directory of
# the checkout: each mutant is applied to a fresh copy of the tree and its
# tests must fail. Flags go to the runner: -run M5 (one mutant), -every
# (every test command of each mutant), -check (only check that the list
# applies), -gremlins ./watchdog,... (also run gremlins), -h (all flags).
set -euo pipefail
cd "$(dirname "$0")"
exec go run . "$@"
