#!/usr/bin/env bash
# The main job, a model end to end: installs what is missing, builds the
# command line program and its worker, generates a small ONNX model (a
# transformer encoder block: sequence 128, hidden 256, random weights),
# lists its tuning tasks, tunes them briefly (TT_DEMO_TRIALS measurements
# shared by the gradient task scheduler), compiles the model with the log
# and without it (default schedules), runs both on the same input and
# prints their latency beside ONNX Runtime's. Under a minute on 2 cores
# after the build.
# Every measurement goes to the log: running the demo again resumes from
# it and measures new schedules, so the tuned model gets faster.
#
# usage: scripts/demo.sh [extra tensortune tune options ...]
# environment: TT_BUILD_DIR (default build), TT_JOBS (default 2),
#   TT_DEMO_TRIALS (default 200), TT_DEMO_MODEL (default transformer; or
#   mlp, cnn, resnet18, transformer_ln_decomposed, bert_base_block)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${TT_BUILD_DIR:-$root/build}
jobs=${TT_JOBS:-2}
trials=${TT_DEMO_TRIALS:-200}
name=${TT_DEMO_MODEL:-transformer}
demo=$build/demo
tt=$build/tensortune

"$root/scripts/setup.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j "$jobs" --target tensortune-cli tensortune-worker
mkdir -p "$demo"
/usr/bin/python3 "$root/tests/models/make_models.py" --out "$demo" --only "$name"
model=$demo/$name.onnx
input=input=$demo/$name.input_0.npy

echo "== the tasks of $model" >&2
"$tt" tasks "$model"
echo "== tuning them: $trials trials, log $demo/$name.log" >&2
"$tt" tune "$model" --trials "$trials" --batch-size 16 --log "$demo/$name.log" "$@"
echo "== compiling with the log, and without it" >&2
"$tt" compile "$model" --log "$demo/$name.log" -o "$demo/$name.tt"
"$tt" compile "$model" -o "$demo/$name.untuned.tt" > /dev/null
tuned=$("$tt" run "$demo/$name.tt" --input "$input" --repeat 20 --json)
untuned=$("$tt" run "$demo/$name.untuned.tt" --input "$input" --repeat 20 --json)
ort=$(node "$root/tools/ort/ort_run.js" "$model" --input "$input" --repeat 20 --threads 2 --json)
/usr/bin/python3 - "$name" "$tuned" "$untuned" "$ort" <<'PY'
import json, sys
name, tuned, untuned, ort = sys.argv[1], *(json.loads(a)["latency_s"] * 1e3 for a in sys.argv[2:])
print(f"{name}: tuned {tuned:.3f} ms, untuned {untuned:.3f} ms ({untuned / tuned:.1f}x slower), "
      f"ONNX Runtime {ort:.3f} ms (tuned / ONNX Runtime = {tuned / ort:.2f})")
PY
