#!/usr/bin/python3
"""Writes the floor model of an ONNX model for bench/model_bench.sh.

    /usr/bin/python3 bench/ort_floor_model.py MODEL.onnx FLOOR.onnx

The floor model has the model's inputs and outputs and only moves data: the
first input flattened, tiled when an output is larger, cut to each output's
size, reshaped and cast to its type (other inputs are passed and unread). ONNX Runtime's time on it is what its Node.js binding and
session.run cost around any model with those shapes (the binding's handling
of outputs grows with their size); `tensortune run` has no such part.
"""
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference


def dims(value):
    return [d.dim_value for d in value.type.tensor_type.shape.dim]


def main(src, dst):
    graph = shape_inference.infer_shapes(onnx.load(src)).graph
    weights = {t.name for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in weights]
    if not inputs:
        sys.exit(f"{src}: the model has no inputs")
    inp = inputs[0]
    n_in = int(np.prod(dims(inp)))
    consts = {"flat_shape": [-1]}
    nodes = [helper.make_node("Reshape", [inp.name, "flat_shape"], ["flat"])]
    for k, out in enumerate(graph.output):
        shape = dims(out)
        n = int(np.prod(shape))
        src_name = "flat"
        if n > n_in:
            consts[f"reps{k}"] = [-(-n // n_in)]
            nodes.append(helper.make_node("Tile", ["flat", f"reps{k}"], [f"tiled{k}"]))
            src_name = f"tiled{k}"
        consts.update({f"starts{k}": [0], f"ends{k}": [n], f"shape{k}": shape})
        nodes.append(helper.make_node("Slice", [src_name, f"starts{k}", f"ends{k}"], [f"cut{k}"]))
        elem = out.type.tensor_type.elem_type
        if elem == inp.type.tensor_type.elem_type:
            nodes.append(helper.make_node("Reshape", [f"cut{k}", f"shape{k}"], [out.name]))
        else:
            nodes.append(helper.make_node("Reshape", [f"cut{k}", f"shape{k}"], [f"shaped{k}"]))
            nodes.append(helper.make_node("Cast", [f"shaped{k}"], [out.name], to=elem))
    inits = [numpy_helper.from_array(np.array(v, np.int64), name) for name, v in consts.items()]
    model = helper.make_model(helper.make_graph(nodes, "floor", inputs, list(graph.output), inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, dst)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
