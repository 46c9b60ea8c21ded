#!/usr/bin/env bash
# float16 accuracy of whole models: each generated model converted to
# float16 (tests/models/convert_models.py), run by tensortune and by ONNX
# Runtime on the same float16 input, and both read against the same model
# computed in float32 (every float16 weight widened exactly), in
# half-precision ulps at the reference's value. Prints, per model, the
# largest error in ulps and the share of outputs more than one ulp off,
# for each runtime.
#
# usage: bench/fp16_ulps.sh [DIR] (default build/fp16)
# environment: TT_BUILD_DIR (default build), TT_MODELS (default: cnn
#   mobilenetv2 efficientnet_b0 unet crnn audio bert_mask yolo transformer)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${TT_BUILD_DIR:-$root/build}
dir=${1:-$build/fp16}
models=${TT_MODELS:-"cnn mobilenetv2 efficientnet_b0 unet crnn audio bert_mask yolo transformer"}
tt="$build/tensortune"
ort="node $root/tools/ort/ort_run.js"
mkdir -p "$dir"
/usr/bin/python3 "$root/tests/models/make_models.py" --out "$dir" --only "${models// /,}" > /dev/null
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')" >&2
printf "%-18s %14s %14s %14s %14s\n" model "tt max ulps" "tt > 1 ulp" "ort max ulps" "ort > 1 ulp"
for m in $models; do
  h="$dir/${m}_fp16"
  /usr/bin/python3 "$root/tests/models/convert_models.py" float16 "$dir/$m.onnx" "$h.onnx" \
    --inputs "$dir/$m.inputs" --wide
  half=() wide=()
  k=0
  while IFS= read -r line; do
    name=${line%%=*}
    half+=(--input "$name=$dir/${line#*=}")
    # The wide model takes the same values in float32.
    /usr/bin/python3 -c "import numpy as np,sys; a=np.load(sys.argv[1]); np.save(sys.argv[2], a.astype(np.float32) if a.dtype==np.float16 else a)" \
      "$dir/${line#*=}" "${h}_wide.input_$k.npy"
    wide+=(--input "$name=${h}_wide.input_$k.npy")
    k=$((k + 1))
  done < "$h.inputs"
  "$tt" compile "$h.onnx" -o "$h.tt" > /dev/null
  rm -rf "$h.out_tt" "$h.out_ort" "$h.out_ref"
  "$tt" run "$h.tt" "${half[@]}" --output-dir "$h.out_tt" > /dev/null
  $ort "$h.onnx" "${half[@]}" --output-dir "$h.out_ort" > /dev/null 2>&1
  $ort "${h}_wide.onnx" "${wide[@]}" --output-dir "$h.out_ref" > /dev/null 2>&1
  /usr/bin/python3 - "$m" "$h" <<'PY'
import glob, os, sys
import numpy as np
m, h = sys.argv[1:]
def ulps(got, ref):
    ref16 = ref.astype(np.float16).astype(np.float64)
    # One half-precision ulp at the reference's value (subnormals: 2^-24).
    exp = np.floor(np.log2(np.maximum(np.abs(ref16), 2.0 ** -14)))
    ulp = 2.0 ** (exp - 10)
    return np.abs(got.astype(np.float64) - ref.astype(np.float64)) / ulp
cols = []
for side in ("tt", "ort"):
    worst, over, count = 0.0, 0, 0
    for f in sorted(glob.glob(f"{h}.out_ref/*.npy")):
        ref = np.load(f)
        got = np.load(os.path.join(f"{h}.out_{side}", os.path.basename(f)))
        u = ulps(got, ref)
        worst, over, count = max(worst, float(u.max())), over + int((u > 1).sum()), count + u.size
    cols += [f"{worst:.1f}", f"{100.0 * over / count:.2f}%"]
print(f"{m:<18} {cols[0]:>14} {cols[1]:>14} {cols[2]:>14} {cols[3]:>14}")
PY
done
