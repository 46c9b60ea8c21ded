#!/usr/bin/python3
"""The float16 and int8 variants of a generated float32 model, as ONNX
converters and ONNX Runtime's quantizer write them.

    /usr/bin/python3 convert_models.py float16|bfloat16 IN.onnx OUT.onnx [--inputs IN.inputs] [--wide]
    /usr/bin/python3 convert_models.py qdq|qoperator IN.onnx OUT.onnx --inputs IN.inputs
    /usr/bin/python3 convert_models.py dynamic IN.onnx OUT.onnx [--inputs IN.inputs]

float16:
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

bfloat16: the same with bfloat16 (rounded to nearest even). NumPy has no
bfloat16, so the inputs are written as float32 values that bfloat16 holds
exactly; ONNX Runtime's CPU build has no bfloat16 convolution or matmul,
so --wide gives the reference.

qdq and qoperator: static quantization as ONNX Runtime's quantizer does it
(see quantize_qdq() and quantize_qoperator()), calibrated on the inputs --inputs lists, by running the
float32 model in ONNX Runtime (tools/ort, Node.js) with every tensor that
needs a range as an output. The inputs are written again beside OUT.

dynamic: as ONNX Runtime's quantize_dynamic writes it (see
quantize_dynamic()): no calibration, the activations' ranges taken at run
time by DynamicQuantizeLinear.

Uses only Debian's python3-onnx (1.12) and python3-numpy.
"""
import argparse
import os
import subprocess
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32, F16, BF16 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16


def bf16_bits(values):
    """float32 values as bfloat16 bits, rounded to nearest even."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bf16_round(values):
    """float32 values rounded to the nearest bfloat16, as float32."""
    return (bf16_bits(values).astype(np.uint32) << 16).view(np.float32)


def narrow(t, to):
    """Tensor `t` (float32) as `to` (FLOAT16 or BFLOAT16), keeping its name."""
    values = numpy_helper.to_array(t)
    if to == F16:
        return numpy_helper.from_array(values.astype(np.float16), t.name)
    return helper.make_tensor(t.name, BF16, values.shape, bf16_bits(values).tobytes(), raw=True)


def widen(t):
    """Tensor `t` (FLOAT16 or BFLOAT16) as float32, exactly."""
    if t.data_type == F16:
        return numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name)
    bits = np.frombuffer(t.raw_data, dtype=np.uint16).astype(np.uint32) << 16
    return numpy_helper.from_array(bits.view(np.float32).reshape(tuple(t.dims)), t.name)
BLOCKED = {"LSTM", "GRU", "RNN"}
# (op, input index) that ONNX requires in float32 whatever the data's type.
FLOAT32_INPUTS = {("Resize", 1), ("Resize", 2), ("Upsample", 1)}


def to_float16(model, to=F16):
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
                    nodes.append(helper.make_node("Cast", [wide], [o], to=to, name=n.name + ".down." + o))
            continue
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i == F32:
                a.i = to
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == F32:
                a.t.CopyFrom(narrow(a.t, to))
            if n.op_type == "Constant" and a.name == "value_float":
                raise SystemExit("Constant value_float is not converted")
        nodes.append(n)
    del g.node[:]
    g.node.extend(nodes)
    for i, t in enumerate(g.initializer):
        if t.data_type == F32 and t.name not in keep:
            g.initializer[i].CopyFrom(narrow(t, to))
    for v in list(g.input) + list(g.output):
        if v.type.tensor_type.elem_type == F32:
            v.type.tensor_type.elem_type = to
    del g.value_info[:]
    return model


def widened(model):
    """`model` (float16 or bfloat16) computed in float32 with the same
    numbers: every such tensor, type and Cast target made float32, values
    exact. The reference a half result is read against."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    for n in g.node:
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i in (F16, BF16):
                a.i = F32
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type in (F16, BF16):
                a.t.CopyFrom(widen(a.t))
    for i, t in enumerate(g.initializer):
        if t.data_type in (F16, BF16):
            g.initializer[i].CopyFrom(widen(t))
    for v in list(g.input) + list(g.output):
        if v.type.tensor_type.elem_type in (F16, BF16):
            v.type.tensor_type.elem_type = F32
    return m


QUANTIZED = {"Conv", "MatMul", "Gemm"}


def calibrate(model, inputs, names, near):
    """The smallest and largest value of each of `names` when ONNX Runtime
    runs `model` (float32) on `inputs` ({name: file}): the ranges the
    quantization parameters come from, as ONNX Runtime's MinMax calibrator
    takes them."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    inferred = onnx.shape_inference.infer_shapes(m)
    types = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.input)
             + list(inferred.graph.output)}
    present = {o.name for o in m.graph.output}
    for n in names:
        if n not in present:
            m.graph.output.append(types[n])
    ort = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "ort", "ort_run.js")
    # A folder of its own beside the output, not in a shared temporary one.
    with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(near)), prefix=".calibration_") as work:
        path = os.path.join(work, "calibration.onnx")
        onnx.save(m, path)
        cmd = ["node", ort, path, "--output-dir", os.path.join(work, "out")]
        for name, file in inputs.items():
            cmd += ["--input", f"{name}={file}"]
        subprocess.run(cmd, check=True, capture_output=True)
        ranges = {}
        for n in names:
            file = "".join(c if c.isalnum() or c in "._-" else "_" for c in n) + ".npy"
            a = np.load(os.path.join(work, "out", file))
            ranges[n] = (min(float(a.min()), 0.0), max(float(a.max()), 0.0))
    return ranges


def uint8_params(low, high):
    """Asymmetric uint8 scale and zero point of [low, high] (which holds 0)."""
    scale = (high - low) / 255.0 or 1.0
    zero_point = int(np.clip(round(-low / scale), 0, 255))
    return np.float32(scale), np.uint8(zero_point)


def int8_per_channel(w, axis):
    """Symmetric int8 of `w` with one scale per slice along `axis`."""
    moved = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
    scale = np.maximum(np.abs(moved).max(axis=1), 1e-8) / 127.0
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.round(w / scale.reshape(shape)), -127, 127).astype(np.int8)
    return q, scale.astype(np.float32)


def symmetric_int8(w, axes=None):
    """w as int8 about 0, one scale (max |w| / 127) over `axes` (None: all
    of w): the int8 values and the scales, with w's rank."""
    scale = np.maximum(np.abs(w).max(axis=axes, keepdims=True), 1e-8)
    scale = (scale.astype(np.float64) / 127).astype(np.float32)
    return np.clip(np.round(w / scale), -127, 127).astype(np.int8), scale


def fold_batch_norms(model):
    """Each BatchNormalization right after a Conv with a constant weight
    folded into it, as ONNX Runtime's quantization pre-processing does
    before a model is quantized."""
    g = model.graph
    weights = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    readers = {}
    for n in g.node:
        for i in n.input:
            readers[i] = readers.get(i, 0) + 1
    producer = {o: n for n in g.node for o in n.output}
    drop, new_inits = set(), {}
    for n in g.node:
        if n.op_type != "BatchNormalization" or n.input[0] not in producer:
            continue
        conv = producer[n.input[0]]
        if conv.op_type != "Conv" or readers.get(n.input[0]) != 1 or conv.input[1] not in weights or \
                not all(i in weights for i in n.input[1:5]):
            continue
        eps = next((a.f for a in n.attribute if a.name == "epsilon"), 1e-5)
        scale, shift, mean, var = (weights[i].astype(np.float64) for i in n.input[1:5])
        factor = scale / np.sqrt(var + eps)
        w = weights[conv.input[1]].astype(np.float64)
        b = weights[conv.input[2]].astype(np.float64) if len(conv.input) > 2 and conv.input[2] else 0.0
        wname, bname = conv.input[1] + ".folded", conv.output[0] + ".folded_bias"
        new_inits[wname] = (w * factor.reshape(-1, *([1] * (w.ndim - 1)))).astype(np.float32)
        new_inits[bname] = ((b - mean) * factor + shift).astype(np.float32)
        del conv.input[1:]
        conv.input.extend([wname, bname])
        conv.output[0] = n.output[0]
        drop.add(id(n))
    kept = [n for n in g.node if id(n) not in drop]
    del g.node[:]
    g.node.extend(kept)
    g.initializer.extend(numpy_helper.from_array(v, k) for k, v in new_inits.items())
    used = {i for n in g.node for i in n.input}
    live = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(live)
    return model


def rebuild(g, nodes, inits):
    """Graph `g` with `nodes`, the initializers they read and `inits`; its
    value_info dropped (the shapes it held no longer hold)."""
    used = {i for n in nodes for i in n.input}
    keep = [t for t in g.initializer if t.name in used]
    del g.node[:]
    g.node.extend(nodes)
    del g.initializer[:]
    g.initializer.extend(keep + inits)
    del g.value_info[:]


def quantize_qdq(model, inputs, near):
    """`model` in the QDQ form of ONNX Runtime's static quantizer (after its
    pre-processing folds batch norms into convolutions): each Conv, MatMul
    and Gemm between QuantizeLinear/DequantizeLinear pairs, which ONNX
    Runtime fuses; uint8 activations (asymmetric, from the calibration
    ranges), int8 weights (symmetric, per output channel), int32 biases."""
    model = fold_batch_norms(model)
    g = model.graph
    weights = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    targets = [n for n in g.node if n.op_type in QUANTIZED and len(n.input) > 1 and n.input[1] in weights
               and weights[n.input[1]].dtype == np.float32 and n.input[0] not in weights
               and not (n.op_type == "Gemm" and any(a.name == "transA" and a.i for a in n.attribute))]
    ranges = calibrate(model, inputs, sorted({n.input[0] for n in targets} | {n.output[0] for n in targets}),
                       near)
    inits, nodes, replaced = [], [], {}

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def q_dq(x):
        """x through a QuantizeLinear/DequantizeLinear pair (one per value)."""
        if x in replaced:
            return replaced[x]
        s, zp = uint8_params(*ranges[x])
        scale, zero = const(x + ".scale", s), const(x + ".zero_point", zp)
        nodes.append(helper.make_node("QuantizeLinear", [x, scale, zero], [x + ".q"], name=x + ".quantize"))
        nodes.append(helper.make_node("DequantizeLinear", [x + ".q", scale, zero], [x + ".dq"],
                                      name=x + ".dequantize"))
        replaced[x] = x + ".dq"
        return x + ".dq"

    target_names = {id(n) for n in targets}
    for n in g.node:
        if id(n) not in target_names:
            nodes.append(n)
            continue
        trans_b = any(a.name == "transB" and a.i for a in n.attribute)
        w = weights[n.input[1]]
        axis = 0 if n.op_type == "Conv" or (n.op_type == "Gemm" and trans_b) else 1
        wq, w_scale = int8_per_channel(w, axis)
        x_scale, x_zero = uint8_params(*ranges[n.input[0]])
        y_scale, y_zero = uint8_params(*ranges[n.output[0]])
        wname = n.input[1]
        bias = n.input[2] if len(n.input) > 2 and n.input[2] in weights else None
        ins = [q_dq(n.input[0])]
        nodes.append(helper.make_node("DequantizeLinear", [const(wname + ".q", wq), const(wname + ".scale", w_scale),
                                                           const(wname + ".zero_point", np.zeros_like(w_scale, np.int8))],
                                      [wname + ".dq"], name=wname + ".dequantize", axis=axis))
        ins.append(wname + ".dq")
        if bias:
            b_scale = (x_scale * w_scale).astype(np.float32)
            bq = np.round(weights[bias] / b_scale).astype(np.int32)
            nodes.append(helper.make_node("DequantizeLinear", [const(bias + ".q", bq), const(bias + ".scale", b_scale),
                                                               const(bias + ".zero_point", np.zeros_like(bq))],
                                          [bias + ".dq"], name=bias + ".dequantize", axis=0))
            ins.append(bias + ".dq")
        out = n.output[0]
        copy = helper.make_node(n.op_type, ins, [out + ".float"], name=n.name)
        copy.attribute.extend(n.attribute)
        nodes.append(copy)
        s, zp = const(out + ".scale", y_scale), const(out + ".zero_point", y_zero)
        nodes.append(helper.make_node("QuantizeLinear", [out + ".float", s, zp], [out + ".q"], name=out + ".quantize"))
        nodes.append(helper.make_node("DequantizeLinear", [out + ".q", s, zp], [out], name=out + ".dequantize"))
        replaced[out] = out  # already through a pair: a reader quantizes nothing again
    rebuild(g, nodes, inits)
    return model, len(targets)


# The QOperator form, as ONNX Runtime's quantizer writes it (its
# QLinearOpsRegistry): each operator it quantizes, and what it becomes.
QLINEAR = {"Conv": "QLinearConv", "MatMul": "QLinearMatMul", "Gemm": "QGemm", "Add": "QLinearAdd",
           "Mul": "QLinearMul", "Sigmoid": "QLinearSigmoid", "LeakyRelu": "QLinearLeakyRelu",
           "GlobalAveragePool": "QLinearGlobalAveragePool", "AveragePool": "QLinearAveragePool",
           "Concat": "QLinearConcat", "Softmax": "QLinearSoftmax"}
# Operators it leaves on the bytes of a quantized input, their outputs
# quantized as the input is (Direct8BitOp and its kin).
DIRECT_8BIT = {"MaxPool", "Reshape", "Squeeze", "Unsqueeze", "Transpose", "Resize", "Split"}


def quantize_qoperator(model, inputs, near):
    """`model` in the QOperator form of ONNX Runtime's static quantizer
    (after its pre-processing folds batch norms into convolutions): the
    operators of QLINEAR become their quantized forms (com.microsoft's,
    beside ONNX's QLinearConv and QLinearMatMul) and the tensors between
    them stay uint8; DIRECT_8BIT operators run on the bytes; a Relu or Clip
    a quantized operator's output alone feeds is dropped, its range
    becoming that output's (the saturation clamps). A float operator reads
    a DequantizeLinear, and a quantized one a QuantizeLinear of a float
    value. uint8 activations (asymmetric, from the calibration ranges);
    int8 weights, symmetric, per output channel (one scale for
    QLinearMatMul); int32 biases; Softmax's output at scale 1/256."""
    model = fold_batch_norms(model)
    g = model.graph
    weights = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    inferred = onnx.shape_inference.infer_shapes(model).graph
    is_float = {v.name for v in list(inferred.value_info) + list(inferred.input) + list(inferred.output)
                if v.type.tensor_type.elem_type == F32}
    readers = {}
    for n in g.node:
        for i in n.input:
            readers[i] = readers.get(i, 0) + 1
    outputs = {o.name for o in g.output}
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))

    def weighted(n):
        """Whether n is a product by a constant float weight ONNX Runtime quantizes."""
        return len(n.input) > 1 and n.input[1] in weights and weights[n.input[1]].dtype == np.float32 \
            and n.input[0] not in weights and (n.op_type != "MatMul" or weights[n.input[1]].ndim == 2) \
            and (len(n.input) < 3 or not n.input[2] or n.input[2] in weights) \
            and not any(a.name == "transA" and a.i for a in n.attribute)

    def activations(n):
        return [i for i in n.input if i and i not in weights]

    candidates = {k for k, n in enumerate(g.node) if n.domain in ("", "ai.onnx") and n.op_type in QLINEAR
                  and (n.op_type not in QUANTIZED or weighted(n)) and all(i in is_float for i in activations(n))}
    ranges = calibrate(model, inputs, sorted({t for n in g.node for t in list(n.input) + list(n.output)
                                              if t in is_float and t not in weights}), near)
    # A Relu or Clip alone reading a quantized output: the output takes its range.
    candidate_outputs = {g.node[k].output[0] for k in candidates}
    def clamps_below_zero(n):
        """Whether n is a Relu, or a Clip whose lower bound (if any) is at most 0: what the
        saturation of a range from 0 does."""
        if n.op_type != "Clip":
            return n.op_type == "Relu"
        low = next((a.f for a in n.attribute if a.name == "min"), None)
        if len(n.input) > 1 and n.input[1]:
            low = float(weights[n.input[1]]) if n.input[1] in weights else 1.0
        return low is None or low <= 0

    # (Nodes by position: protobuf makes a new Python object for each access.)
    droppable = {k for k, n in enumerate(g.node) if clamps_below_zero(n) and n.input[0] in candidate_outputs
                 and readers[n.input[0]] == 1 and n.input[0] not in outputs}
    for k in droppable:
        ranges[g.node[k].input[0]] = ranges[g.node[k].output[0]]

    inits, nodes = [], []
    quantized = {}  # float tensor name -> (uint8 tensor, scale, zero point)
    int8_weights = {}  # weight name -> its int8 form, scale and zero point
    available = {i.name for i in g.input} | set(weights)  # float tensors computed so far

    values = {}  # initializer name -> its value, for the biases' scales

    def const(name, value):
        values[name] = np.asarray(value)
        inits.append(numpy_helper.from_array(values[name], name))
        return name

    def params(x, low_high):
        s, zp = uint8_params(*low_high)
        return const(x + ".scale", s), const(x + ".zero_point", zp)

    def to_bytes(x):
        """x as uint8: its quantized form, a QuantizeLinear of it (once), or
        a constant quantized here over its own range."""
        if x not in quantized:
            if x in weights:
                w = weights[x]
                s, zp = uint8_params(min(float(w.min()), 0.0), max(float(w.max()), 0.0))
                q = np.clip(np.round(w / s) + zp, 0, 255).astype(np.uint8)
                quantized[x] = (const(x + ".quantized", q), const(x + ".scale", s), const(x + ".zero_point", zp))
            else:
                scale, zero = params(x, ranges[x])
                nodes.append(helper.make_node("QuantizeLinear", [x, scale, zero], [x + ".quantized"],
                                              name=x + ".quantize"))
                quantized[x] = (x + ".quantized", scale, zero)
        return quantized[x]

    def to_float(x):
        """x as float: a DequantizeLinear of its quantized form under its
        own name (once) where only that was computed."""
        if x and x not in available and x in quantized:
            nodes.append(helper.make_node("DequantizeLinear", list(quantized[x]), [x], name=x + ".dequantize"))
            available.add(x)
        return x

    def emit(op, ins, out, n, domain="com.microsoft", keep=(), **attrs):
        q = helper.make_node(op, ins, [out + ".quantized"], name=n.name, domain=domain, **attrs)
        q.attribute.extend(a for a in n.attribute if a.name in keep)
        nodes.append(q)

    def product(n, out, y):
        """Conv, MatMul or Gemm by its constant weight, as QLinearConv, QLinearMatMul or QGemm."""
        trans_b = any(a.name == "transB" and a.i for a in n.attribute)
        w = weights[n.input[1]]
        wname = n.input[1]
        if n.op_type == "MatMul":
            wq, w_scale = symmetric_int8(w)  # QLinearMatMul takes one weight scale
            w_scale = w_scale.reshape(())
        else:
            wq, w_scale = int8_per_channel(w, 0 if n.op_type == "Conv" or trans_b else 1)
        x = to_bytes(n.input[0])
        x_scale = values[x[1]]
        ys, yz = y
        if wname not in int8_weights:  # a weight two products share: once
            int8_weights[wname] = [const(wname + ".int8", wq), const(wname + ".int8_scale", w_scale),
                                   const(wname + ".int8_zero_point", np.zeros_like(w_scale, np.int8))]
        weight = int8_weights[wname]
        bias = n.input[2] if len(n.input) > 2 and n.input[2] in weights else None
        if n.op_type == "Gemm":
            attr = {a.name: (a.f if a.type == onnx.AttributeProto.FLOAT else a.i) for a in n.attribute}
            alpha, beta = attr.get("alpha", 1.0), attr.get("beta", 1.0)
            c = [const(out + ".bias", np.round(beta * weights[bias] / (alpha * x_scale * w_scale)).astype(np.int32))] \
                if bias else [""]
            emit("QGemm", list(x) + weight + c + [ys, yz], out, n, keep=("transB", "alpha"))
            return
        ins = list(x) + weight + [ys, yz]
        if n.op_type == "Conv":
            if bias:
                ins.append(const(out + ".bias", np.round(weights[bias] / (x_scale * w_scale)).astype(np.int32)))
            emit("QLinearConv", ins, out, n, domain="", keep=[a.name for a in n.attribute])
        else:
            emit("QLinearMatMul", ins, out, n, domain="")

    for k, n in enumerate(g.node):
        out = n.output[0]
        if k in candidates:
            op = n.op_type
            if op == "Softmax":
                y = const(out + ".scale", np.float32(1 / 256)), const(out + ".zero_point", np.uint8(0))
            else:
                y = params(out, ranges[out])
            if op in QUANTIZED:
                product(n, out, y)
            elif op == "Concat":
                emit("QLinearConcat", list(y) + [t for i in n.input for t in to_bytes(i)], out, n, keep=("axis",))
            elif op == "Softmax":
                emit("QLinearSoftmax", list(to_bytes(n.input[0])) + list(y), out, n, keep=("axis",), opset=opset)
            else:  # Add, Mul; Sigmoid, LeakyRelu, GlobalAveragePool, AveragePool
                ins = [t for i in n.input for t in to_bytes(i)]
                emit(QLINEAR[op], ins + list(y), out, n, keep=[a.name for a in n.attribute])
            quantized[out] = (out + ".quantized",) + tuple(y)
            continue
        source = n.input[0] if n.input else None
        on_bytes = source in quantized and source not in available
        if k in droppable and on_bytes:
            quantized[out] = quantized[source]
            continue
        if n.op_type in DIRECT_8BIT and n.domain in ("", "ai.onnx") and on_bytes and \
                all(o in is_float for o in n.output if o):
            copy = helper.make_node(n.op_type, [quantized[source][0]] + [to_float(i) for i in n.input[1:]],
                                    [o + ".quantized" if o else "" for o in n.output], name=n.name)
            copy.attribute.extend(n.attribute)
            nodes.append(copy)
            for o in n.output:
                if o:
                    quantized[o] = (o + ".quantized",) + quantized[source][1:]
            continue
        for i in n.input:
            to_float(i)
        nodes.append(n)
        available.update(n.output)
    for o in g.output:
        to_float(o.name)
    rebuild(g, nodes, inits)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model, len(candidates)


def quantize_dynamic(model):
    """`model` quantized as ONNX Runtime's `quantize_dynamic` writes it with
    its defaults (IntegerOps; int8 weights, symmetric, one scale per
    tensor): each Conv and MatMul with a constant weight reads its input
    through a DynamicQuantizeLinear (one per value, uint8, the range taken
    at run time) and becomes ConvInteger or MatMulInteger, a Cast of the
    int32 product to float, and a Mul by the product of the two scales; a
    Conv's bias is added after, reshaped to [1, C, 1, ...]. An LSTM becomes
    com.microsoft's DynamicQuantizeLSTM: its W and R int8, one scale per
    direction, transposed to [dirs, K, 4H]. A Gather from a constant table
    (an embedding) reads the table as int8 and is dequantized after
    (GatherQuant)."""
    g = model.graph
    weights = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    inits, nodes, quantized = [], [], {}

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def dynamic(x):
        """x's DynamicQuantizeLinear outputs (value, scale, zero point)."""
        if x not in quantized:
            outs = [x + ".quantized", x + ".scale", x + ".zero_point"]
            nodes.append(helper.make_node("DynamicQuantizeLinear", [x], outs, name=x + ".quantize"))
            quantized[x] = outs
        return quantized[x]

    def lstm(n):
        """n as DynamicQuantizeLSTM (ONNX Runtime's LSTMQuant)."""
        ins = list(n.input) + [""] * (8 - len(n.input))
        for k in (1, 2):
            q, scale = symmetric_int8(weights[n.input[k]], axes=(1, 2))
            scale = scale.reshape(-1)
            ins[k] = const(n.input[k] + ".quantized", q.transpose(0, 2, 1))
            ins += [const(n.input[k] + ".scale", scale), const(n.input[k] + ".zero_point", np.zeros(len(scale), np.int8))]
        q = helper.make_node("DynamicQuantizeLSTM", ins, list(n.output), name=n.name + "_quant",
                             domain="com.microsoft")
        q.attribute.extend(n.attribute)
        nodes.append(q)
        if not any(o.domain == "com.microsoft" for o in model.opset_import):
            model.opset_import.append(helper.make_opsetid("com.microsoft", 1))

    int8_done = set()

    def int8(name):
        """The int8 form of weight `name`, symmetric, one scale."""
        if name not in int8_done:  # a weight two nodes share: once
            int8_done.add(name)
            q, scale = symmetric_int8(weights[name])
            const(name + ".quantized", q)
            const(name + ".zero_point", np.int8(0))
            const(name + ".scale", scale.reshape(()))
        return name + ".quantized", name + ".zero_point", name + ".scale"

    count = 0
    for n in g.node:
        if n.op_type == "LSTM" and all(n.input[k] in weights for k in (1, 2)):
            lstm(n)
            count += 1
            continue
        if n.op_type == "Gather" and n.input[0] in weights and n.input[1] not in weights and \
                weights[n.input[0]].dtype == np.float32:
            tq, tz, ts = int8(n.input[0])
            out = n.output[0]
            gather = helper.make_node("Gather", [tq, n.input[1]], [out + "_quantized"], name=n.name)
            gather.attribute.extend(n.attribute)
            nodes += [gather, helper.make_node("DequantizeLinear", [out + "_quantized", ts, tz], [out],
                                               name=out + ".dequantize")]
            count += 1
            continue
        w = weights.get(n.input[1]) if len(n.input) > 1 else None
        if n.op_type not in ("Conv", "MatMul") or w is None or w.dtype != np.float32 or \
                n.input[0] in weights:
            nodes.append(n)
            continue
        count += 1
        wq, wz, ws = int8(n.input[1])
        xq, xs, xz = dynamic(n.input[0])
        op = "ConvInteger" if n.op_type == "Conv" else "MatMulInteger"
        out = n.output[0]
        integer = helper.make_node(op, [xq, wq, xz, wz], [out + ".int32"], name=n.name + ".quant")
        if op == "ConvInteger":
            integer.attribute.extend(n.attribute)
        nodes.append(integer)
        nodes.append(helper.make_node("Cast", [out + ".int32"], [out + ".cast"], to=F32, name=out + ".cast"))
        nodes.append(helper.make_node("Mul", [xs, ws], [out + ".scales"], name=out + ".scales_mul"))
        bias = n.input[2] if op == "ConvInteger" and len(n.input) > 2 and n.input[2] else None
        scaled = out + ".scaled" if bias else out
        nodes.append(helper.make_node("Mul", [out + ".cast", out + ".scales"], [scaled], name=out + ".scale_mul"))
        if bias:
            shape = const(out + ".bias_shape", np.array([1, -1] + [1] * (w.ndim - 2), np.int64))
            nodes.append(helper.make_node("Reshape", [bias, shape], [out + ".bias"], name=out + ".bias_reshape"))
            nodes.append(helper.make_node("Add", [scaled, out + ".bias"], [out], name=out + ".bias_add"))
    rebuild(g, nodes, inits)
    return model, count


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["float16", "bfloat16", "qdq", "qoperator", "dynamic"])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--inputs", help="the source model's NAME.inputs list, to convert its inputs too")
    ap.add_argument("--wide", action="store_true",
                    help="also write OUT's stem + _wide.onnx: the float16 model computed in float32")
    args = ap.parse_args()
    if args.kind in ("float16", "bfloat16"):
        model = to_float16(onnx.load(args.src), F16 if args.kind == "float16" else BF16)
    elif args.kind == "dynamic":
        model, count = quantize_dynamic(onnx.load(args.src))
        if count == 0:
            raise SystemExit(f"{args.src}: nothing to quantize")
    else:
        if not args.inputs:
            raise SystemExit("quantizing needs --inputs (the calibration data)")
        src_dir = os.path.dirname(args.inputs)
        with open(args.inputs) as f:
            calibration = dict(l.strip().split("=", 1) for l in f if l.strip())
        calibration = {k: os.path.join(src_dir, v) for k, v in calibration.items()}
        quantize = quantize_qdq if args.kind == "qdq" else quantize_qoperator
        model, count = quantize(onnx.load(args.src), calibration, args.dst)
        if count == 0:
            raise SystemExit(f"{args.src}: nothing to quantize")
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
                if value.dtype == np.float32 and args.kind == "float16":
                    value = value.astype(np.float16)
                if value.dtype == np.float32 and args.kind == "bfloat16":
                    value = bf16_round(value)
                np.save(f"{stem}.input_{k}.npy", value)
                listed.append(f"{name}={os.path.basename(stem)}.input_{k}.npy")
        with open(stem + ".inputs", "w") as f:
            f.write("\n".join(listed) + "\n")


if __name__ == "__main__":
    main()
