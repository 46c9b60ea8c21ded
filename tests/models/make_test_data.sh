#!/usr/bin/env bash
# Makes the ONNX test data once for every test process of a run: the
# single-operator models and the whole models (tests/models/*.py, random
# weights, nothing downloaded), and ONNX Runtime's outputs for each.
#
# usage: tests/models/make_test_data.sh OUT
# OUT is replaced; OUT/ready is written last, so a reader that finds it
# finds everything.
set -euo pipefail
out=$1
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
rm -rf "$out"
mkdir -p "$out"
if [ ! -d "$src/tools/ort/node_modules/onnxruntime-node" ]; then
  echo "ONNX Runtime is not installed in tools/ort (scripts/setup.sh installs it)" >&2
  exit 1
fi
/usr/bin/python3 "$src/tests/models/make_op_models.py" --out "$out/ops" > /dev/null
/usr/bin/python3 "$src/tests/models/make_models.py" --out "$out/models" \
  --only mlp,cnn,resnet18,transformer,transformer_ln_decomposed,mobilenetv2,efficientnet_b0,unet,crnn,audio,bert_mask,yolo \
  > /dev/null
node "$src/tools/ort/ort_run.js" --manifest "$out/ops/manifest.json" --output-dir "$out/ops_ort" > /dev/null
# ONNX Runtime's outputs for model NAME in models/, on the inputs NAME.inputs lists.
ort_outputs() {
  local inputs=() line
  while IFS= read -r line; do inputs+=(--input "${line%%=*}=$out/models/${line#*=}"); done \
    < "$out/models/$1.inputs"
  node "$src/tools/ort/ort_run.js" "$out/models/$1.onnx" "${inputs[@]}" \
    --output-dir "$out/models_ort/$1" --threads 1 > /dev/null
}
for m in mlp cnn resnet18 transformer transformer_ln_decomposed mobilenetv2 efficientnet_b0 unet \
  crnn audio bert_mask yolo; do
  ort_outputs "$m"
done
# float16 variants, as converters write them; ONNX Runtime runs them in half.
for m in cnn unet crnn audio bert_mask yolo; do
  /usr/bin/python3 "$src/tests/models/convert_models.py" float16 "$out/models/$m.onnx" \
    "$out/models/${m}_fp16.onnx" --inputs "$out/models/$m.inputs"
  ort_outputs "${m}_fp16"
done
# bfloat16 variants of the models whose operators ONNX allows in bfloat16 at
# opset 21 (not Conv). ONNX Runtime's CPU build has no bfloat16 matmul: it
# runs the same numbers widened to float32 (--wide) as the reference.
for m in mlp transformer bert_mask; do
  /usr/bin/python3 "$src/tests/models/convert_models.py" bfloat16 "$out/models/$m.onnx" \
    "$out/models/${m}_bf16.onnx" --inputs "$out/models/$m.inputs" --wide
  cp "$out/models/${m}_bf16.inputs" "$out/models/${m}_bf16_wide.inputs"
  ort_outputs "${m}_bf16_wide"
done
# int8 variants in both of ONNX Runtime's static quantized forms, calibrated
# on the model's input, and as quantize_dynamic writes them; ONNX Runtime
# runs them with its integer kernels.
for m in cnn crnn bert_mask yolo transformer; do
  for form in qdq qoperator dynamic; do
    # quantize_dynamic's form of the detector head is only products of other
    # forms already tested: kept out for time.
    [ "$form" = dynamic ] && [ "$m" = yolo ] && continue
    /usr/bin/python3 "$src/tests/models/convert_models.py" "$form" "$out/models/$m.onnx" \
      "$out/models/${m}_$form.onnx" --inputs "$out/models/$m.inputs"
    ort_outputs "${m}_$form"
  done
done
touch "$out/ready"
