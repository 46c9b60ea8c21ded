#!/usr/bin/env bash
# Installs what is missing, builds everything (tests, benchmarks, programs)
# and runs every test. Two jobs by default: CI machines have two cores.
#
# usage: scripts/test.sh [ctest arguments, e.g. -L process or -R Subprocess]
# environment: TT_BUILD_DIR (default build), TT_JOBS (default 2)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${TT_BUILD_DIR:-$root/build}
jobs=${TT_JOBS:-2}

"$root/scripts/setup.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j "$jobs"
cd "$build"
# --timeout: a hung test fails on its own instead of stalling the whole run.
ctest --output-on-failure -j "$jobs" --timeout 600 "$@"
