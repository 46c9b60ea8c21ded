#!/usr/bin/env bash
# The search against random schedules: installs what is missing, builds the
# command line program and its worker, and tunes a 512x512x512 float32
# matmul twice with the same number of measurements, about a minute in all
# on 2 cores: once with the search (sketches, evolutionary search guided by
# the XGBoost cost model) and once with uniformly random schedules, each candidate built and timed
# in worker processes and checked against the reference evaluator. It ends
# with the best of each and their ratio. Every measurement goes to the logs;
# running the demo again resumes from them and measures new schedules.
#
# usage: scripts/demo_search.sh [extra tensortune tune options ...]
# environment: TT_BUILD_DIR (default build), TT_JOBS (default 2),
#   TT_DEMO_TRIALS (default 96)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${TT_BUILD_DIR:-$root/build}
jobs=${TT_JOBS:-2}
trials=${TT_DEMO_TRIALS:-96}

"$root/scripts/setup.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j "$jobs" --target tensortune-cli tensortune-worker
for policy in evolutionary random; do
  echo "== $policy search, $trials trials" >&2
  "$build/tensortune" tune --workload matmul --args 512,512,512 \
    --target "c -mcpu=native -num-cores=2" --policy "$policy" --trials "$trials" \
    --batch-size 16 --check --log "$build/demo-$policy.log" --json "$@" \
    > "$build/demo-$policy.json"
done
python3 - "$build/demo-evolutionary.json" "$build/demo-random.json" <<'PY'
import json, sys
best = [json.load(open(p))["tasks"][0]["best_gflops"] or 0 for p in sys.argv[1:]]
print(f"matmul 512^3, best over the run and its log: search {best[0]:.1f} GFLOP/s, "
      f"random schedules {best[1]:.1f} GFLOP/s ({best[0] / max(best[1], 1e-9):.1f}x)")
PY
