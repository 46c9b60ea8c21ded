#!/usr/bin/env bash
# The main job: installs what is missing, builds the command line program and
# its worker, and tunes a small workload for under a minute on 2 cores: 256
# random schedules of a 256x256x256 float32 matmul, each built and timed in
# worker processes and checked against the reference evaluator. Every
# measurement goes to the log; running the demo again resumes from it and
# measures 256 new schedules.
#
# usage: scripts/demo.sh [extra tensortune tune options ...]
# environment: TT_BUILD_DIR (default build), TT_JOBS (default 2),
#   TT_DEMO_LOG (default $TT_BUILD_DIR/demo.log)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${TT_BUILD_DIR:-$root/build}
jobs=${TT_JOBS:-2}
log=${TT_DEMO_LOG:-$build/demo.log}

"$root/scripts/setup.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j "$jobs" --target tensortune-cli tensortune-worker
"$build/tensortune" tune --workload matmul --args 256,256,256 \
  --target "c -mcpu=native -num-cores=2" --trials 256 --batch-size 32 --check --log "$log" "$@"
"$build/tensortune" records best "$log"
