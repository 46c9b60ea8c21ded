#!/usr/bin/env bash
# Whole models against ONNX Runtime, in one run on this machine: ResNet-18
# (batch 1, 224x224), the transformer encoder block (sequence 128, hidden
# 256) and a BERT-base-sized block (hidden 768), generated with random
# weights. Each model is tuned (the log in DIR resumes, so running again
# adds trials), compiled with its log and without one (default schedules),
# and run on 1 and 2 threads beside ONNX Runtime on the same input.
# Prints a table and writes DIR/results.json: median latencies over
# alternating rounds, the median of the rounds' ratios to ONNX Runtime
# (below 1: faster), the same with ONNX Runtime's floor in this harness
# taken off (bench/ort_floor_model.py), tuning and compile wall-clock
# times, and each build's speed as a share of the machine's multiply-add
# peak (bench/fma_peak,
# measured in the same run; the model's work counted as its operators'
# direct-method FLOPs), which says how far any build could still go.
#
# usage: bench/model_bench.sh [DIR] [TRIALS_RESNET] [TRIALS_TRANSFORMER]
#        (defaults: build/models, 1000, 400; the convolutional networks take
#        TRIALS_RESNET)
# environment: TT_BUILD_DIR (default build), TT_MODELS (any of
#   tests/models/make_models.py's: resnet18 transformer bert_base_block by
#   default; mobilenetv2 efficientnet_b0 unet crnn audio bert_mask yolo too;
#   NAME_float16, NAME_qdq, NAME_qoperator, NAME_dynamic: their float16 and
#   int8 variants (static QDQ, static QOperator, ONNX Runtime's
#   quantize_dynamic),
#   tests/models/convert_models.py's, each against ONNX Runtime running the
#   same variant), TT_REPEAT (timed runs per round,
#   default 30), TT_ROUNDS (alternating rounds of the three builds, default 5),
#   TT_TUNE_1CORE=1 (also tune each model for one core, in DIR/MODEL.1core.log
#   with the same trials, and time that build too in the 1-thread rounds:
#   the model a user who deploys on one thread would tune),
#   TT_IN_MODEL_CANDIDATES (compile --in-model-candidates of the tuned
#   build, default 4; 1 takes each task's best of the log untimed)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${TT_BUILD_DIR:-$root/build}
dir=${1:-$build/models}
trials_resnet=${2:-1000}
trials_transformer=${3:-400}
repeat=${TT_REPEAT:-30}
rounds=${TT_ROUNDS:-5}
models=${TT_MODELS:-"resnet18 transformer bert_base_block"}
tt="$build/tensortune"
ort="node $root/tools/ort/ort_run.js"
target="c -mcpu=native -num-cores=2"
target_1core="c -mcpu=native -num-cores=1"
tune_1core=${TT_TUNE_1CORE:-0}
in_model=${TT_IN_MODEL_CANDIDATES:-4}
mkdir -p "$dir"

"$root/scripts/setup.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j 2 --target tensortune-cli tensortune-worker fma_peak
# NAME_float16, NAME_qdq, NAME_qoperator and NAME_dynamic are NAME's variants, converted
# as tests/models/convert_models.py writes them.
base_of() {
  case $1 in
    *_float16) echo "${1%_float16}" ;;
    *_qdq) echo "${1%_qdq}" ;;
    *_qoperator) echo "${1%_qoperator}" ;;
    *_dynamic) echo "${1%_dynamic}" ;;
    *) echo "$1" ;;
  esac
}
bases=$(for m in $models; do base_of "$m"; done | sort -u | tr '\n' ',')
/usr/bin/python3 "$root/tests/models/make_models.py" --out "$dir" --only "${bases%,}" >&2
for m in $models; do
  b=$(base_of "$m")
  if [ "$m" != "$b" ]; then
    /usr/bin/python3 "$root/tests/models/convert_models.py" "${m#"${b}_"}" "$dir/$b.onnx" \
      "$dir/$m.onnx" --inputs "$dir/$b.inputs" >&2
  fi
done

now() { date +%s.%N; }
json_field() { /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores" >&2
peak=$("$build/bench/fma_peak" --target "$target" --threads 2 --json)
echo "multiply-add peak, GFLOP/s by threads: $(echo "$peak" | json_field "['gflops']")" >&2
results="[]"
for m in $models; do
  case $(base_of "$m") in
    resnet18 | mobilenetv2 | efficientnet_b0 | unet | yolo | crnn) trials=$trials_resnet ;;
    *) trials=$trials_transformer ;;
  esac
  model="$dir/$m.onnx" log="$dir/$m.log"
  # --input NAME=FILE for each of the model's inputs (make_models.py lists them).
  inputs=$(sed "s|=|=$dir/|; s|^|--input |" "$dir/$m.inputs" | tr '\n' ' ')
  echo "== $m: tuning $trials trials (log $log)" >&2
  t0=$(now)
  "$tt" tune "$model" --target "$target" --trials "$trials" --batch-size 32 --log "$log" \
    --json > "$dir/$m.tune.json"
  tune_s=$(/usr/bin/python3 -c "print($(now) - $t0)")
  # Compile time without the kernel cache (a fresh one), as a first compile.
  cache=$(mktemp -d)
  t0=$(now)
  XDG_CACHE_HOME=$cache "$tt" compile "$model" --target "$target" --log "$log" -o "$dir/$m.tt" \
    --in-model-candidates "$in_model" --json > "$dir/$m.compile.json"
  compile_s=$(/usr/bin/python3 -c "print($(now) - $t0)")
  rm -rf "$cache"
  tune_1core_s=0
  if [ "$tune_1core" = 1 ]; then
    echo "== $m: tuning $trials trials for one core (log $dir/$m.1core.log)" >&2
    t0=$(now)
    "$tt" tune "$model" --target "$target_1core" --trials "$trials" --batch-size 32 \
      --log "$dir/$m.1core.log" --json > "$dir/$m.1core.tune.json"
    tune_1core_s=$(/usr/bin/python3 -c "print($(now) - $t0)")
    "$tt" compile "$model" --target "$target_1core" --log "$dir/$m.1core.log" \
      -o "$dir/$m.1core.tt" --json > /dev/null
  fi
  "$tt" compile "$model" --target "$target" -o "$dir/$m.default.tt" --json > /dev/null
  # The work of one inference: the direct method's FLOPs (Winograd's
  # transformed products do fewer), the measure every runtime is read against.
  flops=$("$tt" tasks "$model" --target "$target" --disable-pass winograd_conv2d --json |
    /usr/bin/python3 -c "import json,sys; print(sum(t['flops'] * t['weight'] for t in json.load(sys.stdin)['tasks']))")
  # ONNX Runtime's floor here: its time on a model of the same shapes that
  # only moves data (the Node.js binding and session.run around any model).
  /usr/bin/python3 "$root/bench/ort_floor_model.py" "$model" "$dir/$m.floor.onnx"
  for threads in 1 2; do
    # A shared VM's speed drifts by tens of percent over minutes: the three
    # builds are timed in alternating rounds, and the ratio to ONNX Runtime
    # is the median of the rounds' ratios, so that no drift lands on one side.
    # Every build gets the same number of runs: fewer would let a slow first
    # few set a median.
    results=$(/usr/bin/python3 - "$results" "$m" "$threads" "$trials" "$tune_s" "$compile_s" \
      "$tune_1core_s" <<EOF
import json, statistics, subprocess, sys
results, m, threads, trials, tune_s, compile_s, tune_1core_s = sys.argv[1:]
def median_latency(cmd, repeat):
    out = subprocess.run(cmd + "$inputs".split() + ["--threads", threads, "--repeat", str(repeat),
                                "--json"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)["latency_s"]
runs = {"ours": ["$tt", "run", "$dir/$m.tt"], "untuned": ["$tt", "run", "$dir/$m.default.tt"],
        "peer": "$ort".split() + ["$model"], "floor": "$ort".split() + ["$dir/$m.floor.onnx"]}
if "$tune_1core" == "1" and threads == "1":
    runs["ours_1core"] = ["$tt", "run", "$dir/$m.1core.tt"]
rounds = {k: [] for k in runs}
for r in range($rounds):
    for k in (list(runs) if r % 2 == 0 else list(reversed(runs))):
        rounds[k].append(median_latency(runs[k], $repeat))
ratios = [o / p for o, p in zip(rounds["ours"], rounds["peer"])]
r = json.loads(results)
r.append({"model": m, "threads": int(threads), "trials": int(trials),
          "tensortune_s": statistics.median(rounds["ours"]),
          "untuned_s": statistics.median(rounds["untuned"]),
          "onnxruntime_s": statistics.median(rounds["peer"]), "ratio": statistics.median(ratios),
          "onnxruntime_floor_s": statistics.median(rounds["floor"]),
          "ratio_without_floor": statistics.median(
              [o / (p - f) for o, p, f in zip(rounds["ours"], rounds["peer"], rounds["floor"])]),
          "round_ratios": ratios, "tune_wall_s": float(tune_s), "compile_s": float(compile_s),
          "flops": $flops})
if "ours_1core" in rounds:
    r[-1].update({"tensortune_1core_s": statistics.median(rounds["ours_1core"]),
                  "ratio_1core": statistics.median(
                      [o / p for o, p in zip(rounds["ours_1core"], rounds["peer"])]),
                  "tune_1core_wall_s": float(tune_1core_s)})
print(json.dumps(r))
EOF
)
  done
done
# The peak again: a shared VM's vCPU gets more or less of its core over
# minutes, and the higher of the two measurements is the ceiling.
peak_end=$("$build/bench/fma_peak" --target "$target" --threads 2 --json)
echo "multiply-add peak at the end, GFLOP/s by threads: $(echo "$peak_end" | json_field "['gflops']")" >&2
results=$(/usr/bin/python3 - "$results" "$peak" "$peak_end" <<'EOF'
import json, sys
rows, a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
for r in rows:
    t = str(r["threads"])
    r["peak_gflops"] = max(a["gflops"][t], b["gflops"][t])
    for who in ("tensortune", "onnxruntime", "tensortune_1core"):
        if who + "_s" in r:
            r[who + "_peak_share"] = r["flops"] / r[who + "_s"] / (r["peak_gflops"] * 1e9)
print(json.dumps(rows))
EOF
)
echo "$results" > "$dir/results.json"
/usr/bin/python3 - "$dir/results.json" <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))
one_core = any("ratio_1core" in r for r in rows)
print("%-16s %3s %6s %9s %10s %8s %6s %9s %6s %7s %9s %7s %7s" % (
    "model", "thr", "trials", "tuned ms", "untuned ms", "ORT ms", "ratio", "floor ms", "ratio-",
    "tune s", "compile s", "tt%pk", "ORT%pk") + (" %8s %7s" % ("1core ms", "ratio1c") if one_core else ""))
for r in rows:
    print("%-16s %3d %6d %9.3f %10.3f %8.3f %6.2f %9.3f %6.2f %7.0f %9.1f %6.0f%% %6.0f%%" % (
        r["model"], r["threads"], r["trials"], r["tensortune_s"] * 1e3, r["untuned_s"] * 1e3,
        r["onnxruntime_s"] * 1e3, r["ratio"], r["onnxruntime_floor_s"] * 1e3,
        r["ratio_without_floor"], r["tune_wall_s"], r["compile_s"],
        100 * r["tensortune_peak_share"], 100 * r["onnxruntime_peak_share"]) +
        ((" %8.3f %7.2f" % (r["tensortune_1core_s"] * 1e3, r["ratio_1core"]) if "ratio_1core" in r
          else " %8s %7s" % ("-", "-")) if one_core else ""))
print("tt%pk, ORT%pk: the model's direct-method FLOPs per second as a share of the multiply-add peak on as")
print("many threads (the higher of its measurements at the start and the end); Winograd convolutions do")
print("fewer FLOPs than counted, so a model with them can exceed 100%")
if one_core:
    print("1core ms, ratio1c: the model tuned and compiled for one core (TT_TUNE_1CORE=1), on 1 thread")
print("floor: ONNX Runtime on a model of the same input and output shapes that only moves data, the")
print("cost of its Node.js binding and session.run around any model; ratio-: the ratio with that")
print("floor taken off ONNX Runtime's time (a bound: a C++ caller of ONNX Runtime pays part of it)")
EOF
echo "results in $dir/results.json (ratio: tensortune / ONNX Runtime latency, below 1 is faster)" >&2
