#!/usr/bin/env bash
# The main job: installs what is missing, builds the command line program and
# runs it on a shipped example.
#
# usage: scripts/demo.sh [example.json]   (default examples/matmul.json)
# environment: TT_BUILD_DIR (default build), TT_JOBS (default 2)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${TT_BUILD_DIR:-$root/build}
jobs=${TT_JOBS:-2}
example=${1:-$root/examples/matmul.json}

"$root/scripts/setup.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j "$jobs" --target tensortune-cli tensortune-worker
"$build/tensortune" workloads
"$build/tensortune" inspect "$example"
