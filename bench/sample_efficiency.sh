#!/usr/bin/env bash
# Sample efficiency of the search on matmul 1024^3 (2 threads): the same
# number of trials with the XGBoost-guided evolutionary search, the same
# search with a random cost model, and uniformly random schedules, each in
# a fresh log; then bench/plot_sample_efficiency.py draws best GFLOP/s
# against trials and against seconds into DIR/sample_efficiency.svg and
# prints where each stood after 100, 200, 500 and 1000 trials. The JSON
# summaries (with the time split and trials per second) are in DIR too.
#
# usage: bench/sample_efficiency.sh [DIR] [TRIALS]   (defaults: build-release/efficiency, 1000)
# environment: TT_BUILD_DIR (default build-release)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${TT_BUILD_DIR:-$root/build-release}
dir=${1:-$build/efficiency}
trials=${2:-1000}
mkdir -p "$dir"

"$root/scripts/setup.sh"
# A build folder that exists is used as it is configured (TT_BUILD_DIR=build
# reuses the test build); a new one is a Release build without the tests.
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTT_BUILD_TESTS=OFF >/dev/null
fi
cmake --build "$build" -j 2 --target tensortune-cli tensortune-worker

run() {
  local name=$1
  shift
  rm -f "$dir/$name.log"
  echo "== $name: $trials trials" >&2
  "$build/tensortune" tune --workload matmul --args 1024,1024,1024 \
    --target "c -mcpu=native -num-cores=2" --trials "$trials" --batch-size 64 \
    --log "$dir/$name.log" --json "$@" > "$dir/$name.json"
  python3 - "$dir/$name.json" "$name" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = d["time"]
# Outside building and the kernels being timed: search, cost model, the
# run worker's own work (inputs, packing, IPC) and whatever else.
outside = d["elapsed_s"] - t["build_s"] - t["kernel_s"]
print(f"{sys.argv[2]}: {d['trials']} trials in {d['elapsed_s']:.0f} s = {d['trials'] / d['elapsed_s']:.2f} trials/s; "
      f"search {t['search_s']:.0f} s, model {t['training_s']:.0f} s, build {t['build_s']:.0f} s, run {t['run_s']:.0f} s "
      f"(kernels {t['kernel_s']:.0f} s), other {t['other_s']:.0f} s; "
      f"{100 * outside / d['elapsed_s']:.0f}% outside building and the kernels")
PY
}
run xgb
run random-model --cost-model random
run random-policy --policy random
python3 "$root/bench/plot_sample_efficiency.py" --flops 2147483648 -o "$dir/sample_efficiency.svg" \
  "xgb=$dir/xgb.log" "random model=$dir/random-model.log" "random policy=$dir/random-policy.log"
