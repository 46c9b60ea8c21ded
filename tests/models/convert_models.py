#!/usr/bin/python3
"""The float16 variant of a generated float32 model, as ONNX converters write it.

    /usr/bin/python3 convert_models.py float16 IN.onnx OUT.onnx [--inputs IN.inputs]

Every float32 tensor becomes float16: weights, Constant nodes, Cast targets,
ConstantOfShape values, the graph's inputs and outputs. What has to stay
float32 stays: Resize's roi and scales, and the operators ONNX Runtime's CPU
build has no float16 kernel for (LSTM, GRU, RNN), which run between Casts
with their weights in float32, as onnxconverter-common's block list does.
With --inputs, the inputs it lists (NAME=FILE.npy) are written again as
float16 beside OUT (OUT's stem + .input_K.npy, and OUT's stem + .inputs).
With --wide, OUT's stem + _wide.onnx is the same float16 model computed in
float32 (every float16 value widened exactly): the reference against which
bench/fp16_ulps.sh counts half-precision ulps.

Uses only Debian's python3-onnx (1.12) and python3-numpy.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32, F16 = TensorProto.FLOAT, TensorProto.FLOAT16
BLOCKED = {"LSTM", "GRU", "RNN"}
# (op, input index) that ONNX requires in float32 whatever the data's type.
FLOAT32_INPUTS = {("Resize", 1), ("Resize", 2), ("Upsample", 1)}


def to_float16(model):
    g = model.graph
    keep = set()  # names that stay float32
    for n in g.node:
        for k, name in enumerate(n.input):
            if (n.op_type, k) in FLOAT32_INPUTS or n.op_type in BLOCKED:
                keep.add(name)
    nodes = []
    for n in g.node:
        if n.op_type in BLOCKED:
            # Its float16 data cast up, its outputs cast back down.
            inputs = list(n.input)
            if inputs[0] not in {i.name for i in g.initializer}:
                up = n.input[0] + ".f32"
                nodes.append(helper.make_node("Cast", [n.input[0]], [up], to=F32, name=n.name + ".up"))
                inputs[0] = up
            outputs = [o + ".f32" if o else "" for o in n.output]
            copy = helper.make_node(n.op_type, inputs, outputs, name=n.name)
            copy.attribute.extend(n.attribute)
            nodes.append(copy)
            for o, wide in zip(n.output, outputs):
                if o:
                    nodes.append(helper.make_node("Cast", [wide], [o], to=F16, name=n.name + ".down." + o))
            continue
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i == F32:
                a.i = F16
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == F32:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float16), a.t.name))
            if n.op_type == "Constant" and a.name == "value_float":
                raise SystemExit("Constant value_float is not converted")
        nodes.append(n)
    del g.node[:]
    g.node.extend(nodes)
    for i, t in enumerate(g.initializer):
        if t.data_type == F32 and t.name not in keep:
            g.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))
    for v in list(g.input) + list(g.output):
        if v.type.tensor_type.elem_type == F32:
            v.type.tensor_type.elem_type = F16
    del g.value_info[:]
    return model


def widened(model):
    """`model` (float16) computed in float32 with the same numbers: every
    float16 tensor, type and Cast target made float32, values exact. The
    reference a float16 result is read against, in half-precision ulps."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    for n in g.node:
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i == F16:
                a.i = F32
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == F16:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float32), a.t.name))
    for i, t in enumerate(g.initializer):
        if t.data_type == F16:
            g.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name))
    for v in list(g.input) + list(g.output):
        if v.type.tensor_type.elem_type == F16:
            v.type.tensor_type.elem_type = F32
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["float16"])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--inputs", help="the source model's NAME.inputs list, to convert its inputs too")
    ap.add_argument("--wide", action="store_true",
                    help="also write OUT's stem + _wide.onnx: the float16 model computed in float32")
    args = ap.parse_args()
    model = to_float16(onnx.load(args.src))
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, args.dst)
    if args.wide:
        wide = widened(model)
        onnx.checker.check_model(wide, full_check=True)
        onnx.save(wide, args.dst[:-len(".onnx")] + "_wide.onnx")
    if args.inputs:
        stem, src_dir = args.dst[:-len(".onnx")], os.path.dirname(args.inputs)
        listed = []
        with open(args.inputs) as f:
            for k, line in enumerate(l.strip() for l in f if l.strip()):
                name, file = line.split("=", 1)
                value = np.load(os.path.join(src_dir, file))
                if value.dtype == np.float32:
                    value = value.astype(np.float16)
                np.save(f"{stem}.input_{k}.npy", value)
                listed.append(f"{name}={os.path.basename(stem)}.input_{k}.npy")
        with open(stem + ".inputs", "w") as f:
            f.write("\n".join(listed) + "\n")


if __name__ == "__main__":
    main()
