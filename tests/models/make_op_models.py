#!/usr/bin/python3
"""Single-operator ONNX models at their edge cases, for the importer's tests.

Uses only Debian's python3-onnx (1.12) and python3-numpy.

    /usr/bin/python3 make_op_models.py --out DIR [--only NAME,...] [--list]

For each case NAME it writes DIR/NAME.onnx and its inputs DIR/NAME.in_K.npy
(random, seeded by the case's name), and DIR/manifest.json lists every case:
{"name", "model", "inputs": [{"name", "file"}], "ops": [...]}. Expected
outputs come from ONNX Runtime (tools/ort/ort_run.js --manifest).
DIR/bad_manifest.json lists models the importer must refuse, each with a
piece of the error message it must give and its kind ("invalid argument"
for what is valid ONNX but not supported, "parse" for a broken model):
{"name", "model", "error", "kind"}.

Cases cover padding (symmetric, asymmetric, auto_pad), strides, dilation,
groups, broadcasting, negative axes and the opset differences of the
operators the importer supports (attributes that became inputs at opset 13,
Softmax's 2-D coercion before it, Clip's inputs from opset 11, ...).
"""
import argparse
import json
import os
import sys
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
CASES = {}


def case(name, opset=17, seed_of=None, ort_reference=None):
    """Registers a case. `seed_of`: draw the random data of that case (a twin
    computing the same thing another way); `ort_reference`: the case whose
    ONNX Runtime outputs this one is checked against (for what ONNX Runtime
    does not run itself)."""
    def register(fn):
        CASES[name] = (fn, opset, seed_of, ort_reference)
        return fn
    return register


class G:
    """Collects one model: inputs (with their random data), initializers, nodes."""

    def __init__(self, rng):
        self.rng = rng
        self.inputs, self.data, self.inits, self.nodes, self.outputs = [], [], [], [], []
        self.unsorted = False  # write the nodes in reverse order (after the checker, which wants them sorted)
        self.external = False  # keep the initializers in NAME.weights beside the model
        self.microsoft = False  # uses ONNX Runtime's com.microsoft operators (not checkable here)
        self.wide_twin = False  # also write NAME_wide: the same model computed in float32 (a reference for ulps)
        self.atol = None  # an absolute tolerance for float outputs beyond the test's own
        self.fixed = []  # inputs the importer takes as constants (--input-value), ONNX Runtime as inputs
        self.functions = []  # model-local functions (FunctionProto)

    def input(self, name, shape, low=-1.0, high=1.0, dtype=np.float32):
        self.inputs.append(helper.make_tensor_value_info(
            name, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(dtype)], list(shape)))
        self.data.append(self.rng.uniform(low, high, shape).astype(dtype))
        return name

    def const(self, name, array):
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, name, shape, scale=0.5, dtype=np.float32):
        return self.const(name, (self.rng.standard_normal(shape) * scale).astype(dtype))

    def node(self, op, inputs, outputs=None, **attrs):
        outputs = outputs or [f"{op.lower()}_{len(self.nodes)}"]
        self.nodes.append(helper.make_node(op, inputs, outputs, name=f"{op}_{len(self.nodes)}", **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    def output(self, *names, elem=F, shape=None):
        for n in names:
            # Without a shape, the shape is inferred in build().
            self.outputs.append(helper.make_tensor_value_info(n, elem, shape))


# ---- convolutions -------------------------------------------------------------

@case("conv_pads_strides")
def _(g):
    g.output(g.node("Conv", [g.input("x", [1, 3, 9, 9]), g.weight("w", [4, 3, 3, 3]), g.weight("b", [4])],
                    kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 2, 1]))


@case("conv_dilation_groups")
def _(g):
    g.output(g.node("Conv", [g.input("x", [1, 4, 10, 10]), g.weight("w", [6, 2, 3, 3])],
                    dilations=[2, 2], group=2, pads=[2, 2, 2, 2]))


@case("conv_depthwise")
def _(g):
    g.output(g.node("Conv", [g.input("x", [1, 8, 7, 7]), g.weight("w", [8, 1, 3, 3]), g.weight("b", [8])],
                    group=8, pads=[1, 1, 1, 1]))


@case("conv_auto_pad_same_upper", opset=11)
def _(g):
    g.output(g.node("Conv", [g.input("x", [1, 2, 8, 7]), g.weight("w", [3, 2, 3, 3])],
                    auto_pad="SAME_UPPER", strides=[2, 2]))


@case("conv_1x1_batch2")
def _(g):
    g.output(g.node("Conv", [g.input("x", [2, 5, 6, 6]), g.weight("w", [7, 5, 1, 1])]))


@case("conv1d_stft_like")
def _(g):
    # An STFT written as a strided 1-D convolution, as audio front ends export it.
    g.output(g.node("Conv", [g.input("x", [1, 1, 96]), g.weight("w", [16, 1, 16])], strides=[8], pads=[4, 4]))


@case("conv1d_groups_dilation_bias")
def _(g):
    g.output(g.node("Conv", [g.input("x", [2, 4, 20]), g.weight("w", [6, 2, 3]), g.weight("b", [6])],
                    group=2, dilations=[2], pads=[2, 1]))


@case("pool1d_max_avg_ceil")
def _(g):
    x = g.input("x", [1, 3, 17])
    g.output(g.node("MaxPool", [x], kernel_shape=[3], strides=[2], pads=[1, 1], ceil_mode=1))
    g.output(g.node("AveragePool", [x], kernel_shape=[4], strides=[3], pads=[0, 2], count_include_pad=1))


@case("conv_transpose_output_shape_auto_pad_groups_dilations", opset=13)
def _(g):
    x = g.input("x", [1, 4, 4, 5])
    w = g.weight("w", [4, 3, 3, 3])
    g.output(g.node("ConvTranspose", [x, w], strides=[3, 2], output_shape=[12, 11]), shape=[1, 3, 12, 11])
    g.output(g.node("ConvTranspose", [x, w], strides=[2, 2], output_shape=[7, 8]), shape=[1, 3, 7, 8])
    g.output(g.node("ConvTranspose", [x, w], strides=[2, 3], auto_pad="SAME_UPPER"), shape=[1, 3, 8, 15])
    g.output(g.node("ConvTranspose", [x, w], strides=[2, 3], auto_pad="SAME_LOWER"), shape=[1, 3, 8, 15])
    g.output(g.node("ConvTranspose", [x, w, g.weight("b", [3])], strides=[2, 2], pads=[2, 1, 1, 2],
                    output_padding=[1, 1]))
    g.output(g.node("ConvTranspose", [x, w], dilations=[2, 1], pads=[0, 3, 4, 0]))
    g.output(g.node("ConvTranspose", [x, g.weight("wg", [4, 2, 2, 3])], group=2, strides=[2, 1]))

@case("conv_transpose")
def _(g):
    g.output(g.node("ConvTranspose", [g.input("x", [1, 4, 5, 5]), g.weight("w", [4, 3, 3, 3]),
                                      g.weight("b", [3])],
                    strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]))


@case("external_data_weights")
def _(g):
    # Weights in a file beside the model, as exporters write models over 2 GB.
    g.external = True
    y = g.node("Conv", [g.input("x", [1, 3, 6, 6]), g.weight("w", [4, 3, 3, 3]), g.weight("b", [4])])
    g.output(g.node("Gemm", [g.node("Flatten", [y]), g.weight("fc", [64, 5])]))


@case("unsorted_nodes")
def _(g):
    # As exporters sometimes write them: each node before the ones it reads.
    g.unsorted = True
    x = g.input("x", [2, 3])
    g.output(g.node("Add", [g.node("Neg", [g.node("Relu", [x])]), x]))


# ---- linear algebra -------------------------------------------------------------

@case("gemm_transa_alpha_beta")
def _(g):
    g.output(g.node("Gemm", [g.input("a", [4, 6]), g.weight("b", [4, 5]), g.weight("c", [5])],
                    transA=1, alpha=0.5, beta=2.0))


@case("gemm_transb_row_bias", opset=11)
def _(g):
    g.output(g.node("Gemm", [g.input("a", [3, 8]), g.weight("b", [5, 8]), g.weight("c", [1, 5])], transB=1))


@case("gemm_no_bias")
def _(g):
    g.output(g.node("Gemm", [g.input("a", [3, 8]), g.input("b", [8, 4])]))


@case("matmul_2d_weight")
def _(g):
    g.output(g.node("MatMul", [g.input("a", [7, 9]), g.weight("b", [9, 5])]))


@case("matmul_batched")
def _(g):
    g.output(g.node("MatMul", [g.input("a", [2, 3, 4, 5]), g.input("b", [2, 3, 5, 6])]))


@case("matmul_broadcast_rhs")
def _(g):
    g.output(g.node("MatMul", [g.input("a", [2, 3, 4, 5]), g.input("b", [5, 6])]))


@case("matmul_vector")
def _(g):
    a = g.input("a", [5])
    g.output(g.node("MatMul", [a, g.weight("b", [5, 3])]))
    # Two vectors: a scalar, as numpy and ONNX Runtime give.
    g.output(g.node("MatMul", [a, g.input("v", [5])]), shape=[])


# ---- elementwise ----------------------------------------------------------------

@case("add_broadcast")
def _(g):
    g.output(g.node("Add", [g.input("a", [2, 3, 4]), g.input("b", [4])]))


@case("sub_broadcast_both")
def _(g):
    g.output(g.node("Sub", [g.input("a", [2, 1, 4]), g.input("b", [3, 1])]))


@case("mul_scalar_constant")
def _(g):
    g.output(g.node("Mul", [g.input("a", [2, 3]), g.const("k", np.float32(-1.5))]))


@case("div_same_shape")
def _(g):
    g.output(g.node("Div", [g.input("a", [2, 3, 4]), g.input("b", [2, 3, 4], 0.5, 2.0)]))


for _op, _low, _high in [("Relu", -1, 1), ("Sigmoid", -4, 4), ("Tanh", -3, 3), ("Erf", -2, 2),
                         ("Sqrt", 0.01, 4), ("Exp", -2, 2), ("Log", 0.01, 4),
                         ("Reciprocal", 0.1, 4)]:
    def _make(op=_op, low=_low, high=_high):
        @case(op.lower())
        def _(g):
            g.output(g.node(op, [g.input("x", [2, 3, 5], low, high)]))
    _make()


@case("leaky_relu")
def _(g):
    g.output(g.node("LeakyRelu", [g.input("x", [2, 7])], alpha=0.1))


@case("prelu_channel_slope")
def _(g):
    g.output(g.node("PRelu", [g.input("x", [1, 3, 4, 4]), g.weight("slope", [3, 1, 1])]))


@case("clip_inputs", opset=11)
def _(g):
    g.output(g.node("Clip", [g.input("x", [3, 4], -2, 2), g.const("lo", np.float32(-0.5)),
                             g.const("hi", np.float32(0.75))]))


@case("clip_min_only", opset=13)
def _(g):
    g.output(g.node("Clip", [g.input("x", [3, 4], -2, 2), g.const("lo", np.float32(0.1))]))


@case("hard_sigmoid")
def _(g):
    g.output(g.node("HardSigmoid", [g.input("x", [3, 5], -4, 4)], alpha=0.3, beta=0.4))


@case("hard_swish", opset=14)
def _(g):
    g.output(g.node("HardSwish", [g.input("x", [3, 5], -5, 5)]))


@case("pow_constant_exponent")
def _(g):
    g.output(g.node("Pow", [g.input("x", [2, 6]), g.const("e", np.float32(3.0))]))


@case("pow_general")
def _(g):
    g.output(g.node("Pow", [g.input("x", [2, 6], 0.1, 2.0), g.input("y", [6], -1.5, 1.5)]))


# ---- normalisation ---------------------------------------------------------------

@case("batch_norm", opset=14)
def _(g):
    g.output(g.node("BatchNormalization", [g.input("x", [2, 3, 4, 4]), g.weight("s", [3]), g.weight("b", [3]),
                                           g.weight("m", [3]), g.const("v", np.float32([0.5, 1.0, 2.0]))],
                    epsilon=1e-3))


@case("batch_norm_opset11", opset=11)
def _(g):
    g.output(g.node("BatchNormalization", [g.input("x", [1, 3, 5]), g.weight("s", [3]), g.weight("b", [3]),
                                           g.weight("m", [3]), g.const("v", np.float32([0.5, 1.0, 2.0]))]))


@case("layer_norm_last_axis")
def _(g):
    g.output(g.node("LayerNormalization", [g.input("x", [2, 5, 8]), g.weight("s", [8]), g.weight("b", [8])],
                    axis=-1, epsilon=1e-5))


@case("layer_norm_axis1")
def _(g):
    g.output(g.node("LayerNormalization", [g.input("x", [2, 3, 4]), g.weight("s", [3, 4]), g.weight("b", [3, 4])],
                    axis=1))


@case("instance_norm")
def _(g):
    g.output(g.node("InstanceNormalization", [g.input("x", [2, 3, 5, 5]), g.weight("s", [3]), g.weight("b", [3])],
                    epsilon=1e-4))


# ---- pooling ---------------------------------------------------------------------

@case("max_pool_pads_strides")
def _(g):
    g.output(g.node("MaxPool", [g.input("x", [1, 2, 9, 9])], kernel_shape=[3, 3], strides=[2, 2],
                    pads=[1, 1, 1, 1]))


@case("max_pool_ceil_mode")
def _(g):
    g.output(g.node("MaxPool", [g.input("x", [1, 2, 8, 8])], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1))


@case("avg_pool_exclude_pad")
def _(g):
    g.output(g.node("AveragePool", [g.input("x", [1, 2, 7, 7])], kernel_shape=[3, 3], strides=[2, 2],
                    pads=[1, 1, 1, 1]))


@case("avg_pool_include_pad")
def _(g):
    g.output(g.node("AveragePool", [g.input("x", [1, 2, 7, 7])], kernel_shape=[2, 3], strides=[1, 2],
                    pads=[0, 1, 1, 0], count_include_pad=1))


@case("global_average_pool")
def _(g):
    g.output(g.node("GlobalAveragePool", [g.input("x", [2, 3, 5, 6])]))


# ---- shapes and data movement -----------------------------------------------------

@case("flatten_axis2")
def _(g):
    g.output(g.node("Flatten", [g.input("x", [2, 3, 4, 5])], axis=2))


@case("reshape_minus_one_and_zero")
def _(g):
    g.output(g.node("Reshape", [g.input("x", [2, 3, 4]), g.const("s", np.int64([0, -1, 2]))]))


@case("transpose_perm")
def _(g):
    g.output(g.node("Transpose", [g.input("x", [2, 3, 4, 5])], perm=[3, 1, 0, 2]))


@case("concat_negative_axis")
def _(g):
    g.output(g.node("Concat", [g.input("a", [2, 3]), g.input("b", [2, 1]), g.weight("c", [2, 4])], axis=-1))


@case("split_sizes_input", opset=13)
def _(g):
    a, b = g.node("Split", [g.input("x", [2, 7]), g.const("s", np.int64([3, 4]))], ["a", "b"], axis=1)
    g.output(a, b)


@case("split_equal_attr", opset=11)
def _(g):
    a, b, c = g.node("Split", [g.input("x", [6, 2])], ["a", "b", "c"], axis=0)
    g.output(a, b, c)


@case("slice_negative_steps", opset=13)
def _(g):
    g.output(g.node("Slice", [g.input("x", [5, 6, 7]), g.const("st", np.int64([-1, 1])),
                              g.const("en", np.int64([-100, 6])), g.const("ax", np.int64([0, -1])),
                              g.const("sp", np.int64([-2, 3]))]))


@case("slice_clamped_ends", opset=11)
def _(g):
    g.output(g.node("Slice", [g.input("x", [4, 5]), g.const("st", np.int64([1])),
                              g.const("en", np.int64([1000]))]))


@case("squeeze_attr", opset=11)
def _(g):
    g.output(g.node("Squeeze", [g.input("x", [1, 3, 1, 2])], axes=[0, -2]))


@case("squeeze_input", opset=13)
def _(g):
    g.output(g.node("Squeeze", [g.input("x", [1, 3, 1, 2]), g.const("ax", np.int64([2]))]))


@case("unsqueeze_input", opset=13)
def _(g):
    g.output(g.node("Unsqueeze", [g.input("x", [3, 2]), g.const("ax", np.int64([0, -1]))]))


@case("unsqueeze_attr", opset=11)
def _(g):
    g.output(g.node("Unsqueeze", [g.input("x", [3, 2])], axes=[1]))


@case("softmax_last_axis", opset=13)
def _(g):
    g.output(g.node("Softmax", [g.input("x", [2, 3, 5], -3, 3)], axis=-1))


@case("softmax_coerced_2d", opset=11)
def _(g):
    g.output(g.node("Softmax", [g.input("x", [2, 3, 4], -3, 3)], axis=1))


@case("softmax_middle_axis", opset=13)
def _(g):
    g.output(g.node("Softmax", [g.input("x", [2, 3, 4], -3, 3)], axis=1))


@case("log_softmax")
def _(g):
    g.output(g.node("LogSoftmax", [g.input("x", [3, 6], -3, 3)], axis=-1))


@case("reduce_mean_attr_no_keepdims", opset=13)
def _(g):
    g.output(g.node("ReduceMean", [g.input("x", [2, 3, 4])], axes=[1, -1], keepdims=0))


@case("reduce_sum_axes_input", opset=13)
def _(g):
    g.output(g.node("ReduceSum", [g.input("x", [2, 3, 4]), g.const("ax", np.int64([0]))], keepdims=1))


@case("reduce_min_attr_axes", opset=13)
def _(g):
    g.output(g.node("ReduceMin", [g.input("x", [2, 3, 4])], axes=[0, 2], keepdims=1))


@case("reduce_sum_all", opset=11)
def _(g):
    g.output(g.node("ReduceSum", [g.input("x", [2, 3, 4])], keepdims=0))


@case("pad_constant_value", opset=13)
def _(g):
    g.output(g.node("Pad", [g.input("x", [2, 3, 4]), g.const("p", np.int64([0, 1, 2, 1, 0, 3])),
                            g.const("v", np.float32(0.5))]))


@case("pad_negative_crop", opset=11)
def _(g):
    g.output(g.node("Pad", [g.input("x", [1, 2, 5, 5]), g.const("p", np.int64([0, 0, 1, -1, 0, 0, -2, 2]))]))


@case("resize_nearest_scales", opset=13)
def _(g):
    g.output(g.node("Resize", [g.input("x", [1, 2, 3, 4]), "", g.const("sc", np.float32([1, 1, 2, 1.5]))],
                    mode="nearest"))


@case("resize_nearest_asymmetric_floor", opset=13)
def _(g):
    g.output(g.node("Resize", [g.input("x", [1, 2, 4, 4]), "", g.const("sc", np.float32([1, 1, 0.5, 2]))],
                    mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"))


@case("resize_linear_sizes", opset=13)
def _(g):
    g.output(g.node("Resize", [g.input("x", [1, 2, 4, 5]), "", "", g.const("sz", np.int64([1, 2, 7, 3]))],
                    mode="linear"))


@case("resize_linear_align_corners", opset=11)
def _(g):
    g.output(g.node("Resize", [g.input("x", [1, 1, 3, 3]), g.const("roi", np.float32([])),
                               g.const("sc", np.float32([1, 1, 2, 2]))],
                    mode="linear", coordinate_transformation_mode="align_corners"))


# ---- comparison, logic, selection, variadic, unary math ---------------------------------

@case("compare_where_broadcast")
def _(g):
    x, y = g.input("x", [2, 3, 4]), g.input("y", [4])
    g.output(g.node("Where", [g.node("Greater", [x, y]), x, g.node("Neg", [y])]))
    g.output(g.node("LessOrEqual", [x, y]), g.node("GreaterOrEqual", [y, x]), elem=TensorProto.BOOL)


@case("logic_ops_bool_outputs")
def _(g):
    x = g.input("x", [3, 5])
    a = g.node("Less", [x, g.const("h", np.float32(0.5))])
    b = g.node("GreaterOrEqual", [x, g.const("l", np.float32(-0.2))])
    g.output(g.node("And", [a, b]), g.node("Or", [a, g.node("Not", [b])]), g.node("Xor", [a, b]),
             elem=TensorProto.BOOL)


@case("attention_mask_int64")
def _(g):
    # BERT-style: ids == 0 marks padding; the mask, expanded over the heads, adds -10000.
    ids = g.input("ids", [2, 6], low=0, high=3, dtype=np.int64)
    pad = g.node("Cast", [g.node("Equal", [ids, g.const("zero", np.int64(0))])], to=TensorProto.FLOAT)
    mask = g.node("Expand", [g.node("Unsqueeze", [pad, g.const("ax", np.int64([1]))]),
                             g.const("sh", np.int64([2, 4, 6]))])
    scores = g.input("scores", [2, 4, 6])
    g.output(g.node("Softmax", [g.node("Add", [scores, g.node("Mul", [mask, g.const("big", np.float32(-10000))])])],
                    axis=-1))
    g.output(g.node("Size", [ids]), elem=TensorProto.INT64, shape=[])


@case("gather_runtime_indices")
def _(g):
    # An embedding lookup: ids known at run time, negative ones counting from the end.
    ids = g.input("ids", [2, 5], low=-10, high=10, dtype=np.int64)
    g.output(g.node("Gather", [g.weight("table", [10, 6]), ids]))
    g.output(g.node("Gather", [g.input("x", [3, 4, 2]), g.input("j", [3], low=0, high=4, dtype=np.int64)],
                    axis=1))


@case("gather_elements_tile_cumsum")
def _(g):
    x = g.input("x", [3, 4])
    idx = g.input("idx", [3, 2], low=-4, high=4, dtype=np.int64)
    g.output(g.node("GatherElements", [x, idx], axis=1))
    g.output(g.node("Tile", [x, g.const("rep", np.int64([2, 3]))]))
    g.output(g.node("CumSum", [x, g.const("ax", np.int64(1))]))
    g.output(g.node("CumSum", [x, g.const("ax0", np.int64(0))], exclusive=1, reverse=1))


@case("one_hot_range")
def _(g):
    ids = g.input("ids", [2, 3], low=-5, high=5, dtype=np.int64)
    g.output(g.node("OneHot", [ids, g.const("depth", np.int64(5)), g.const("vals", np.float32([-1, 2]))], axis=1))
    r = g.node("Range", [g.const("s", np.float32(0.5)), g.const("l", np.float32(3)), g.const("d", np.float32(0.75))])
    g.output(g.node("Add", [g.input("x", [2, 4]), r]))


@case("depth_space_roundtrip")
def _(g):
    x = g.input("x", [1, 8, 3, 2])
    g.output(g.node("DepthToSpace", [x], blocksize=2, mode="DCR"), g.node("DepthToSpace", [x], blocksize=2, mode="CRD"))
    g.output(g.node("SpaceToDepth", [g.input("y", [1, 2, 4, 6])], blocksize=2))


@case("conv3d_pads_strides_groups")
def _(g):
    # A 3-D convolution (video, volumes): one 2-D convolution per kernel depth.
    x = g.input("x", [1, 4, 7, 8, 9])
    g.output(g.node("Conv", [x, g.weight("w", [6, 2, 3, 3, 2]), g.weight("b", [6])],
                    strides=[2, 1, 2], pads=[1, 0, 1, 2, 1, 0], dilations=[1, 2, 1], group=2),
             g.node("Conv", [x, g.weight("w2", [3, 4, 2, 3, 3])], auto_pad="SAME_LOWER", strides=[2, 2, 1]))


@case("conv_transpose3d")
def _(g):
    x = g.input("x", [1, 4, 3, 4, 5])
    g.output(g.node("ConvTranspose", [x, g.weight("w", [4, 3, 3, 2, 3]), g.weight("b", [6])],
                    strides=[2, 1, 3], pads=[1, 0, 2, 0, 1, 1], output_padding=[1, 0, 2], group=2),
             g.node("ConvTranspose", [x, g.weight("w2", [4, 2, 2, 3, 2])], dilations=[2, 1, 2],
                    auto_pad="SAME_UPPER", strides=[2, 2, 2]))


@case("pool3d_indices_ceil")
def _(g):
    x = g.input("x", [2, 3, 5, 6, 7])
    mx, idx = g.node("MaxPool", [x], ["mx", "idx"], kernel_shape=[2, 3, 2], strides=[2, 2, 3], pads=[0, 1, 1, 1, 1, 0],
                     ceil_mode=1)
    g.output(mx)
    g.output(idx, elem=TensorProto.INT64)
    g.output(g.node("AveragePool", [x], kernel_shape=[3, 2, 3], strides=[2, 2, 2], pads=[1, 1, 1, 1, 0, 1],
                    ceil_mode=1, count_include_pad=1),
             g.node("AveragePool", [x], kernel_shape=[2, 2, 2], pads=[1, 1, 1, 0, 0, 0]),
             g.node("GlobalMaxPool", [x]), g.node("GlobalAveragePool", [x]))


@case("maxpool_dilations_indices", opset=12)
def _(g):
    # Dilated windows, and indices in both storage orders; 1-D indices too.
    x = g.input("x", [1, 2, 9, 8])
    mx, idx = g.node("MaxPool", [x], ["mx", "idx"], kernel_shape=[3, 2], dilations=[2, 3], pads=[1, 1, 2, 0])
    g.output(mx)
    g.output(idx, elem=TensorProto.INT64)
    mx2, idx2 = g.node("MaxPool", [x], ["mx2", "idx2"], kernel_shape=[2, 3], strides=[2, 2], storage_order=1)
    g.output(mx2)
    g.output(idx2, elem=TensorProto.INT64)
    mx1, idx1 = g.node("MaxPool", [g.input("s", [2, 3, 11])], ["mx1", "idx1"], kernel_shape=[3], strides=[2])
    g.output(mx1)
    g.output(idx1, elem=TensorProto.INT64)
    mx3, idx3 = g.node("MaxPool", [x], ["mx3", "idx3"], kernel_shape=[2, 2], strides=[2, 2])
    # Row 8 is in no window: the unpooled shape is the input's, given.
    g.output(g.node("MaxUnpool", [mx3, idx3, g.const("shape", np.array([1, 2, 9, 8], np.int64))],
                    kernel_shape=[2, 2], strides=[2, 2]), shape=[1, 2, 9, 8])


@case("conv_transpose_1d")
def _(g):
    g.output(g.node("ConvTranspose", [g.input("x", [1, 4, 9]), g.weight("w", [4, 3, 5]), g.weight("b", [3])],
                    strides=[3], pads=[1, 2], output_padding=[1]))


@case("if_constant_condition")
def _(g):
    # As voice-activity models branch on their sample rate: constant once
    # the inputs are known, so only the branch taken is imported.
    x = g.input("x", [2, 3])
    cond = g.node("Equal", [g.const("sr", np.int64(16000)), g.const("want", np.int64(16000))])
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="then_relu"),
                              helper.make_node("Mul", ["t", "x"], ["t2"], name="then_mul")],
                             "then", [], [helper.make_tensor_value_info("t2", F, [2, 3])])
    other = helper.make_graph([helper.make_node("Unique", ["x"], ["u"], name="else_unique")],
                              "else", [], [helper.make_tensor_value_info("u", F, None)])
    g.nodes.append(helper.make_node("If", [cond], ["y"], name="If_0", then_branch=then, else_branch=other))
    g.output(g.node("Add", ["y", x]), shape=[2, 3])


@case("if_runtime_condition")
def _(g):
    # A condition known only at run time: both branches run, the condition picks.
    x = g.input("x", [2, 3])
    cond = g.node("Greater", [g.node("ReduceSum", [x], keepdims=0), g.const("z", np.float32(0))])
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="then_relu"),
                              helper.make_node("Mul", ["t", "x"], ["t2"], name="then_mul")],
                             "then", [], [helper.make_tensor_value_info("t2", F, [2, 3])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="else_neg")],
                              "else", [], [helper.make_tensor_value_info("e", F, [2, 3])])
    g.nodes.append(helper.make_node("If", [cond], ["y"], name="If_0", then_branch=then, else_branch=other))
    g.output(g.node("Add", ["y", x]), shape=[2, 3])


@case("if_runtime_condition_negative")
def _(g):
    # The same model with its input negated, so that the other branch is taken.
    x = g.input("x", [2, 3], low=-1.0, high=-0.1)
    cond = g.node("Greater", [g.node("ReduceSum", [x], keepdims=0), g.const("z", np.float32(0))])
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="then_relu")],
                             "then", [], [helper.make_tensor_value_info("t", F, [2, 3])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="else_neg")],
                              "else", [], [helper.make_tensor_value_info("e", F, [2, 3])])
    g.nodes.append(helper.make_node("If", [cond], ["y"], name="If_0", then_branch=then, else_branch=other))
    g.output("y", shape=[2, 3])


@case("loop_trip_count", opset=13)
def _(g):
    # A Loop with a constant trip count, a loop-carried value and a scan
    # output; the body reads the outer graph's x and its iteration number.
    x = g.input("x", [2, 3])
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["i_f"], to=F, name="body_cast"),
         helper.make_node("Mul", ["acc", "half"], ["scaled"], name="body_mul"),
         helper.make_node("Add", ["scaled", "x"], ["sum"], name="body_add"),
         helper.make_node("Add", ["sum", "i_f"], ["acc_out"], name="body_add_i"),
         helper.make_node("Identity", ["cond"], ["cond_out"], name="body_cond"),
         helper.make_node("Sigmoid", ["acc_out"], ["scan"], name="body_sigmoid")],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc", F, [2, 3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", F, [2, 3]),
         helper.make_tensor_value_info("scan", F, [2, 3])],
        initializer=[numpy_helper.from_array(np.float32(0.5), "half")])
    g.nodes.append(helper.make_node("Loop", [g.const("m", np.int64(3)), "", x], ["final", "stacked"],
                                    name="Loop_0", body=body))
    g.output("final", shape=[2, 3])
    g.output("stacked", shape=[3, 2, 3])


@case("loop_condition_ends", opset=13)
def _(g):
    # No trip count: the body's condition (i < 4, constant at each
    # iteration) ends the loop after five iterations.
    x = g.input("x", [4])
    body = helper.make_graph(
        [helper.make_node("Less", ["i", "four"], ["cond_out"], name="body_less"),
         helper.make_node("Sin", ["v"], ["v_out"], name="body_sin")],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v", F, [4])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", F, [4])],
        initializer=[numpy_helper.from_array(np.int64(4), "four")])
    g.nodes.append(helper.make_node("Loop", ["", g.const("go", np.bool_(True)), x], ["final"],
                                    name="Loop_0", body=body))
    g.output("final", shape=[4])


@case("scan_directions_axes", opset=11)
def _(g):
    # A running sum over the sequence (axis 1 of xs, read backwards) and a
    # second scan input along axis 0; one output stacked backwards on axis 1.
    xs, ys = g.input("xs", [3, 5]), g.input("ys", [5, 3])
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "x_t"], ["s_out"], name="body_add"),
         helper.make_node("Mul", ["s_out", "y_t"], ["o1"], name="body_mul"),
         helper.make_node("Tanh", ["o1"], ["o2"], name="body_tanh")],
        "body",
        [helper.make_tensor_value_info("s", F, [3]),
         helper.make_tensor_value_info("x_t", F, [3]),
         helper.make_tensor_value_info("y_t", F, [3])],
        [helper.make_tensor_value_info("s_out", F, [3]),
         helper.make_tensor_value_info("o1", F, [3]),
         helper.make_tensor_value_info("o2", F, [3])])
    g.nodes.append(helper.make_node("Scan", [g.const("s0", np.zeros(3, np.float32)), xs, ys],
                                    ["s_final", "o1s", "o2s"], name="Scan_0", body=body, num_scan_inputs=2,
                                    scan_input_axes=[1, 0], scan_input_directions=[1, 0],
                                    scan_output_axes=[0, 1], scan_output_directions=[0, 1]))
    g.output("s_final", shape=[3])
    g.output("o1s", shape=[5, 3])
    g.output("o2s", shape=[3, 5])


@case("scan8_batch", opset=8)
def _(g):
    # Scan at opset 8: a batch axis first on every state and scan input,
    # each batch entry scanned on its own (here one input read backwards).
    xs, ys = g.input("xs", [2, 4, 3]), g.input("ys", [2, 4, 3])
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "x_t"], ["s_out"], name="body_add"),
         helper.make_node("Mul", ["s_out", "y_t"], ["o"], name="body_mul")],
        "body",
        [helper.make_tensor_value_info("s", F, [3]), helper.make_tensor_value_info("x_t", F, [3]),
         helper.make_tensor_value_info("y_t", F, [3])],
        [helper.make_tensor_value_info("s_out", F, [3]), helper.make_tensor_value_info("o", F, [3])])
    g.nodes.append(helper.make_node("Scan", ["", g.input("s0", [2, 3]), xs, ys], ["s_final", "os"], name="Scan_0",
                                    body=body, num_scan_inputs=2, directions=[1, 0]))
    g.output("s_final", shape=[2, 3])
    g.output("os", shape=[2, 4, 3])


@case("model_local_function", opset=15)
def _(g):
    # A function of the model's own, called twice with different attributes;
    # it calls a second function and reads its caller's attribute by reference.
    alpha = helper.make_attribute("value_float", 0.0)
    alpha.ref_attr_name = "alpha"
    alpha_node = helper.make_node("Constant", [], ["a"], name="scale_alpha")
    alpha_node.attribute.extend([alpha])
    inner = helper.make_function("custom", "Shift", ["X"], ["Y"],
                                 [helper.make_node("Constant", [], ["one"], value_float=1.0),
                                  helper.make_node("Add", ["X", "one"], ["Y"])],
                                 [helper.make_opsetid("", 15)], [])
    outer = helper.make_function("custom", "ScaledShift", ["X"], ["Y"],
                                 [alpha_node,
                                  helper.make_node("Mul", ["X", "a"], ["m"]),
                                  helper.make_node("Shift", ["m"], ["Y"], domain="custom")],
                                 [helper.make_opsetid("", 15), helper.make_opsetid("custom", 1)], ["alpha"])
    g.functions += [inner, outer]
    x = g.input("x", [2, 3])
    y1 = g.node("ScaledShift", [x], ["y1"], domain="custom", alpha=2.0)
    y2 = g.node("ScaledShift", [y1], ["y2"], domain="custom", alpha=-0.5)
    g.output(y1, y2, shape=[2, 3])


@case("shape_empty_prefix", opset=13)
def _(g):
    # Shape arithmetic through an empty tensor, as ONNX's expanded layer norm
    # at axis 0 writes it: the shape's prefix before axis 0 joined to the rest.
    x = g.input("x", [2, 3, 4])
    shape = g.node("Shape", [x])
    prefix = g.node("Slice", [shape, g.const("zero", np.int64([0])), g.const("none", np.int64([0]))])
    rest = g.node("Slice", [shape, g.const("one", np.int64([1])), g.const("end", np.int64([3]))])
    joined = g.node("Concat", [prefix, g.const("six", np.int64([6])), rest, prefix], axis=0)
    g.output(g.node("Reshape", [g.node("Relu", [x]), g.node("Concat", [prefix, g.const("m", np.int64([-1]))], axis=0)]),
             shape=[24])
    g.output(g.node("Expand", [g.const("s", np.float32(1.5)), joined]), shape=[6, 3, 4])


@case("einsum_diagonal", opset=12)
def _(g):
    # Repeated letters take diagonals: a batched trace, and a diagonal used
    # in a contraction.
    a = g.input("a", [2, 3, 3])
    g.output(g.node("Einsum", [a], equation="...ii->...i"), shape=[2, 3])
    g.output(g.node("Einsum", [a], equation="bii->b"), shape=[2])
    g.output(g.node("Einsum", [g.input("m", [4, 3]), g.input("s", [3, 3])], equation="ij,jj->i"), shape=[4])


@case("reverse_sequence", opset=10)
def _(g):
    # Constant lengths, in both layouts: time-major (the default) and batch-major.
    g.output(g.node("ReverseSequence", [g.input("t", [4, 3, 2]), g.const("lt", np.int64([4, 1, 3]))]),
             g.node("ReverseSequence", [g.input("b", [2, 5, 3]), g.const("lb", np.int64([2, 5]))],
                    batch_axis=0, time_axis=1))


@case("microsoft_transformer_ops")
def _(g):
    # What ONNX Runtime's transformer optimizer writes into a BERT.
    g.microsoft = True
    x, skip = g.input("x", [2, 3, 8]), g.input("skip", [2, 3, 8])

    def ms(op, inputs, outputs, **attrs):
        g.nodes.append(helper.make_node(op, inputs, outputs, name=op + "_" + outputs[0], domain="com.microsoft",
                                        **attrs))
        return outputs[0]

    ln = ms("SkipLayerNormalization", [x, skip, g.weight("gamma", [8]), g.weight("beta", [8]),
                                       g.weight("bias", [8])], ["ln", "", "", "sum"], epsilon=1e-5)
    h = ms("FusedMatMul", [ln, g.weight("w", [6, 8])], ["mm"], transB=1, alpha=0.5)
    g.output(ms("FastGelu", [h, g.weight("fb", [6])], ["fg"]), ms("BiasGelu", [h, g.weight("bb", [6])], ["bg"]),
             ms("Gelu", [h], ["ge"]), shape=[2, 3, 6])
    g.output("sum", shape=[2, 3, 8])


@case("variadic_max_min_sum_mean")
def _(g):
    a, b, c = g.input("a", [2, 3]), g.input("b", [3]), g.input("c", [2, 1])
    g.output(g.node("Max", [a, b, c]), g.node("Min", [a, b]), g.node("Sum", [a, b, c]), g.node("Mean", [a, c]),
             g.node("Max", [a]))


@case("unary_math_set")
def _(g):
    x = g.input("x", [4, 7], low=-3, high=3)
    g.output(g.node("Ceil", [x]), g.node("Sin", [x]), g.node("Cos", [x]), g.node("Sign", [x]),
             g.node("Softplus", [x]), g.node("Softsign", [x]), g.node("Elu", [x], alpha=0.7),
             g.node("Selu", [x]), g.node("Celu", [x], alpha=1.5), g.node("ThresholdedRelu", [x], alpha=0.3))


@case("mish_gelu_opset20", opset=20)
def _(g):
    x = g.input("x", [3, 8], low=-4, high=4)
    g.output(g.node("Mish", [x]), g.node("Gelu", [x]), g.node("Gelu", [x], approximate="tanh"), shape=[3, 8])


@case("abs_floor_dropout_reduce_max")
def _(g):
    x = g.input("x", [3, 4, 5], low=-2, high=2)
    y = g.node("Dropout", [g.node("Floor", [g.node("Abs", [x])])])
    g.output(g.node("ReduceMax", [y], axes=[1], keepdims=1))


@case("empty_tensors", opset=13)
def _(g):
    # A decoder's first step: an empty cache joined to the new keys; a slice
    # past the end and a split with an empty part are empty outputs.
    kv = g.node("Concat", [g.input("past", [1, 2, 0, 4]), g.input("new", [1, 2, 3, 4])], axis=2)
    tail = g.node("Slice", [kv, g.const("s", np.array([5], np.int64)), g.const("e", np.array([9], np.int64)),
                            g.const("ax", np.array([2], np.int64))])
    a, b = g.node("Split", [kv, g.const("sp", np.array([3, 0], np.int64))], ["a", "b"], axis=2)
    g.output(g.node("Relu", [a]), b, tail)
    # A reshape copying an extent of 0, a concat of empty parts only, and an
    # empty initializer passed through.
    g.output(g.node("Reshape", ["past", g.const("to", np.array([0, 0, -1], np.int64))]),
             g.node("Concat", ["past", "past"], axis=1),
             g.node("Identity", [g.const("none", np.zeros((0, 3), np.float32))]))
    # Elementwise operators make empty outputs, broadcast and typed.
    g.output(g.node("Relu", [g.node("Add", ["past", g.const("bias", np.ones([2, 1, 4], np.float32))])]))
    g.output(g.node("Cast", ["past"], to=TensorProto.INT64), elem=TensorProto.INT64)
    g.output(g.node("Less", ["past", g.const("zero", np.float32(0))]), elem=TensorProto.BOOL)
    # A model-local function's body sees the empty tensor itself.
    g.functions.append(helper.make_function("custom", "Halve", ["X"], ["Y"],
                                            [helper.make_node("Constant", [], ["h"], value_float=0.5),
                                             helper.make_node("Mul", ["X", "h"], ["Y"])],
                                            [helper.make_opsetid("", 13)], []))
    g.output(g.node("Halve", ["past"], ["halved"], domain="custom"), shape=[1, 2, 0, 4])


@case("empty_reductions_and_matmul", opset=13)
def _(g):
    # A reduction of nothing is its identity (a mean's too is 0 in ONNX
    # Runtime), a product over an extent of 0 is zeros; where an output
    # extent is 0 the output is empty.
    x = g.input("x", [3, 0])
    for op in ("ReduceMax", "ReduceMin", "ReduceMean", "ReduceProd", "ReduceLogSumExp", "ReduceL2", "ReduceL1",
               "ReduceSumSquare", "ReduceLogSum"):
        g.output(g.node(op, [x], axes=[1], keepdims=0))
    g.output(g.node("ReduceMax", [x], keepdims=1))  # no axes: all of them
    g.output(g.node("ReduceSum", [x, g.const("axes", np.array([1], np.int64))], keepdims=1))
    g.output(g.node("ReduceSum", [x, g.const("first", np.array([0], np.int64))], keepdims=0), shape=[0])
    for dtype, elem in ((np.int32, TensorProto.INT32), (np.uint8, TensorProto.UINT8), (np.int64, TensorProto.INT64)):
        ints = g.input(f"ints{elem}", [0, 2], dtype=dtype)
        g.output(g.node("ReduceMax", [ints], axes=[0], keepdims=0),
                 g.node("ReduceMin", [ints], axes=[0], keepdims=0), elem=elem)
    # An empty axes input on a tensor with elements: every axis, or none.
    y = g.input("y", [2, 3])
    none = g.const("none", np.array([], np.int64))
    g.output(g.node("ReduceSum", [y, none], keepdims=0), shape=[])
    g.output(g.node("ReduceSum", [y, none], noop_with_empty_axes=1), shape=[2, 3])
    g.output(g.node("MatMul", [x, g.const("w", np.zeros((0, 4), np.float32))]))
    g.output(g.node("MatMul", [g.input("bx", [2, 3, 0]), g.input("by", [2, 0, 4])]))
    g.output(g.node("MatMul", [g.input("u", [0]), g.input("v", [0])]), shape=[])
    g.output(g.node("MatMul", [g.input("rows", [0, 3]), g.input("m", [3, 4])]), shape=[0, 4])


@case("nonzero_of_constants", opset=13)
def _(g):
    # NonZero folds where its input is known: a constant, a scalar (one
    # axis of extent 1, as ONNX Runtime takes it), an input fixed at import,
    # a mask with no non-zero value (an empty output).
    g.output(g.node("NonZero", [g.const("c", np.array([[0, 1.5, 0], [2, 0, -1]], np.float32))]),
             g.node("NonZero", [g.const("s", np.array(3, np.int32))]), elem=TensorProto.INT64)
    mask = g.input("mask", [2, 3, 2], 0, 2, dtype=np.int32)
    g.fixed = ["mask"]
    g.output(g.node("NonZero", [g.node("Cast", [mask], to=TensorProto.BOOL)]), elem=TensorProto.INT64)
    g.output(g.node("NonZero", [g.const("none", np.zeros([2, 2], np.float32))]), elem=TensorProto.INT64)
    g.output(g.node("NonZero", [g.const("empty", np.zeros([3, 0], np.float32))]), elem=TensorProto.INT64)
    g.output(g.node("NonZero", [g.input("none_given", [0, 2])]), elem=TensorProto.INT64)


@case("slice_backward_from_before_the_start")
def _(g):
    # ONNX clamps a backward walk's start into [0, extent - 1]: from index 0.
    g.output(g.node("Slice", [g.input("x", [3, 4]), g.const("s", np.array([-5], np.int64)),
                              g.const("e", np.array([-2**63], np.int64)), g.const("a", np.array([0], np.int64)),
                              g.const("st", np.array([-1], np.int64))]))


@case("dropout_training_at_ratio_zero")
def _(g):
    # Training mode drops nothing at ratio 0: the data and an all-true mask.
    y, mask = g.node("Dropout", [g.input("x", [3, 4, 5]), g.const("r", np.float32(0)),
                                 g.const("t", np.bool_(True))], ["y", "mask"], seed=0)
    g.output(y)
    g.output(mask, elem=TensorProto.BOOL)


@case("argmax_argmin")
def _(g):
    # Ties on purpose (rounded inputs): the first position, or the last.
    x = g.node("Floor", [g.node("Mul", [g.input("x", [3, 5, 4]), g.const("k", np.float32(2))])])
    g.output(g.node("ArgMax", [x], axis=1), g.node("ArgMin", [x], axis=-1, keepdims=0),
             g.node("ArgMax", [x], axis=2, select_last_index=1), g.node("ArgMin", [x], axis=0, select_last_index=1),
             elem=TensorProto.INT64)


@case("group_norm_opset21", opset=21)
def _(g):
    g.output(g.node("GroupNormalization", [g.input("x", [2, 6, 3, 4]), g.weight("s", [6]), g.weight("b", [6])],
                    num_groups=3, epsilon=1e-4), shape=[2, 6, 3, 4])


@case("group_norm_per_group_opset18", opset=18)
def _(g):
    g.output(g.node("GroupNormalization", [g.input("x", [1, 4, 5]), g.weight("s", [2]), g.weight("b", [2])],
                    num_groups=2), shape=[1, 4, 5])


@case("einsum_matmul_like")
def _(g):
    q, k = g.input("q", [2, 3, 4, 5]), g.input("k", [2, 3, 6, 5])
    g.output(g.node("Einsum", [q, k], equation="bhid,bhjd->bhij"))
    g.output(g.node("Einsum", [g.input("a", [4, 6]), g.input("b", [6, 3])], equation="ik, kj -> ji"))
    g.output(g.node("Einsum", [g.input("x", [3, 4, 5]), g.weight("w", [5, 7])], equation="bsd,de->bes"))
    g.output(g.node("Einsum", [g.input("t", [2, 3, 4])], equation="abc->cb"))


@case("lrn")
def _(g):
    x = g.input("x", [1, 6, 3, 4])
    g.output(g.node("LRN", [x], size=3, alpha=1e-3, beta=0.75, bias=2.0), g.node("LRN", [x], size=5))


@case("global_max_pool")
def _(g):
    g.output(g.node("GlobalMaxPool", [g.input("x", [2, 3, 5, 4])]))


# ---- opsets before 11 and after 17: the operators' other versions ---------------------

@case("slice_attrs_opset9", opset=9)
def _(g):
    g.output(g.node("Slice", [g.input("x", [3, 6, 5])], starts=[1, -4], ends=[3, 100], axes=[0, 1]))


@case("pad_attrs_opset10", opset=10)
def _(g):
    g.output(g.node("Pad", [g.input("x", [1, 2, 3, 3])], pads=[0, 0, 1, 2, 0, 0, 2, 0], value=0.25))


@case("upsample_scales_attr_opset7", opset=7)
def _(g):
    g.output(g.node("Upsample", [g.input("x", [1, 2, 3, 4])], scales=[1.0, 1.0, 2.0, 3.0], mode="nearest"))


@case("upsample_linear_opset9", opset=9)
def _(g):
    g.output(g.node("Upsample", [g.input("x", [1, 2, 3, 4]), g.const("sc", np.float32([1, 1, 2, 2]))],
                    mode="linear"))


@case("resize_scales_opset10", opset=10)
def _(g):
    g.output(g.node("Resize", [g.input("x", [1, 2, 3, 3]), g.const("sc", np.float32([1, 1, 2, 2]))],
                    mode="nearest"))


@case("batch_norm_conv_opset7", opset=7)
def _(g):
    y = g.node("Conv", [g.input("x", [1, 3, 6, 6]), g.weight("w", [4, 3, 3, 3])], pads=[1, 1, 1, 1])
    y = g.node("BatchNormalization", [y, g.weight("s", [4]), g.weight("b", [4]), g.weight("m", [4]),
                                      g.const("v", np.float32([0.5, 1.0, 2.0, 1.5]))], spatial=1)
    g.output(g.node("Clip", [g.node("Relu", [y])], min=0.0, max=0.8), shape=[1, 4, 6, 6])


@case("reduce_mean_axes_input_opset18", opset=18)
def _(g):
    g.output(g.node("ReduceMean", [g.input("x", [2, 3, 4]), g.const("ax", np.int64([-1]))], keepdims=0),
             shape=[2, 3])


@case("split_num_outputs_opset18", opset=18)
def _(g):
    a, b, c = g.node("Split", [g.input("x", [2, 8])], ["a", "b", "c"], axis=1, num_outputs=3)
    g.output(a, b, shape=[2, 3])
    g.output(c, shape=[2, 2])


@case("pad_axes_input_opset18", opset=18)
def _(g):
    g.output(g.node("Pad", [g.input("x", [1, 2, 3, 3]), g.const("p", np.int64([1, 0, 2, 1])), "",
                            g.const("ax", np.int64([2, 3]))]), shape=[1, 2, 6, 4])


@case("resize_axes_opset19", opset=19)
def _(g):
    g.output(g.node("Resize", [g.input("x", [1, 2, 3, 4]), "", g.const("sc", np.float32([2, 0.5]))],
                    mode="linear", axes=[2, 3]), shape=[1, 2, 6, 2])


@case("conv_relu_opset21", opset=21)
def _(g):
    g.output(g.node("Relu", [g.node("Conv", [g.input("x", [1, 2, 5, 5]), g.weight("w", [3, 2, 3, 3])])]),
             shape=[1, 3, 3, 3])


@case("identity_and_constant")
def _(g):
    k = g.node("Constant", [], ["k"], value=numpy_helper.from_array(np.float32([[1, 2, 3]]), "kv"))
    g.output(g.node("Add", [g.node("Identity", [g.input("x", [2, 3])]), k]))


@case("odd_output_name")
def _(g):
    # An output name that is no file name: `run --output-dir` makes one of it.
    g.output(g.node("Relu", [g.input("x", [3])], ["scores:0/final"]))


@case("colliding_output_names")
def _(g):
    # Two outputs whose names make one file name: `run --output-dir` keeps both.
    x = g.input("x", [3])
    g.output(g.node("Relu", [x], ["a/b"]), g.node("Neg", [x], ["a_b"]))


@case("cast_to_int32")
def _(g):
    g.output(g.node("Cast", [g.input("x", [2, 5], -10, 10)], to=TensorProto.INT32), elem=TensorProto.INT32)


@case("cast_roundtrip_float64")
def _(g):
    d = g.node("Cast", [g.input("x", [3, 3])], to=TensorProto.DOUBLE)
    g.output(g.node("Cast", [g.node("Mul", [d, d])], to=TensorProto.FLOAT))


@case("shape_subgraph_flatten")
def _(g):
    # What exporters emit for x.view(x.size(0), -1): folded when shapes are static.
    x = g.input("x", [2, 3, 4])
    n = g.node("Gather", [g.node("Shape", [x]), g.const("i0", np.int64(0))], axis=0)
    shape = g.node("Concat", [g.node("Unsqueeze", [n, g.const("ax", np.int64([0]))]),
                              g.const("m1", np.int64([-1]))], axis=0)
    g.output(g.node("Reshape", [x, shape]), shape=[2, 12])


@case("constant_of_shape_add")
def _(g):
    x = g.input("x", [2, 3])
    ones = g.node("ConstantOfShape", [g.node("Shape", [x])],
                  value=numpy_helper.from_array(np.float32([2.0]), "v"))
    g.output(g.node("Add", [x, ones]))


@case("reductions_derived", opset=13)
def _(g):
    x = g.input("x", [2, 3, 4], 0.1, 2)
    for op in ("ReduceProd", "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"):
        g.output(g.node(op, [x], axes=[1, -1], keepdims=int(op != "ReduceL2")))


@case("reductions_axes_input", opset=18)
def _(g):
    x = g.input("x", [3, 4, 2], -2, 2)
    g.output(g.node("ReduceLogSumExp", [x, g.const("axes", np.int64([0, 2]))], keepdims=0), shape=[4])
    g.output(g.node("ReduceProd", [x, g.const("axes2", np.int64([1]))]), shape=[3, 1, 2])


@case("nll_and_softmax_cross_entropy", opset=13)
def _(g):
    x = g.input("x", [3, 5, 2], -2, 2)
    target = g.const("t", np.int64([[0, 4], [2, 1], [3, 3]]))
    w = g.weight("w", [5])
    g.output(g.node("NegativeLogLikelihoodLoss", [x, target]), shape=[])
    g.output(g.node("NegativeLogLikelihoodLoss", [x, target, g.node("Abs", [w])], reduction="none", ignore_index=3))
    g.output(g.node("NegativeLogLikelihoodLoss", [x, target], reduction="sum"), shape=[])
    loss, log_prob = g.node("SoftmaxCrossEntropyLoss", [x, target], ["sce", "log_prob"], ignore_index=4)
    g.output(loss, shape=[])
    g.output(log_prob)


@case("shape_and_axes_given_as_inputs", opset=13)
def _(g):
    # As ONNX's own tests write them: fixed at import with --input-value.
    x = g.input("x", [2, 3, 4])
    shape = g.input("shape", [2], dtype=np.int64)
    g.data[-1] = np.int64([4, 6])
    axes = g.input("axes", [1], dtype=np.int64)
    g.data[-1] = np.int64([-1])
    g.fixed = ["shape", "axes"]
    g.output(g.node("Reshape", [x, shape]), shape=[4, 6])
    g.output(g.node("ReduceSum", [x, axes], keepdims=0), shape=[2, 3])


@case("hardmax_castlike_hyperbolic", opset=15)
def _(g):
    x = g.input("x", [2, 3, 4], -0.9, 0.9)
    g.output(g.node("Hardmax", [x], axis=1))
    g.output(g.node("CastLike", [x, g.const("like", np.float64([0]))]), elem=TensorProto.DOUBLE)
    for op in ("Sinh", "Cosh", "Tan", "Asinh", "Atanh"):
        g.output(g.node(op, [x]))
    g.output(g.node("Acosh", [g.node("Add", [g.node("Abs", [x]), g.const("one", np.float32(1.5))])]))


@case("hardmax_opset11", opset=11)
def _(g):
    g.output(g.node("Hardmax", [g.input("x", [2, 3, 4])], axis=1))


@case("mod_integer_and_fmod")
def _(g):
    a = g.input("a", [3, 4], -50, 50, dtype=np.int32)
    g.data[-1][0, :] = [7, -7, 7, -7]
    b = g.input("b", [4], 1, 9, dtype=np.int32)
    g.data[-1][:] = [3, 3, -3, -3]
    g.output(g.node("Mod", [a, b]), elem=TensorProto.INT32)
    g.output(g.node("Mod", [a, b], fmod=1), elem=TensorProto.INT32)
    x = g.input("x", [2, 5], -9, 9)
    g.output(g.node("Mod", [x, g.const("y", np.float32([2.5, -1.5, 3, 0.7, -4]))], fmod=1))


@case("trilu_upper_lower")
def _(g):
    x = g.input("x", [2, 4, 5])
    g.output(g.node("Trilu", [x]))
    g.output(g.node("Trilu", [x, g.const("k", np.int64(-1))], upper=0))
    g.output(g.node("Trilu", [x, g.const("k2", np.int64(2))], upper=1))


# ---- recurrent: LSTM, GRU, RNN --------------------------------------------------------

def recurrent_weights(g, gates, dirs, hidden, isize, bias=True):
    ws = [g.weight("W", [dirs, gates * hidden, isize]), g.weight("R", [dirs, gates * hidden, hidden])]
    return ws + ([g.weight("B", [dirs, 2 * gates * hidden], 0.2)] if bias else [""])


@case("lstm_forward")
def _(g):
    ys = g.node("LSTM", [g.input("x", [5, 2, 4])] + recurrent_weights(g, 4, 1, 3, 4),
                ["y", "y_h", "y_c"], hidden_size=3)
    g.output(*ys)


@case("lstm_bidirectional_states_lengths_peepholes")
def _(g):
    # Lengths known only at run time: 1 to 5 per batch entry.
    ins = [g.input("x", [5, 3, 4])] + recurrent_weights(g, 4, 2, 3, 4) + [
        g.input("lens", [3], low=1, high=5.99, dtype=np.int32),
        g.input("h0", [2, 3, 3]), g.input("c0", [2, 3, 3]), g.weight("P", [2, 9])]
    g.output(*g.node("LSTM", ins, ["y", "y_h", "y_c"], hidden_size=3, direction="bidirectional"))


def lstm_batch_first(g, layout):
    x = g.input("x", [2, 4, 3], -3, 3)
    ins = [x if layout else g.node("Transpose", [x], perm=[1, 0, 2])] + recurrent_weights(g, 4, 1, 5, 3)
    y, y_h, y_c = g.node("LSTM", ins, ["y0", "y_h0", "y_c0"], hidden_size=5, layout=layout, clip=1.5)
    if layout:
        g.output(g.node("Identity", [y], ["y"]), g.node("Identity", [y_h], ["y_h"]),
                 g.node("Identity", [y_c], ["y_c"]), shape=None)
        return
    g.output(g.node("Transpose", [y], ["y"], perm=[2, 0, 1, 3]), g.node("Transpose", [y_h], ["y_h"], perm=[1, 0, 2]),
             g.node("Transpose", [y_c], ["y_c"], perm=[1, 0, 2]))


# ONNX Runtime refuses layout 1 ("batchwise recurrent operations are not
# supported"): its reference is the same LSTM between transposes.
@case("lstm_batch_first_clip", opset=14, ort_reference="lstm_batch_first_clip_ref")
def _(g):
    lstm_batch_first(g, 1)


@case("lstm_batch_first_clip_ref", opset=14, seed_of="lstm_batch_first_clip")
def _(g):
    lstm_batch_first(g, 0)


@case("gru_bidirectional_linear_before_reset")
def _(g):
    ins = [g.input("x", [6, 2, 4])] + recurrent_weights(g, 3, 2, 4, 4) + ["", g.input("h0", [2, 2, 4])]
    g.output(*g.node("GRU", ins, ["y", "y_h"], hidden_size=4, direction="bidirectional",
                     linear_before_reset=1))


@case("gru_reverse_lengths")
def _(g):
    ins = [g.input("x", [4, 2, 3])] + recurrent_weights(g, 3, 1, 5, 3) + [g.const("lens", np.int32([4, 2]))]
    g.output(*g.node("GRU", ins, ["y", "y_h"], hidden_size=5, direction="reverse"))


@case("rnn_relu_and_tanh")
def _(g):
    x = g.input("x", [4, 2, 3])
    g.output(*g.node("RNN", [x] + recurrent_weights(g, 1, 2, 4, 3), ["y", "y_h"], hidden_size=4,
                     direction="bidirectional", activations=["Relu", "Tanh"]))
    g.output(g.node("RNN", [x, g.weight("W2", [1, 4, 3]), g.weight("R2", [1, 4, 4])], ["y2", "y2_h"],
                    hidden_size=4, activations=["HardSigmoid"], activation_alpha=[0.3],
                    activation_beta=[0.4])[0])


@case("lstm_input_forget")
def _(g):
    # Coupled gates: the forget gate is 1 - the input gate (and its peephole unused).
    ins = [g.input("x", [4, 2, 3])] + recurrent_weights(g, 4, 1, 5, 3) + ["", "", "", g.weight("P", [1, 15])]
    g.output(*g.node("LSTM", ins, ["y", "y_h", "y_c"], hidden_size=5, input_forget=1))


# ---- int8 and uint8: both forms ONNX Runtime's quantizer writes ----------------------
U8, I8 = TensorProto.UINT8, TensorProto.INT8


def lstm_quantized(g, name, w, per_column, zero_point=None):
    """An LSTM weight ([dirs, 4H, K]) as quantize_dynamic writes it for
    DynamicQuantizeLSTM: symmetric int8 (scale = max |w| / 127) per
    direction or per row, transposed to [dirs, K, 4H]; its scale and zero
    point, [dirs] or [dirs, 4H]. With `zero_point` (per direction): uint8,
    scale = max |w| / 120, around that zero point."""
    axes = (2,) if per_column else (1, 2)
    levels = 127 if zero_point is None else 120
    scale = (np.abs(w).max(axis=axes).astype(np.float64) / levels).astype(np.float32)
    q = np.round(w / scale.reshape(scale.shape + (1,) * len(axes)))
    if zero_point is None:
        q, zp = np.clip(q, -128, 127).astype(np.int8), np.zeros(scale.shape, np.int8)
    else:
        q = np.clip(q + np.reshape(zero_point, (-1, 1, 1)), 0, 255).astype(np.uint8)
        zp = np.uint8(zero_point)
    return g.const(name, q.transpose(0, 2, 1)), g.const(name + "_scale", scale), g.const(name + "_zp", zp)


@case("dynamic_quantize_lstm")
def _(g):
    # com.microsoft's DynamicQuantizeLSTM: the input and each step's state
    # quantized to uint8 at run time (the first step's zero state too), int8
    # weights with scales per direction (W) or per column (R). Batch 1:
    # with more, ONNX Runtime's answer depends on its thread count (each
    # thread's rows of the state get their own scale).
    g.microsoft = True
    dirs, hidden, isize, seq = 2, 6, 8, 5
    rw = lambda shape: (g.rng.standard_normal(shape) * 0.5).astype(np.float32)
    w, w_s, w_z = lstm_quantized(g, "W", rw([dirs, 4 * hidden, isize]), False)
    r, r_s, r_z = lstm_quantized(g, "R", rw([dirs, 4 * hidden, hidden]), True)
    ins = [g.input("x", [seq, 1, isize], -2, 2), w, r, g.weight("B", [dirs, 8 * hidden], 0.2), "",
           g.input("h0", [dirs, 1, hidden]), g.input("c0", [dirs, 1, hidden]), g.weight("P", [dirs, 3 * hidden]),
           w_s, w_z, r_s, r_z]
    g.nodes.append(helper.make_node("DynamicQuantizeLSTM", ins, ["y", "y_h", "y_c"], name="dqlstm",
                                    domain="com.microsoft", hidden_size=hidden, direction="bidirectional"))
    g.output("y", shape=[seq, dirs, 1, hidden])
    g.output("y_h", "y_c", shape=[dirs, 1, hidden])
    w2, w2_s, w2_z = lstm_quantized(g, "W2", rw([1, 64, isize]), True)
    r2, r2_s, r2_z = lstm_quantized(g, "R2", rw([1, 64, 16]), False)
    g.nodes.append(helper.make_node("DynamicQuantizeLSTM", ["x", w2, r2, "", "", "", "", "", w2_s, w2_z, r2_s, r2_z],
                                    ["y2"], name="dqlstm2", domain="com.microsoft", hidden_size=16))
    g.output("y2", shape=[seq, 1, 1, 16])
    # uint8 weights about a zero point, reverse, clip, coupled gates, and a
    # sequence length (3 of 5): ONNX Runtime takes the input's range over
    # the first 3 steps only (the last two are made wider, so that it shows).
    g.data[0][3:] *= 4
    w3, w3_s, w3_z = lstm_quantized(g, "W3", rw([1, 20, isize]), False, [131])
    r3, r3_s, r3_z = lstm_quantized(g, "R3", rw([1, 20, 5]), False, [97])
    ins = ["x", w3, r3, g.weight("B3", [1, 40], 0.2), g.const("lens", np.int32([3])), "", "", "",
           w3_s, w3_z, r3_s, r3_z]
    g.nodes.append(helper.make_node("DynamicQuantizeLSTM", ins, ["y3", "y3_h"], name="dqlstm3",
                                    domain="com.microsoft", hidden_size=5, direction="reverse", clip=0.9,
                                    input_forget=1))
    g.output("y3", shape=[seq, 1, 1, 5])
    g.output("y3_h", shape=[1, 1, 5])


@case("microsoft_integer_matmuls")
def _(g):
    # What ONNX Runtime's optimizer writes for quantize_dynamic's MatMuls
    # when it saves the model: DynamicQuantizeMatMul (per-column weight
    # scales and zero points, a bias) and MatMulIntegerToFloat (A's scale as
    # [1], zero points on both sides, B's per column).
    g.microsoft = True
    x = g.input("x", [2, 3, 12], -2, 3)
    w = g.const("w", g.rng.integers(-127, 128, [12, 6]).astype(np.int8))
    g.nodes.append(helper.make_node("DynamicQuantizeMatMul", [x, w, g.const("ws", g.rng.uniform(0.01, 0.03, [6]).astype(np.float32)),
                                                              g.const("wz", np.int8([3, -2, 0, 5, -7, 1])), g.weight("bias", [6])],
                                    ["dq"], name="dqmm", domain="com.microsoft"))
    a = g.input("a", [4, 12], 0, 255.99, dtype=np.uint8)
    b = g.const("b", g.rng.integers(0, 256, [12, 5]).astype(np.uint8))
    g.nodes.append(helper.make_node("MatMulIntegerToFloat", [a, b, g.const("as", np.float32([0.02])),
                                                             g.const("bs", np.float32(0.01)), g.const("az", np.uint8(7)),
                                                             g.const("bz", np.uint8([131, 0, 255, 9, 128])),
                                                             g.weight("bias2", [5])],
                                    ["mi"], name="mitf", domain="com.microsoft"))
    g.output("dq", shape=[2, 3, 6])
    g.output("mi", shape=[4, 5])


def microsoft_node(g, op, inputs, elem=None, shape=None, **attrs):
    """Adds a com.microsoft node with one output; with `elem`, also as a model output."""
    out = f"{op.lower()}_{len(g.nodes)}"
    g.microsoft = True
    g.nodes.append(helper.make_node(op, inputs, [out], name=f"{op}_{len(g.nodes)}",
                                    domain="com.microsoft", **attrs))
    if elem is not None:
        g.output(out, elem=elem, shape=shape)
    return out


def quantized_input(g, name, shape, dtype, scale, zero_point):
    """Data of `dtype` over its whole range, with its scale and zero point as constants."""
    low, high = (0, 255.99) if dtype == np.uint8 else (-128, 127.99)
    return [g.input(name, shape, low, high, dtype=dtype), g.const(name + "_s", np.float32(scale)),
            g.const(name + "_zp", dtype(zero_point))]


@case("microsoft_qlinear_elementwise")
def _(g):
    # The QOperator form's elementwise operators, uint8 and int8, with
    # broadcasting and a left-out output zero point.
    a = quantized_input(g, "a", [2, 3, 4, 5], np.uint8, 0.031, 121)
    b = quantized_input(g, "b", [1, 3, 1, 5], np.uint8, 0.017, 90)
    c = [g.const("c_s", np.float32(0.043)), g.const("c_zp", np.uint8(113))]
    microsoft_node(g, "QLinearAdd", a + b + c, U8, [2, 3, 4, 5])
    microsoft_node(g, "QLinearMul", a + b + [g.const("m_s", np.float32(0.21)), g.const("m_zp", np.uint8(7))],
                   U8, [2, 3, 4, 5])
    s = quantized_input(g, "s", [3, 7], np.int8, 0.05, -3)
    # (ONNX Runtime refuses a left-out zero point before other inputs.)
    t = [g.input("t", [7], -128, 127.99, dtype=np.int8), g.const("t_s", np.float32(0.02)),
         g.const("t_zp", np.int8(-9))]
    microsoft_node(g, "QLinearAdd", s + t + [g.const("st_s", np.float32(0.06))], I8, [3, 7])
    microsoft_node(g, "QLinearMul", s + t + [g.const("sm_s", np.float32(0.04)), g.const("sm_zp", np.int8(-5))],
                   I8, [3, 7])
    y = [g.const("y_s", np.float32(0.0041)), g.const("y_zp", np.uint8(3))]
    microsoft_node(g, "QLinearSigmoid", a + y, U8, [2, 3, 4, 5])
    microsoft_node(g, "QLinearLeakyRelu", s + [g.const("l_s", np.float32(0.03)), g.const("l_zp", np.int8(-60))],
                   I8, [3, 7], alpha=0.2)
    cond = g.input("cond", [3, 1], 0, 2)
    g.data[-1] = np.array([[True], [False], [True]])
    g.inputs[-1] = helper.make_tensor_value_info("cond", TensorProto.BOOL, [3, 1])
    microsoft_node(g, "QLinearWhere", [cond] + s + t[:2] + [g.const("t_zp2", np.int8(4)),
                                                            g.const("w_s", np.float32(0.045)), g.const("w_zp", np.int8(2))],
                   I8, [3, 7])


@case("microsoft_qlinear_pools")
def _(g):
    x = quantized_input(g, "x", [2, 4, 6, 7], np.uint8, 0.02, 128)
    y = [g.const("y_s", np.float32(0.015)), g.const("y_zp", np.uint8(120))]
    microsoft_node(g, "QLinearGlobalAveragePool", x + y, U8, [2, 4, 1, 1])
    xl = quantized_input(g, "xl", [1, 5, 3, 6], np.int8, 0.03, -7)
    microsoft_node(g, "QLinearGlobalAveragePool", xl + [g.const("yl_s", np.float32(0.01)),
                                                        g.const("yl_zp", np.int8(9))],
                   I8, [1, 1, 1, 6], channels_last=1)
    microsoft_node(g, "QLinearAveragePool", x + y, U8, [2, 4, 3, 4], kernel_shape=[3, 3], strides=[2, 2],
                   pads=[1, 1, 1, 1])
    microsoft_node(g, "QLinearAveragePool", x + y, U8, [2, 4, 3, 4], kernel_shape=[2, 3], strides=[2, 2],
                   ceil_mode=1, count_include_pad=1, pads=[0, 1, 0, 0])
    microsoft_node(g, "QLinearAveragePool", xl + [g.const("yp_s", np.float32(0.02))], I8, [1, 4, 2, 6],
                   kernel_shape=[2, 2], channels_last=1)
    # A window over the whole image: ONNX Runtime's integer global average.
    microsoft_node(g, "QLinearAveragePool", x + y, U8, [2, 4, 1, 1], kernel_shape=[6, 7])


@case("microsoft_qlinear_concat_softmax")
def _(g):
    a = quantized_input(g, "a", [2, 3, 4], np.uint8, 0.02, 128)
    b = quantized_input(g, "b", [2, 5, 4], np.uint8, 0.05, 10)
    same = [g.input("c", [2, 1, 4], 0, 255.99, dtype=np.uint8), g.const("c_s", np.float32(0.03)),
            g.const("c_zp", np.uint8(100))]
    microsoft_node(g, "QLinearConcat", [same[1], same[2]] + a + b + same, U8, [2, 9, 4], axis=1)
    x = quantized_input(g, "x", [2, 3, 6], np.uint8, 0.05, 128)
    microsoft_node(g, "QLinearSoftmax", x + [g.const("p_s", np.float32(1 / 256)), g.const("p_zp", np.uint8(0))],
                   U8, [2, 3, 6], opset=13)
    # Before opset 13: normalised over everything from the axis on.
    microsoft_node(g, "QLinearSoftmax", x + [g.const("p_s1", np.float32(1 / 256)), g.const("p_zp1", np.uint8(0))],
                   U8, [2, 3, 6], opset=11, axis=1)
    xs = quantized_input(g, "xs", [4, 5], np.int8, 0.04, 0)
    microsoft_node(g, "QLinearSoftmax", xs + [g.const("ps_s", np.float32(1 / 256)), g.const("ps_zp", np.int8(-128))],
                   I8, [4, 5], opset=13)


@case("microsoft_qgemm")
def _(g):
    # uint8 by int8 with B per column and transposed, an int32 C, alpha; the
    # float output ONNX Runtime gives without y_scale; int8 by int8.
    a = quantized_input(g, "a", [3, 10], np.uint8, 0.02, 130)
    bt = g.const("bt", g.rng.integers(-127, 128, [6, 10]).astype(np.int8))
    b = [bt, g.const("b_s", g.rng.uniform(0.002, 0.004, [6]).astype(np.float32)), g.const("b_zp", np.zeros(6, np.int8))]
    c = g.const("c", g.rng.integers(-2000, 2000, [6]).astype(np.int32))
    microsoft_node(g, "QGemm", a + b + [c, g.const("y_s", np.float32(0.03)), g.const("y_zp", np.uint8(125))],
                   U8, [3, 6], transB=1, alpha=0.7)
    microsoft_node(g, "QGemm", a + b + [c], F, [3, 6], transB=1)
    s = quantized_input(g, "s", [10, 4], np.int8, 0.03, 0)
    k = [g.const("k", g.rng.integers(-127, 128, [10, 5]).astype(np.int8)), g.const("k_s", np.float32(0.003)),
         g.const("k_zp", np.int8(0))]
    microsoft_node(g, "QGemm", s + k + ["", g.const("z_s", np.float32(0.02)), g.const("z_zp", np.int8(-3))],
                   I8, [4, 5], transA=1)


@case("qoperator_direct_8bit")
def _(g):
    # What the QOperator form leaves on the bytes: MaxPool, Resize, Pad with
    # the zero point, Transpose, Reshape, Split, Squeeze and Unsqueeze.
    x = g.input("x", [1, 3, 6, 6], 0, 255.99, dtype=np.uint8)
    g.output(g.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), elem=U8)
    g.output(g.node("Resize", [x, "", g.const("scales", np.float32([1, 1, 2, 2]))], mode="nearest"), elem=U8)
    g.output(g.node("Pad", [x, g.const("pads", np.int64([0, 0, 1, 2, 0, 0, 2, 1])), g.const("pad_value", np.uint8(128))]),
             elem=U8)
    t = g.node("Transpose", [x], perm=[0, 2, 3, 1])
    r = g.node("Reshape", [t, g.const("shape", np.int64([1, 36, 3]))])
    parts = g.node("Split", [r, g.const("split", np.int64([12, 24]))], ["p0", "p1"], axis=1)
    g.output(g.node("Unsqueeze", [g.node("Squeeze", ["p0", g.const("axes", np.int64([0]))]),
                                  g.const("axes1", np.int64([1]))]), elem=U8)
    g.output("p1", elem=U8)


@case("resize_uint8_linear")
def _(g):
    # A linear resize of bytes: ONNX Runtime computes in float32 and
    # truncates. Where that value is within an ulp of an integer, our
    # compiler's fused multiply-adds may truncate it to the integer on the
    # other side: compared as float, one step apart at most.
    x = g.input("x", [1, 3, 6, 6], 0, 255.99, dtype=np.uint8)
    y = g.node("Resize", [x, "", g.const("scales", np.float32([1, 1, 1.5, 1.5]))], mode="linear")
    g.output(g.node("Cast", [y], to=F))
    g.atol = 1.0

@case("dynamic_quantize_zeros")
def _(g):
    # All zeros: ONNX Runtime's scale is 1 (and its zero point 0).
    y, s, zp = g.node("DynamicQuantizeLinear", [g.input("x", [2, 3])], ["y", "y_scale", "y_zp"])
    g.data[-1] = np.zeros([2, 3], np.float32)
    g.output(y, "y_zp", elem=U8)
    g.output(s)


@case("quantize_dequantize_linear")
def _(g):
    x = g.input("x", [2, 3, 4, 4], -2, 2)
    q8 = g.node("QuantizeLinear", [x, g.const("s", np.float32(0.015)), g.const("zp", np.uint8(128))])
    qs = g.node("QuantizeLinear", [x, g.const("sc", np.float32([0.01, 0.02, 0.03])),
                                   g.const("zpc", np.int8([0, -3, 5]))], axis=1)
    g.output(q8, elem=U8)
    g.output(qs, elem=I8)
    g.output(g.node("DequantizeLinear", [q8, g.const("s2", np.float32(0.015)), g.const("zp2", np.uint8(128))]))
    g.output(g.node("DequantizeLinear", [qs, g.const("sc2", np.float32([0.01, 0.02, 0.03])),
                                         g.const("zpc2", np.int8([0, -3, 5]))], axis=1))
    bias = g.const("bias", np.int32([-300, 7, 123456]))
    g.output(g.node("DequantizeLinear", [bias, g.const("bs", np.float32([1e-4, 2e-4, 3e-4]))], axis=0))
    # A vector with one scale: the default axis 1 is past its rank and means nothing.
    v = g.input("v", [5], dtype=np.uint8)
    g.data[-1] = np.uint8([0, 3, 128, 200, 255])
    g.output(g.node("DequantizeLinear", [v, g.const("vs", np.float32(0.5)), g.const("vz", np.uint8(128))]))


@case("dynamic_quantize_matmul_integer")
def _(g):
    # What quantize_dynamic writes for a MatMul: the activations quantized
    # at run time, int8 weights, an int32 product scaled back.
    y, s, zp = g.node("DynamicQuantizeLinear", [g.input("x", [2, 5, 16], -3, 2)], ["y", "y_scale", "y_zp"])
    w = g.const("w", g.rng.integers(-127, 128, [16, 6]).astype(np.int8))
    acc = g.node("MatMulInteger", [y, w, zp, g.const("wzp", np.int8(0))], ["acc"])
    g.output(y, "y_zp", elem=U8)
    g.output(s)
    g.output(acc, elem=TensorProto.INT32)
    # Per-column weight zero points too (ONNX Runtime refuses per-row ones for A).
    a = g.input("a", [4, 7], 0, 255.99, dtype=np.uint8)
    b = g.const("b", g.rng.integers(0, 256, [7, 3]).astype(np.uint8))
    g.output(g.node("MatMulInteger", [a, b, g.const("azp", np.uint8(3)),
                                      g.const("bzp", np.uint8([9, 0, 200]))], ["acc2"]), elem=TensorProto.INT32)


@case("dynamic_quantize_on_words")
def _(g):
    # Zero points known only at run time, on VNNI words (integer_matmul_as_conv2d,
    # int8_conv2d_words): a batched MatMulInteger and a 1x1 ConvInteger after a
    # DynamicQuantizeLinear, each scaled back as quantize_dynamic writes it;
    # padded ConvIntegers; MatMulInteger of int8 data by an int8 zero point
    # that is a graph input.
    x = g.input("x", [1, 12, 6, 5], -2, 3)
    q, s, zp = g.node("DynamicQuantizeLinear", [x], ["q", "q_scale", "q_zp"])
    w = g.const("w", g.rng.integers(-127, 128, [5, 8]).astype(np.int8))
    ws = g.const("ws", np.float32(0.02))
    scales = g.node("Mul", [s, ws])
    acc = g.node("MatMulInteger", [q, w, zp, g.const("wzp", np.int8(0))])
    g.output(g.node("Mul", [g.node("Cast", [acc], to=F), scales]))
    k1 = g.const("k1", g.rng.integers(-127, 128, [7, 12, 1, 1]).astype(np.int8))
    conv = g.node("ConvInteger", [q, k1, zp])
    g.output(g.node("Mul", [g.node("Cast", [conv], to=F), scales]))
    # Padded: the padding holds the zero point, here below and above 128.
    k3 = g.const("k3", g.rng.integers(-127, 128, [4, 12, 3, 3]).astype(np.int8))
    g.output(g.node("ConvInteger", [q, k3, zp], pads=[1, 1, 1, 1]), elem=TensorProto.INT32)
    q2, _, zp2 = g.node("DynamicQuantizeLinear", [g.input("x2", [1, 12, 6, 5], -3, 1)],
                        ["q2", "q2_scale", "q2_zp"])
    g.output(g.node("ConvInteger", [q2, k3, zp2], pads=[2, 1, 0, 1]), elem=TensorProto.INT32)
    a = g.input("a", [2, 3, 9], -128, 127.99, dtype=np.int8)
    azp = g.input("azp", [], -128, 127.99, dtype=np.int8)
    b = g.const("b", g.rng.integers(-128, 128, [9, 6]).astype(np.int8))
    g.output(g.node("MatMulInteger", [a, b, azp]), elem=TensorProto.INT32)


@case("integer_conv_patches")
def _(g):
    # Few channels over a wide window (an STFT's one channel; an image's
    # three): 1x1 convolutions over the patches (integer_conv2d_as_patches).
    x = g.input("x", [1, 1, 200], 0, 255.99, dtype=np.uint8)
    w = g.const("w", g.rng.integers(-127, 128, [10, 1, 32]).astype(np.int8))
    g.output(g.node("ConvInteger", [x, w, g.const("xzp", np.uint8(128))], strides=[16]), elem=TensorProto.INT32)
    image = g.input("image", [1, 3, 9, 8], 0, 255.99, dtype=np.uint8)
    k = g.const("k", g.rng.integers(-127, 128, [5, 3, 3, 3]).astype(np.int8))
    ins = [image, g.const("is", np.float32(0.02)), g.const("izp", np.uint8(120)), k,
           g.const("ks", np.float32(0.004)), g.const("kzp", np.int8(0)), g.const("ys", np.float32(0.2)),
           g.const("yzp", np.uint8(100))]
    g.output(g.node("QLinearConv", ins, strides=[2, 1]), elem=U8)


@case("conv_integer")
def _(g):
    x = g.input("x", [1, 3, 7, 7], 0, 255.99, dtype=np.uint8)
    w = g.const("w", g.rng.integers(0, 256, [4, 3, 3, 3]).astype(np.uint8))
    g.output(g.node("ConvInteger", [x, w, g.const("xzp", np.uint8(120)), g.const("wzp", np.uint8(131))],
                    pads=[1, 1, 1, 1], strides=[2, 2]), elem=TensorProto.INT32)


@case("qlinear_conv_per_channel")
def _(g):
    x = g.input("x", [1, 4, 8, 8], 0, 255.99, dtype=np.uint8)
    w = g.const("w", g.rng.integers(-127, 128, [6, 2, 3, 3]).astype(np.int8))
    ins = [x, g.const("xs", np.float32(0.02)), g.const("xzp", np.uint8(128)), w,
           g.const("ws", np.float32([0.003, 0.004, 0.002, 0.005, 0.001, 0.003])), g.const("wzp", np.int8([0] * 6)),
           g.const("ys", np.float32(0.05)), g.const("yzp", np.uint8(100)),
           g.const("b", g.rng.integers(-2000, 2000, [6]).astype(np.int32))]
    g.output(g.node("QLinearConv", ins, group=2, pads=[1, 1, 1, 1]), elem=U8)


@case("conv_integer_int8_words")
def _(g):
    # Ungrouped with an int8 kernel: computed on words of four channels
    # (int8_conv2d_words); 6 channels leave half a word, int8 data moves to uint8.
    x = g.input("x", [1, 6, 9, 8], -128, 127.99, dtype=np.int8)
    w = g.const("w", g.rng.integers(-128, 128, [5, 6, 3, 2]).astype(np.int8))
    g.output(g.node("ConvInteger", [x, w, g.const("xzp", np.int8(-7))], pads=[2, 0, 1, 1],
                    strides=[2, 1], dilations=[1, 2]), elem=TensorProto.INT32)


@case("qlinear_conv_words")
def _(g):
    x = g.input("x", [1, 8, 7, 7], 0, 255.99, dtype=np.uint8)
    w = g.const("w", g.rng.integers(-127, 128, [16, 8, 3, 3]).astype(np.int8))
    ins = [x, g.const("xs", np.float32(0.02)), g.const("xzp", np.uint8(131)), w,
           g.const("ws", g.rng.uniform(0.001, 0.005, [16]).astype(np.float32)),
           g.const("wzp", np.int8([0] * 16)), g.const("ys", np.float32(0.3)), g.const("yzp", np.uint8(90)),
           g.const("b", g.rng.integers(-2000, 2000, [16]).astype(np.int32))]
    g.output(g.node("QLinearConv", ins, pads=[1, 1, 1, 1]), elem=U8)


@case("qlinear_matmul")
def _(g):
    a = g.input("a", [2, 3, 8], 0, 255.99, dtype=np.uint8)
    b = g.const("b", g.rng.integers(-127, 128, [8, 5]).astype(np.int8))
    ins = [a, g.const("as", np.float32(0.03)), g.const("azp", np.uint8(127)), b, g.const("bs", np.float32(0.01)),
           g.const("bzp", np.int8(0)), g.const("ys", np.float32(0.08)), g.const("yzp", np.uint8(128))]
    g.output(g.node("QLinearMatMul", ins), elem=U8)


@case("microsoft_bert_fusions")
def _(g):
    # What ONNX Runtime's transformer optimizer writes for a BERT's
    # embeddings and self-attention: EmbedLayerNormalization (word,
    # position and segment embeddings, layer norm, the mask's count of
    # ones; without segments and mask, given positions, its default
    # epsilon) and Attention with a raw mask (open where > 0), with the
    # lengths it gives (right padding), with ends and starts, causal, and
    # with a narrower V.
    g.microsoft = True

    def ms(op, inputs, outputs, **attrs):
        g.nodes.append(helper.make_node(op, inputs, outputs, name=op + "_" + outputs[0], domain="com.microsoft",
                                        **attrs))
        return outputs[0]

    b, s, d, heads = 2, 5, 16, 4
    ids = g.input("ids", [b, s], 0, 29.99, dtype=np.int32)
    seg = g.input("seg", [b, s], 0, 1.99, dtype=np.int32)
    mask = g.input("mask", [b, s], dtype=np.int32)
    g.data[-1] = np.int32([[1, 1, 1, 0, -1], [1, 1, 2, 1, 1]])
    emb, lengths = "emb", "lengths"
    ms("EmbedLayerNormalization", [ids, seg, g.weight("word", [30, d]), g.weight("pos", [8, d]),
                                                  g.weight("segment", [2, d]), g.weight("gamma", [d]),
                                                  g.weight("beta", [d]), mask], ["emb", "lengths"], epsilon=1e-5)
    qkv = [g.weight("qkv", [d, 3 * d], 0.3), g.weight("qkv_bias", [3 * d], 0.1)]
    g.output(emb, ms("Attention", [emb] + qkv + [mask], ["raw"], num_heads=heads),
             ms("Attention", [emb] + qkv + [lengths], ["right_padded"], num_heads=heads),
             ms("Attention", [emb] + qkv, ["causal"], num_heads=heads, unidirectional=1, scale=0.3),
             ms("Attention", [emb] + qkv + [g.const("ends_starts_mask", np.int32([5, 4, 1, 0]))], ["ends_starts"],
                num_heads=heads, mask_filter_value=-3.0),
             shape=[b, s, d])
    g.output(ms("Attention", [emb, g.weight("qkv_v8", [d, 40], 0.3), g.weight("bias_v8", [40], 0.1), mask],
                ["v8"], num_heads=heads, qkv_hidden_sizes=[16, 16, 8]), shape=[b, s, 8])
    g.output(lengths, elem=TensorProto.INT32, shape=[b])
    # A [B, S, S] mask (query rows, key columns), [B, 1] (no mask), causal with padding.
    rows = np.int32([[[1, 1, 0, 0, 1], [0, 1, 1, 1, 1], [1, 0, 1, 0, 1], [1, 1, 1, 1, 0], [0, 0, 0, 1, 1]]] * 2)
    g.output(ms("Attention", [emb] + qkv + [g.const("mask3", rows)], ["per_query"], num_heads=heads),
             ms("Attention", [emb] + qkv + [g.const("mask_b1", np.int32([[0], [0]]))], ["b1"], num_heads=heads),
             ms("Attention", [emb] + qkv + [mask], ["causal_padded"], num_heads=heads, unidirectional=1),
             shape=[b, s, d])
    # No segment ids (the segment table's row 0 is added), positions given
    # at run time, no mask (zeros), ONNX Runtime's default epsilon (1e-12;
    # the tiny tables make 1e-5 show).
    positions = g.input("positions", [1, s], 0, 7.99, dtype=np.int32)
    ms("EmbedLayerNormalization", [ids, "", g.weight("word_tiny", [30, d], 1e-3), g.weight("pos_tiny", [8, d], 1e-3),
                                   g.weight("segment_tiny", [2, d], 1e-3), "gamma", "beta", "", positions],
       ["emb2", "zeros", "sum2"])
    g.output("emb2", "sum2", shape=[b, s, d])
    g.output("zeros", elem=TensorProto.INT32, shape=[b])
    g.output(ms("SkipLayerNormalization", ["sum2", "sum2", "gamma", "beta"], ["skip_default_epsilon"]),
             shape=[b, s, d])


@case("qdq_conv_relu")
def _(g):
    # The QDQ form: float operators between QuantizeLinear/DequantizeLinear
    # pairs; ONNX Runtime fuses them into integer kernels, and so do we for
    # the Conv (integer_qdq_conv), but it requantizes in one step. A result
    # may land on the other side of a rounding step: one quantum (y's
    # scale) apart is allowed.
    g.atol = 0.04
    x = g.input("x", [1, 3, 8, 8], -1, 1)
    xq = g.node("QuantizeLinear", [x, g.const("xs", np.float32(0.008)), g.const("xzp", np.uint8(128))])
    xd = g.node("DequantizeLinear", [xq, g.const("xs_d", np.float32(0.008)), g.const("xzp_d", np.uint8(128))])
    ws = np.float32([0.004, 0.006, 0.005, 0.003])
    wq = g.const("wq", g.rng.integers(-127, 128, [4, 3, 3, 3]).astype(np.int8))
    wd = g.node("DequantizeLinear", [wq, g.const("ws", ws), g.const("wzp", np.int8([0] * 4))], axis=0)
    bq = g.const("bq", g.rng.integers(-500, 500, [4]).astype(np.int32))
    bd = g.node("DequantizeLinear", [bq, g.const("bs", (np.float32(0.008) * ws).astype(np.float32))], axis=0)
    y = g.node("Relu", [g.node("Conv", [xd, wd, bd], pads=[1, 1, 1, 1])])
    yq = g.node("QuantizeLinear", [y, g.const("ys", np.float32(0.04)), g.const("yzp", np.uint8(0))])
    g.output(g.node("DequantizeLinear", [yq, g.const("ys_d", np.float32(0.04)), g.const("yzp_d", np.uint8(0))]))


@case("qdq_matmul")
def _(g):
    # MatMul in QDQ form (a transformer quantized by ONNX Runtime): an integer
    # product here too (integer_qdq_matmul; QuantizedProductsComputeOnWords
    # checks it is), per-column weight scales and one per tensor. The
    # requantized output may be a quantum (y's scale) apart, which the
    # case's tolerance allows for both outputs.
    g.atol = 0.05
    x = g.input("x", [2, 5, 12], -1, 1)
    xq = g.node("QuantizeLinear", [x, g.const("xs", np.float32(0.008)), g.const("xzp", np.uint8(131))])
    xd = g.node("DequantizeLinear", [xq, g.const("xs_d", np.float32(0.008)), g.const("xzp_d", np.uint8(131))])
    ws = g.rng.uniform(0.002, 0.006, [6]).astype(np.float32)
    wq = g.const("wq", g.rng.integers(-127, 128, [12, 6]).astype(np.int8))
    wd = g.node("DequantizeLinear", [wq, g.const("ws", ws), g.const("wzp", np.int8([0] * 6))], axis=1)
    y = g.node("MatMul", [xd, wd])
    yq = g.node("QuantizeLinear", [y, g.const("ys", np.float32(0.05)), g.const("yzp", np.uint8(128))])
    g.output(g.node("DequantizeLinear", [yq, g.const("ys_d", np.float32(0.05)), g.const("yzp_d", np.uint8(128))]))
    vq = g.const("vq", g.rng.integers(-127, 128, [12, 7]).astype(np.int8))
    vd = g.node("DequantizeLinear", [vq, g.const("vs", np.float32(0.004)), g.const("vzp", np.int8(0))])
    g.output(g.node("MatMul", [xd, vd]))


@case("qdq_depthwise_conv")
def _(g):
    # A depthwise and a grouped convolution in QDQ form, as a MobileNet's
    # quantized by ONNX Runtime: integer convolutions here too.
    g.atol = 0.04
    x = g.input("x", [1, 8, 9, 9], -1, 1)
    xq = g.node("QuantizeLinear", [x, g.const("xs", np.float32(0.008)), g.const("xzp", np.uint8(120))])
    xd = g.node("DequantizeLinear", [xq, g.const("xs_d", np.float32(0.008)), g.const("xzp_d", np.uint8(120))])
    for name, groups, stride in (("dw", 8, 2), ("grouped", 2, 1)):
        ws = np.linspace(0.003, 0.006, 8).astype(np.float32)
        wq = g.const(name + "_wq", g.rng.integers(-127, 128, [8, 8 // groups, 3, 3]).astype(np.int8))
        wd = g.node("DequantizeLinear", [wq, g.const(name + "_ws", ws), g.const(name + "_wzp", np.int8([0] * 8))],
                    axis=0)
        bq = g.const(name + "_bq", g.rng.integers(-500, 500, [8]).astype(np.int32))
        bd = g.node("DequantizeLinear", [bq, g.const(name + "_bs", (np.float32(0.008) * ws).astype(np.float32))],
                    axis=0)
        y = g.node("Clip", [g.node("Conv", [xd, wd, bd], pads=[1, 1, 1, 1], group=groups, strides=[stride, stride]),
                            g.const(name + "_lo", np.float32(0)), g.const(name + "_hi", np.float32(6))])
        yq = g.node("QuantizeLinear", [y, g.const(name + "_ys", np.float32(0.04)), g.const(name + "_yzp", np.uint8(0))])
        g.output(g.node("DequantizeLinear", [yq, g.const(name + "_ys_d", np.float32(0.04)),
                                             g.const(name + "_yzp_d", np.uint8(0))]))


@case("round_half_even")
def _(g):
    x = g.input("x", [12])
    g.data[0] = np.float32([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -0.51, 3.7, -3.2, 1e6 + 0.5, 0.0])
    g.output(g.node("Round", [x]))


# ---- float16: storage in half, sums in float32 --------------------------------------
# Each has a twin NAME_wide computing the same values (half weights and inputs
# converted exactly) in float32, the reference our half outputs are measured
# against in ulps.

H = TensorProto.FLOAT16
h16 = np.float16


@case("half_conv_wide_reduction")
def _(g):
    # 576 products per output, as in a real layer: summed in half, most
    # outputs would be more than an ulp off.
    g.wide_twin = True
    g.output(g.node("Conv", [g.input("x", [1, 64, 10, 10], dtype=h16), g.weight("w", [32, 64, 3, 3], 0.1, h16),
                             g.weight("b", [32], dtype=h16)], pads=[1, 1, 1, 1]), elem=H)


@case("half_depthwise_and_pool")
def _(g):
    # Each output is one operator on the inputs, so the wide twin differs
    # from it only in the final rounding.
    g.wide_twin = True
    x = g.input("x", [1, 16, 14, 14], dtype=h16)
    g.output(g.node("Conv", [x, g.weight("w", [16, 1, 5, 5], 0.3, h16)], group=16, pads=[2, 2, 2, 2]), elem=H)
    g.output(g.node("AveragePool", [x], kernel_shape=[7, 7], strides=[7, 7]), elem=H)
    g.output(g.node("GlobalAveragePool", [x]), elem=H)


@case("half_matmul_gemm")
def _(g):
    g.wide_twin = True
    x = g.input("x", [4, 768], dtype=h16)
    g.output(g.node("MatMul", [x, g.weight("w", [768, 96], 0.1, h16)]), elem=H)
    g.output(g.node("Gemm", [x, g.weight("w2", [64, 768], 0.1, h16), g.weight("b", [64], dtype=h16)], transB=1),
             elem=H)


@case("half_swish_rounds_once")
def _(g):
    # After a convolution: a swish, a swish and a residual add, a sigmoid
    # cast back to float32. ONNX Runtime runs each chain in float32 and
    # rounds once; rounded after each operator, 3% of the swish's outputs
    # were more than an ulp from float32 (at most 3.3), which the ulp check
    # refuses. (The cast's half rounding would pass it: Ops tests check it.)
    g.wide_twin = True
    x = g.input("x", [1, 64, 12, 12], dtype=h16)

    def conv(i):
        return g.node("Conv", [x, g.weight(f"w{i}", [64, 64, 1, 1], 0.3, h16), g.weight(f"b{i}", [64], dtype=h16)])

    def swish(c):
        return g.node("Mul", [c, g.node("Sigmoid", [c])])

    g.output(swish(conv(1)), g.node("Add", [swish(conv(2)), x]), elem=H)
    g.output(g.node("Cast", [g.node("Sigmoid", [conv(3)])], to=F))


@case("half_reduce_softmax_layernorm")
def _(g):
    g.wide_twin = True
    x = g.input("x", [3, 1000], dtype=h16)
    g.output(g.node("ReduceMean", [x], axes=[1]), elem=H)
    g.output(g.node("ReduceSum", [x, g.const("axes", np.int64([1]))]), elem=H)
    g.output(g.node("Softmax", [x], axis=-1), elem=H)
    g.output(g.node("LayerNormalization", [x, g.weight("s", [1000], dtype=h16), g.weight("b", [1000], dtype=h16)],
                    axis=-1), elem=H)



@case("legacy_opset6_broadcast_axis", opset=6, ort_reference="legacy_opset6_broadcast_axis_ref")
def _(g):
    # Before opset 7 a binary operator broadcasts only with broadcast=1,
    # B lined up with A from `axis` on.
    x = g.input("x", [2, 3, 4, 5])
    y = g.node("Add", [x, g.weight("b", [3, 4])], broadcast=1, axis=1)
    y = g.node("Mul", [y, g.weight("m", [5])], broadcast=1)
    y = g.node("Sub", [y, g.input("same", [2, 3, 4, 5])])
    g.output(g.node("Elu", [y], ["elu"], alpha=0.5), g.node("Selu", [y], ["selu"]),
             g.node("HardSigmoid", [y], ["hard_sigmoid"]))


@case("legacy_opset6_broadcast_axis_ref", opset=7, seed_of="legacy_opset6_broadcast_axis")
def _(g):
    x = g.input("x", [2, 3, 4, 5])
    b = g.node("Reshape", [g.weight("b", [3, 4]), g.const("shape", np.int64([3, 4, 1]))])
    y = g.node("Add", [x, b])
    y = g.node("Mul", [y, g.weight("m", [5])])
    y = g.node("Sub", [y, g.input("same", [2, 3, 4, 5])])
    g.output(g.node("Elu", [y], ["elu"], alpha=0.5), g.node("Selu", [y], ["selu"]),
             g.node("HardSigmoid", [y], ["hard_sigmoid"]))


@case("legacy_opset1_reshape_cast_concat", opset=1, ort_reference="legacy_opset1_reshape_cast_concat_ref")
def _(g):
    # Opset 1-4 Reshape's shape attribute, opset 1-5 Cast's type name, opset 1-3 Concat's axis 1.
    x = g.input("x", [2, 3, 4])
    r = g.node("Reshape", [x], shape=[2, 12])
    c = g.node("Cast", [g.node("Cast", [r], to="INT32")], to="FLOAT")
    g.output(g.node("Concat", [c, r], ["joined"]), shape=[2, 24])
    g.output(g.node("Softplus", [x], ["softplus"]), g.node("Softsign", [x], ["softsign"]))


@case("legacy_opset1_reshape_cast_concat_ref", opset=7, seed_of="legacy_opset1_reshape_cast_concat")
def _(g):
    x = g.input("x", [2, 3, 4])
    r = g.node("Reshape", [x, g.const("shape", np.int64([2, 12]))])
    c = g.node("Cast", [g.node("Cast", [r], to=TensorProto.INT32)], to=F)
    g.output(g.node("Concat", [c, r], ["joined"], axis=1))
    g.output(g.node("Softplus", [x], ["softplus"]), g.node("Softsign", [x], ["softsign"]))


@case("inverse_trig_isnan_isinf_shrink", opset=10)
def _(g):
    x = g.input("x", [4, 6], -1.2, 1.2)
    g.data[-1][0, :4] = [1, -1, np.inf, -np.inf]
    g.data[-1][1, :2] = [np.nan, 0]
    for op in ("Atan", "Asin", "Acos"):
        g.output(g.node(op, [x]))
    g.output(g.node("IsNaN", [x]), g.node("IsInf", [x]), g.node("IsInf", [x], detect_negative=0),
             g.node("IsInf", [x], detect_positive=0), elem=TensorProto.BOOL)
    g.output(g.node("Shrink", [x], lambd=0.3, bias=0.1))


@case("pow_integer_types", opset=15)
def _(g):
    base = g.input("base", [2, 4], -5, 6, dtype=np.int32)
    exp = g.input("exp", [4], 0, 4, dtype=np.int64)
    g.output(g.node("Pow", [base, exp]), elem=TensorProto.INT32)
    g.output(g.node("Pow", [base, g.const("fexp", np.float32([0.5, 1, 2, 3]))]), elem=TensorProto.INT32)
    x = g.input("x", [2, 4], 0.5, 2)
    g.output(g.node("Pow", [x, exp]))


@case("bitshift_unsigned", opset=11)
def _(g):
    for dtype, elem in ((np.uint8, TensorProto.UINT8), (np.uint32, TensorProto.UINT32)):
        bits = np.iinfo(dtype).bits
        x = g.input(f"x{bits}", [3, 5], 0, 2 ** bits - 1, dtype=dtype)
        y = g.input(f"y{bits}", [5], 0, bits - 1, dtype=dtype)
        g.output(g.node("BitShift", [x, y], direction="LEFT"), g.node("BitShift", [x, y], direction="RIGHT"),
                 elem=elem)


@case("windows_eyelike_mvn", opset=17)
def _(g):
    size = g.input("size", [], dtype=np.int64)
    g.data[-1] = np.int64(10)
    g.fixed = ["size"]
    g.output(g.node("HannWindow", [size]), g.node("HammingWindow", [size], periodic=0),
             g.node("BlackmanWindow", [size]), shape=[10])
    x = g.input("x", [2, 3, 4, 5])
    g.output(g.node("EyeLike", [g.input("m", [4, 6])], k=1))
    g.output(g.node("EyeLike", [g.input("mi", [3, 3], dtype=np.int32)], k=-1, dtype=TensorProto.DOUBLE),
             elem=TensorProto.DOUBLE)
    g.output(g.node("MeanVarianceNormalization", [x]))
    g.output(g.node("MeanVarianceNormalization", [x], axes=[1, 3]))


@case("dft_stft", opset=17)
def _(g):
    # DFT: real and complex, forward and inverse, one- and two-sided, a
    # dft_length that pads and one that cuts, on the middle axis of four.
    r = g.input("r", [2, 12, 1])
    c = g.input("c", [2, 10, 2])
    g.output(g.node("DFT", [r], onesided=1))
    g.output(g.node("DFT", [r, g.const("pad_to", np.int64(16))]))
    g.output(g.node("DFT", [c, g.const("cut_to", np.int64(7))], inverse=1))
    g.output(g.node("DFT", [g.input("m", [2, 3, 6, 2])], axis=2))
    # STFT: a Hann-windowed real signal in overlapping frames, and a complex
    # one two-sided with a frame_length and no window.
    sig = g.input("sig", [1, 64, 1])
    hann = g.const("hann", (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(16) / 16)).astype(np.float32))
    # (ONNX 1.12's shape inference gives the two-sided bin count: left open.)
    g.output(g.node("STFT", [sig, g.const("step", np.int64(6)), hann]), shape=[1, 9, None, 2])
    g.output(g.node("STFT", [g.input("csig", [2, 20, 2]), g.const("step2", np.int64(4)), "",
                             g.const("flen", np.int64(8))], onesided=0), shape=[2, 4, 8, 2])


@case("det_sizes")
def _(g):
    g.output(g.node("Det", [g.input("a", [3, 4, 4])]))
    g.output(g.node("Det", [g.input("b", [2, 2, 5, 5])]))
    g.output(g.node("Det", [g.input("c", [1, 1])]))
    # A singular matrix: two equal rows.
    g.output(g.node("Det", [g.const("s", np.float32([[1, 2, 3], [4, 5, 6], [1, 2, 3]]))]))


@case("mel_weight_matrix", opset=17)
def _(g):
    # An audio front end's filter bank: 40 mel bands of a 512-point DFT at
    # 16 kHz, and a narrow bank where bands share bins (triangles of one bin).
    def scalar(name, value, dtype):
        g.input(name, [], dtype=dtype)
        g.data[-1] = dtype(value)
        g.fixed.append(name)
        return name
    for k, (bands, length, rate, low, high) in enumerate([(40, 512, 16000, 20.0, 7600.0),
                                                          (12, 64, 8000, 0.0, 1000.0)]):
        t1 = np.int32 if k else np.int64
        args = [scalar(f"bands{k}", bands, t1), scalar(f"length{k}", length, t1), scalar(f"rate{k}", rate, t1),
                scalar(f"low{k}", low, np.float32), scalar(f"high{k}", high, np.float32)]
        g.output(g.node("MelWeightMatrix", args), shape=[length // 2 + 1, bands])


@case("compress_gathernd_clip_int", opset=13)
def _(g):
    x = g.input("x", [3, 4, 5])
    cond = g.input("cond", [4], dtype=np.bool_)
    g.data[-1] = np.array([True, False, True, True])
    g.fixed = ["cond"]
    g.output(g.node("Compress", [x, cond], axis=1), shape=[3, 3, 5])
    g.output(g.node("Compress", [x, g.const("flat", np.array([False, True, True]))]), shape=[2])
    idx = g.input("idx", [2, 2, 2], 0, 3, dtype=np.int64)
    g.data[-1] = np.int64([[[0, 1], [2, -1]], [[1, 3], [-3, 0]]])
    g.output(g.node("GatherND", [x, idx]))
    bidx = g.input("bidx", [3, 2, 1], 0, 4, dtype=np.int64)
    g.output(g.node("GatherND", [x, bidx], batch_dims=1))
    q = g.input("q", [3, 4], -100, 100, dtype=np.int8)
    g.output(g.node("Clip", [q, g.const("lo", np.int8(-20)), g.const("hi", np.int8(50))]), elem=TensorProto.INT8)
    g.output(g.node("Clip", [q, "", g.const("hi2", np.int8(5))]), elem=TensorProto.INT8)


@case("onehot_float_einsum_implicit_pool_pads", opset=12)
def _(g):
    ind = g.input("ind", [2, 3], 0, 5)
    g.data[-1] = np.float32([[1, 4, 0], [3, -1, 2]])  # whole: ONNX Runtime's float kernel misreads fractions
    g.output(g.node("OneHot", [ind, g.const("depth", np.float32(5)), g.const("values", np.float32([0, 2]))], axis=1))
    a = g.input("a", [3, 4])
    g.output(g.node("Einsum", [a, g.input("b", [4, 5])], equation="ij,jk"), shape=[3, 5])
    p = g.input("p", [1, 2, 5, 5])
    g.output(g.node("MaxPool", [p], kernel_shape=[3, 3], pads=[2, 2, 2, 2]))
    g.output(g.node("AveragePool", [p], kernel_shape=[3, 3], pads=[2, 1, 2, 2]))


@case("resize_cubic_crop_nearest_modes", opset=13)
def _(g):
    x = g.input("x", [1, 2, 6, 5])
    no_roi = g.const("no_roi", np.float32([]))
    # Scales that give no whole extent (6 x 0.7, 5 x 1.7): coordinates by the scale.
    g.output(g.node("Resize", [x, no_roi, g.const("scales", np.float32([1, 1, 0.7, 1.7]))], mode="cubic"),
             shape=[1, 2, 4, 8])
    g.output(g.node("Resize", [x, no_roi, "", g.const("sizes", np.int64([1, 2, 9, 4]))], mode="cubic",
                    cubic_coeff_a=-0.5, exclude_outside=1, coordinate_transformation_mode="align_corners"))
    roi = g.const("roi", np.float32([0, 0, -0.2, 0.3, 1, 1, 0.9, 1.3]))
    g.output(g.node("Resize", [x, roi, "", g.const("crop_sizes", np.int64([1, 2, 5, 4]))], mode="linear",
                    coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-2.0))
    g.output(g.node("Resize", [x, no_roi, g.const("up", np.float32([1, 1, 1.5, 2.5]))],
                    nearest_mode="ceil", coordinate_transformation_mode="tf_half_pixel_for_nn"), shape=[1, 2, 9, 12])
    g.output(g.node("Resize", [x, no_roi, "", g.const("pt_sizes", np.int64([1, 2, 1, 7]))], mode="linear",
                    coordinate_transformation_mode="pytorch_half_pixel"))
    # A 3-D signal resized along its last axis.
    s = g.input("s", [2, 3, 10])
    g.output(g.node("Resize", [s, no_roi, g.const("s_scales", np.float32([1, 1, 0.45]))], mode="linear"),
             shape=[2, 3, 4])


@case("topk_largest_smallest", opset=11)
def _(g):
    x = g.input("x", [3, 7, 4])
    g.data[-1][0, :3, 0] = 0.25  # ties: the lower position first
    values, indices = g.node("TopK", [x, g.const("k", np.int64([3]))], ["values", "indices"], axis=1)
    g.output(values)
    g.output(indices, elem=TensorProto.INT64)
    small, small_at = g.node("TopK", [x, g.const("k2", np.int64([2]))], ["small", "small_at"], largest=0)
    g.output(small)
    g.output(small_at, elem=TensorProto.INT64)


@case("scatter_elements_nd_reductions", opset=16)
def _(g):
    data = g.input("data", [4, 5, 3])
    idx = g.input("idx", [2, 5, 2], dtype=np.int64)
    g.data[-1] = g.rng.integers(-4, 4, [2, 5, 2])
    upd = g.input("upd", [2, 5, 2])
    g.output(g.node("ScatterElements", [data, idx, upd], axis=0))
    g.output(g.node("ScatterElements", [data, idx, upd], axis=0, reduction="add"))
    g.output(g.node("ScatterElements", [data, idx, upd], axis=0, reduction="mul"))
    tuples = g.input("tuples", [2, 2, 2], dtype=np.int64)
    g.data[-1] = np.int64([[[0, 1], [3, -1]], [[2, 2], [-4, 0]]])  # distinct positions
    rows = g.input("rows", [2, 2, 3])
    g.output(g.node("ScatterND", [data, tuples, rows]))
    g.output(g.node("ScatterND", [data, tuples, rows], reduction="add"))
    g.output(g.node("ScatterND", [data, g.const("firsts", np.int64([[1], [3]])), g.input("planes", [2, 5, 3])],
                    reduction="mul"))


@case("scatter_opset10", opset=10)
def _(g):
    idx = g.input("idx", [2, 3], dtype=np.int64)
    g.data[-1] = np.int64([[1, 0, 3], [2, 3, 0]])
    g.output(g.node("Scatter", [g.input("data", [3, 4]), idx, g.input("upd", [2, 3])], axis=1))


@case("pad_edge_reflect", opset=13)
def _(g):
    x = g.input("x", [2, 3, 5, 4])
    g.output(g.node("Pad", [x, g.const("pads", np.int64([0, 0, 2, 1, 0, 1, 1, 3]))], mode="edge"))
    g.output(g.node("Pad", [x, g.const("rpads", np.int64([0, 1, 4, 3, 0, 2, 2, 1]))], mode="reflect"))


@case("pad_wrap_opset19", opset=19)
def _(g):
    x = g.input("x", [2, 3, 4])
    g.output(g.node("Pad", [x, g.const("pads", np.int64([0, 2, 1, 0, 3, 4]))], mode="wrap"), shape=[2, 8, 9])


@case("einsum_ellipsis", opset=12)
def _(g):
    a, b = g.input("a", [2, 3, 4, 5]), g.input("b", [2, 3, 5, 6])
    g.output(g.node("Einsum", [a, b], equation="...ij,...jk->...ik"), shape=[2, 3, 4, 6])
    g.output(g.node("Einsum", [a, g.input("c", [5, 4])], equation="...ij,ji"), shape=[2, 3])

def wide_twin(model):
    """`model` (half inputs, weights and outputs) computed in float32: its
    inputs cast up, its weights converted, its outputs in float32."""
    twin = onnx.ModelProto()
    twin.CopyFrom(model)
    g = twin.graph
    g.name += "_wide"
    for t in g.initializer:
        if t.data_type == H:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name))
    casts = []
    for vi in g.input:
        if vi.type.tensor_type.elem_type == H:
            wide = vi.name + "_wide"
            for nd in g.node:
                nd.input[:] = [wide if i == vi.name else i for i in nd.input]
            casts.append(helper.make_node("Cast", [vi.name], [wide], name="Cast_" + wide, to=F))
    nodes = casts + list(g.node)
    del g.node[:]
    g.node.extend(nodes)
    for vi in g.output:
        vi.type.tensor_type.elem_type = F
    onnx.checker.check_model(twin, full_check=True)
    return twin


# ---- bad models: each with a piece of the error the importer must give ------------

# ---- sampling ------------------------------------------------------------------

@case("grid_sample_modes_paddings", opset=16)
def _(g):
    # Every mode, padding mode and align_corners, at points up to 1.7x
    # outside the image (reflections of reflections), on a 1-wide axis too.
    x = g.input("x", [2, 3, 5, 4])
    grid = g.input("grid", [2, 3, 6, 2], low=-1.7, high=1.7)
    for mode in ("bilinear", "nearest", "bicubic"):
        for padding in ("zeros", "border", "reflection"):
            for align in (0, 1):
                g.output(g.node("GridSample", [x, grid], mode=mode, padding_mode=padding, align_corners=align))
    thin = g.input("thin", [1, 2, 1, 3])
    g.output(g.node("GridSample", [thin, g.input("grid1", [1, 2, 2, 2], low=-1.3, high=1.3)],
                    padding_mode="reflection", align_corners=1))


def roi_inputs(g, boxes, images):
    # Boxes as (x1, y1, x2, y2) in input pixels, some reaching outside.
    rois = g.input("rois", [len(boxes), 4])
    g.data[-1] = np.array(boxes, dtype=np.float32)
    index = g.input("batch_indices", [len(images)], dtype=np.int64)
    g.data[-1] = np.array(images, dtype=np.int64)
    return rois, index


@case("roi_align_modes", opset=16)
def _(g):
    x = g.input("x", [2, 3, 10, 8])
    rois, index = roi_inputs(g, [[0.5, 1.0, 6.0, 8.5], [-2.0, -1.5, 3.0, 4.0], [2.0, 3.0, 2.4, 3.2],
                                 [4.0, 6.0, 9.5, 11.5], [0.0, 0.0, 7.0, 9.0]], [0, 1, 1, 0, 1])
    g.output(g.node("RoiAlign", [x, rois, index], output_height=3, output_width=4, sampling_ratio=2))
    g.output(g.node("RoiAlign", [x, rois, index], output_height=2, output_width=2, sampling_ratio=3,
                    spatial_scale=0.5, coordinate_transformation_mode="output_half_pixel"))
    # ONNX Runtime before 1.13 divides a max by the sample count: one sample
    # per bin keeps both right.
    g.output(g.node("RoiAlign", [x, rois, index], output_height=4, output_width=3, sampling_ratio=1,
                    mode="max"))


@case("roi_align_opset10", opset=10)
def _(g):
    # Opset 10 knows only the output_half_pixel behaviour.
    x = g.input("x", [1, 2, 6, 6])
    rois, index = roi_inputs(g, [[1.0, 1.0, 4.0, 5.0], [0.0, 2.0, 1.5, 2.5]], [0, 0])
    g.output(g.node("RoiAlign", [x, rois, index], output_height=2, output_width=3, sampling_ratio=2))


BAD = {}


def bad(name, expect, opset=17, kind="invalid argument"):
    def register(fn):
        BAD[name] = (fn, opset, expect, kind)
        return fn
    return register


@bad("bad_unknown_op", "operator NonMaxSuppression is not supported (1 node: 'NonMaxSuppression_0')\n"
     "the supported operators are: ")
def _(g):
    g.output(g.node("NonMaxSuppression", [g.input("boxes", [1, 4, 4]), g.input("scores", [1, 1, 4])]),
             elem=TensorProto.INT64, shape=[3, 3])


@bad("bad_grid_sample_mode", "mode 'area' is not one of bilinear (linear), nearest, bicubic (cubic)", opset=16)
def _(g):
    g.output(g.node("GridSample", [g.input("x", [1, 1, 3, 3]), g.input("grid", [1, 2, 2, 2])], mode="area"),
             shape=[1, 1, 2, 2])


@bad("bad_roi_align_adaptive", "sampling_ratio 0 (a grid that adapts to each box's size) is not supported; "
     "give a positive sampling_ratio", opset=16)
def _(g):
    g.output(g.node("RoiAlign", [g.input("x", [1, 1, 4, 4]), g.input("rois", [1, 4]),
                                 g.input("batch_indices", [1], dtype=np.int64)]), shape=[1, 1, 1, 1])


@bad("bad_dropout_training", "node 'Dropout_0' (Dropout): training_mode = true (a random mask) is supported "
     "only at a constant ratio of 0, which drops nothing")
def _(g):
    g.output(g.node("Dropout", [g.input("x", [2, 3]), g.const("r", np.float32(0.5)), g.const("t", np.bool_(True))]),
             shape=[2, 3])


@bad("bad_reads_empty", "needs its A input (inputs of no elements, read as omitted: 'x' [2, 0], 'y' [0, 3])")
def _(g):
    g.output(g.node("Gemm", [g.input("x", [2, 0]), g.input("y", [0, 3])]), shape=[2, 3])


@bad("bad_nonzero_of_input", "the input must be a constant (or computed from static shapes; fix a model input")
def _(g):
    g.output(g.node("NonZero", [g.input("x", [2, 3])]), elem=TensorProto.INT64)


@bad("bad_reduce_empty_twice", "axis 1 is listed twice")
def _(g):
    g.output(g.node("ReduceSum", [g.input("x", [3, 0]), g.const("a", np.array([1, -1], np.int64))]), shape=[3, 1])


@bad("bad_matmul_empty", "A [2, 0] and B [3, 4] differ in the extent they share")
def _(g):
    g.output(g.node("MatMul", [g.input("x", [2, 0]), g.input("y", [3, 4])]), shape=[2, 4])


@bad("bad_broadcast_empty", "cannot broadcast [2, 0] and [3] together")
def _(g):
    g.output(g.node("Add", [g.input("x", [2, 0]), g.input("y", [3])]), shape=[2, 0])


@bad("bad_det_size", "a determinant of 6 x 6 matrices is not supported; at most 5 x 5")
def _(g):
    g.output(g.node("Det", [g.input("x", [6, 6])]), shape=[])


@bad("bad_dynamic_input", "input 'x' has a dynamic dimension 'N'; give its shape with --input-shape x=D0,D1,...")
def _(g):
    g.input("x", [2, 3])
    g.inputs[0] = helper.make_tensor_value_info("x", F, ["N", 3])
    g.output(g.node("Relu", ["x"]), shape=["N", 3])


@bad("bad_rnn_activation", "activation 'Affine' is not supported (Sigmoid, Tanh, Relu, LeakyRelu, HardSigmoid)")
def _(g):
    x = g.input("x", [3, 1, 2])
    g.output(g.node("RNN", [x, g.weight("W", [1, 2, 2]), g.weight("R", [1, 2, 2])], ["y", "y_h"], hidden_size=2,
                    activations=["Affine"])[0], shape=[3, 1, 1, 2])


@bad("bad_qlinear_matmul_per_row", "its a_scale [2] is not one value; per-axis QLinearMatMul is not supported")
def _(g):
    a = g.input("a", [2, 4], 0, 255.99, dtype=np.uint8)
    ins = [a, g.const("as", np.float32([0.1, 0.2])), g.const("azp", np.uint8(0)),
           g.const("b", np.int8(np.ones([4, 3]))), g.const("bs", np.float32(0.1)), g.const("bzp", np.int8(0)),
           g.const("ys", np.float32(0.1)), g.const("yzp", np.uint8(0))]
    g.output(g.node("QLinearMatMul", ins), elem=U8, shape=[2, 3])


@bad("bad_conv_groups", "node 'Conv_0' (Conv): ")
def _(g):
    g.output(g.node("Conv", [g.input("x", [1, 4, 5, 5]), g.weight("w", [3, 1, 3, 3])], group=3),
             shape=[1, 3, 3, 3])


@bad("bad_opset", "the model uses ONNX opset 22; supported are opsets 1 to 21", opset=22)
def _(g):
    g.output(g.node("Relu", [g.input("x", [2])]), shape=[2])


@bad("bad_domain", "operator FusedGemm (domain com.microsoft) is not supported (1 node: 'FusedGemm_0')")
def _(g):
    g.nodes.append(helper.make_node("FusedGemm", [g.input("x", [2, 2]), "x"], ["y"], name="FusedGemm_0",
                                    domain="com.microsoft"))
    g.output("y", shape=[2, 2])


def bad_dynamic_quantize_lstm(g, w, w_scale):
    g.microsoft = True
    ins = [g.input("x", [2, 1, 3]), w, g.const("R", np.zeros([1, 2, 8], np.int8)), "", "", "", "", "", w_scale,
           g.const("wz", np.int8([0])), g.const("rs", np.float32([0.1])), g.const("rz", np.int8([0]))]
    g.nodes.append(helper.make_node("DynamicQuantizeLSTM", ins, ["y"], name="dqlstm", domain="com.microsoft",
                                    hidden_size=2))
    g.output("y", shape=[2, 1, 1, 2])


@bad("bad_dynamic_quantize_lstm_scale",
     "its W_scale is [3]; it must be per direction ([1]) or per column ([1, 8])")
def _(g):
    bad_dynamic_quantize_lstm(g, g.const("W", np.zeros([1, 3, 8], np.int8)), g.const("ws", np.float32([1, 2, 3])))


@bad("bad_dynamic_quantize_lstm_weights", "its W is float32; int8 and uint8 are supported")
def _(g):
    bad_dynamic_quantize_lstm(g, g.weight("W", [1, 3, 8]), g.const("ws", np.float32([0.1])))


@bad("bad_attention_bias", "its bias is [8]; it must be [12]")
def _(g):
    g.microsoft = True
    g.nodes.append(helper.make_node("Attention", [g.input("x", [1, 3, 4]), g.weight("w", [4, 12]), g.weight("b", [8])],
                                    ["y"], name="attention", domain="com.microsoft", num_heads=2))
    g.output("y", shape=[1, 3, 4])


@bad("bad_integer_matmul_scale", "its b_scale is [4]; it must be one value or one per column of B ([3])")
def _(g):
    g.microsoft = True
    g.nodes.append(helper.make_node("MatMulIntegerToFloat", [g.input("a", [2, 4], 0, 255, dtype=np.uint8),
                                                             g.const("b", np.zeros([4, 3], np.int8)),
                                                             g.const("as", np.float32(0.1)),
                                                             g.const("bs", np.float32([0.1] * 4))],
                                    ["y"], name="mitf", domain="com.microsoft"))
    g.output("y", shape=[2, 3])


@bad("bad_qlinear_add_per_axis", "its B_scale [3] is not one value; per-axis QLinearAdd is not supported")
def _(g):
    a = quantized_input(g, "a", [2, 3], np.uint8, 0.1, 128)
    b = [g.input("b", [2, 3], 0, 255.99, dtype=np.uint8), g.const("b_s", np.float32([0.1, 0.2, 0.3])),
         g.const("b_zp", np.uint8(128))]
    microsoft_node(g, "QLinearAdd", a + b + [g.const("c_s", np.float32(0.2)), g.const("c_zp", np.uint8(128))],
                   U8, [2, 3])


@bad("bad_qgemm_output_type", "has a y_scale without a y_zero_point (whose type is the output's)")
def _(g):
    a = quantized_input(g, "a", [2, 4], np.uint8, 0.1, 128)
    b = [g.const("b", np.zeros([4, 3], np.int8)), g.const("b_s", np.float32(0.1)), g.const("b_zp", np.int8(0))]
    microsoft_node(g, "QGemm", a + b + ["", g.const("y_s", np.float32(0.2))], U8, [2, 3])


@bad("bad_qlinear_concat_triples", "needs Y_scale, Y_zero_point and then (data, scale, zero point) triples, "
     "got 4 inputs")
def _(g):
    a = quantized_input(g, "a", [2, 3], np.uint8, 0.1, 128)
    microsoft_node(g, "QLinearConcat", [g.const("y_s", np.float32(0.1))] + a, U8, [2, 3], axis=0)


@bad("bad_embed_segment_ids", "has segment_ids but no segment_embedding to look them up in")
def _(g):
    g.microsoft = True
    ids = g.input("ids", [1, 3], 0, 3.99, dtype=np.int32)
    g.nodes.append(helper.make_node("EmbedLayerNormalization", [ids, "ids", g.weight("word", [4, 2]), g.weight("pos", [3, 2]),
                                                                "", g.weight("gamma", [2]), g.weight("beta", [2])],
                                    ["y"], name="embed", domain="com.microsoft"))
    g.output("y", shape=[1, 3, 2])


@bad("bad_softmax_axis", "node 'Softmax_0' (Softmax): ")
def _(g):
    g.output(g.node("Softmax", [g.input("x", [2, 3])], axis=4), shape=[2, 3])


@bad("bad_missing_input", "input 'nowhere' is produced by no node, initializer or graph input",
     kind="parse")
def _(g):
    g.output(g.node("Add", [g.input("x", [2]), "nowhere"]), shape=[2])


@bad("bad_pad_overflows_int64", "has more elements than a 64-bit integer can count")
def _(g):
    # 131071 x 131071 x 131072 x 131072 elements: more than int64 counts.
    g.output(g.node("Pad", [g.input("x", [1, 1, 2, 2]), g.const("p", np.int64([65535] * 8))]),
             shape=[131071, 131071, 131072, 131072])


@bad("bad_pad_too_large", "more than any machine can allocate (2^47 bytes)")
def _(g):
    g.output(g.node("Softmax", [g.node("Pad", [g.input("x", [1, 1, 2, 2]),
                                               g.const("p", np.int64([0, 0, 4000000, 4000000] * 2))])]),
             shape=[1, 1, 8000002, 8000002])


@bad("bad_two_producers", "node 'Neg_1' (Neg): output 'y' is already produced by another node",
     kind="parse")
def _(g):
    x = g.input("x", [2])
    g.node("Relu", [x], ["y"])
    g.node("Neg", [x], ["y"])
    g.output("y", shape=[2])


@bad("bad_many_gaps", "the model uses 4 things tensortune does not support:\n"
     "  - element type COMPLEX64 is not supported (FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT64, INT32, INT16, INT8, UINT64, UINT32, UINT16, UINT8, BOOL): "
     "tensor 'wb'\n"
     "  - operator Bernoulli is not supported (2 nodes: 'Bernoulli_0', 'Bernoulli_2')\n")
def _(g):
    # Every gap at once; the nodes that read a gap's outputs are passed over.
    x = g.input("x", [2, 2])
    d0 = g.node("Bernoulli", [x])
    g.output(g.node("Relu", [d0]), shape=[2, 2])
    g.output(g.node("Bernoulli", [x]), shape=[2, 2])
    g.inits.append(helper.make_tensor("wb", TensorProto.COMPLEX64, [2], vals=bytes(16), raw=True))
    g.output(g.node("Add", [x, "wb"]), shape=[2, 2])
    g.output(g.node("Conv", [g.input("c", [1, 4, 5, 5]), g.weight("w", [3, 1, 3, 3])], group=3),
             shape=[1, 3, 3, 3])
    g.nodes.append(helper.make_node("FusedGemm", [x, x], ["fg"], name="FusedGemm_0", domain="com.microsoft"))
    g.output("fg", shape=[2, 2])


@bad("bad_cycle", "the nodes 'Relu_0', 'Neg_1' read each other's outputs in a cycle", kind="parse")
def _(g):
    g.node("Relu", ["b"], ["a"])
    g.node("Neg", ["a"], ["b"])
    g.output(g.node("Add", [g.input("x", [2]), "a"]), shape=[2])


@bad("bad_external_path", "tensor 'w' keeps its data in '../outside.bin', which is not a relative path "
     "inside the model's folder")
def _(g):
    w = TensorProto(name="w", data_type=F, dims=[2])
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "../outside.bin"), ("offset", "0"), ("length", "8")):
        entry = w.external_data.add()
        entry.key, entry.value = k, v
    g.inits.append(w)
    g.output(g.node("Add", [g.input("x", [2]), "w"]), shape=[2])


@bad("bad_if_branch_shapes", "node 'If_0' (If): its condition is known only at run time, and its output 0 "
     "is float32[3] in then_branch but float32[1] in else_branch")
def _(g):
    x = g.input("x", [3])
    cond = g.node("Greater", [g.node("ReduceSum", [x], keepdims=0), g.const("z", np.float32(0))])
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["r"])], "t", [],
                             [helper.make_tensor_value_info("r", F, [3])])
    other = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["s"])], "e", [],
                              [helper.make_tensor_value_info("s", F, [1])])
    g.nodes.append(helper.make_node("If", [cond], ["y"], name="If_0", then_branch=then, else_branch=other))
    g.output("y", shape=None)


@bad("bad_loop_runtime_trip_count", "node 'Loop_0' (Loop): its trip count M is known only at run time")
def _(g):
    x = g.input("x", [3])
    m = g.node("Cast", [g.node("ReduceSum", [x], keepdims=0)], to=TensorProto.INT64)
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond"], ["cond_out"]), helper.make_node("Neg", ["v"], ["v_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("v", F, [3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", F, [3])])
    g.nodes.append(helper.make_node("Loop", [m, "", x], ["y"], name="Loop_0", body=body))
    g.output("y", shape=[3])


@bad("bad_recursive_function", "node 'n1' (Again): function 'Again' of domain 'custom' calls itself")
def _(g):
    g.functions.append(helper.make_function("custom", "Again", ["X"], ["Y"],
                                            [helper.make_node("Again", ["X"], ["Y"], name="n1", domain="custom")],
                                            [helper.make_opsetid("", 15), helper.make_opsetid("custom", 1)], []))
    g.output(g.node("Again", [g.input("x", [2])], ["y"], domain="custom"), shape=[2])


@bad("bad_einsum_diagonal_extents", "node 'Einsum_0' (Einsum): operand 0 repeats 'i' over extents 2 and 3")
def _(g):
    g.output(g.node("Einsum", [g.input("a", [2, 3])], equation="ii->i"), shape=[2])


@bad("bad_declared_output_shape", "graph output 'relu_0' is declared [2, 4] but computes [2, 3]",
     kind="parse")
def _(g):
    g.output(g.node("Relu", [g.input("x", [2, 3])]), shape=[2, 4])


def build_bad(name, seed):
    fn, opset, expect, kind = BAD[name]
    g = G(np.random.default_rng([seed, zlib.crc32(name.encode())]))
    fn(g)
    graph = helper.make_graph(g.nodes, name, g.inputs, g.outputs, initializer=g.inits)
    opsets = [helper.make_opsetid("", opset)]
    opsets += [helper.make_opsetid(d, 1) for d in sorted({f.domain for f in g.functions})]
    model = helper.make_model(graph, producer_name="make_op_models", opset_imports=opsets,
                              functions=g.functions)
    model.ir_version = 8
    return model, expect, kind


def build(name, seed):
    fn, opset, seed_of, _ = CASES[name]
    g = G(np.random.default_rng([seed, zlib.crc32((seed_of or name).encode())]))
    fn(g)
    graph = helper.make_graph(g.nodes, name, g.inputs, g.outputs, initializer=g.inits)
    opsets = [helper.make_opsetid("", opset)]
    if g.microsoft:
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    for domain in sorted({f.domain for f in g.functions}):
        opsets.append(helper.make_opsetid(domain, 1))
    model = helper.make_model(graph, producer_name="make_op_models", opset_imports=opsets,
                              functions=g.functions)
    if opset > onnx.defs.onnx_opset_version() or g.microsoft:
        # Newer than this python3-onnx knows: neither inferred nor checked, so
        # the case gives its outputs' shapes; ONNX Runtime checks the model.
        model.ir_version = 10
        return model, g
    model.ir_version = helper.find_min_ir_version_for([o for o in model.opset_import if o.domain == ""])
    if g.functions:
        model.ir_version = max(model.ir_version, 8)  # model-local functions
    if model.ir_version < 4:
        # Before IR 4 every initializer is also a graph input, as old exporters wrote them.
        model.graph.input.extend(helper.make_tensor_value_info(i.name, i.data_type, list(i.dims))
                                 for i in model.graph.initializer)
    # The outputs' shapes, from ONNX's shape inference (the checker wants them).
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    known = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    for o in model.graph.output:
        if o.type.tensor_type.HasField("shape"):
            continue
        if o.name in known and known[o.name].type.tensor_type.HasField("shape"):
            o.type.CopyFrom(known[o.name].type)
        else:
            raise SystemExit(f"{name}: shape inference found no shape for output {o.name}")
    onnx.checker.check_model(model, full_check=True)
    if g.unsorted:
        nodes = list(model.graph.node)
        del model.graph.node[:]
        model.graph.node.extend(reversed(nodes))
    return model, g


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="op_models")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="")
    ap.add_argument("--list", action="store_true", help="print the case names and exit")
    args = ap.parse_args()
    if args.list:
        print("\n".join(CASES))
        return
    names = [n for n in args.only.split(",") if n] or list(CASES)
    for n in names:
        if n not in CASES:
            sys.exit(f"unknown case {n!r}; the cases are: {', '.join(CASES)}")
    os.makedirs(args.out, exist_ok=True)
    manifest = []

    def ops_of(model):
        return sorted({(nd.domain + "." if nd.domain not in ("", "ai.onnx") else "") + nd.op_type
                       for nd in model.graph.node})

    for n in names:
        model, g = build(n, args.seed)
        if g.external:
            onnx.save_model(model, os.path.join(args.out, n + ".onnx"), save_as_external_data=True,
                            all_tensors_to_one_file=True, location=n + ".weights", size_threshold=0)
        else:
            onnx.save(model, os.path.join(args.out, n + ".onnx"))
        inputs = []
        for k, (vi, data) in enumerate(zip(g.inputs, g.data)):
            file = f"{n}.in_{k}.npy"
            np.save(os.path.join(args.out, file), data)
            inputs.append({"name": vi.name, "file": file})
        entry = {"name": n, "model": n + ".onnx", "inputs": inputs, "ops": ops_of(model)}
        if CASES[n][3]:
            entry["ort_reference"] = CASES[n][3]
        if g.atol is not None:
            entry["atol"] = g.atol
        if g.fixed:
            entry["fixed_inputs"] = g.fixed
        if g.wide_twin:
            twin = wide_twin(model)
            onnx.save(twin, os.path.join(args.out, n + "_wide.onnx"))
            manifest.append({"name": n + "_wide", "model": n + "_wide.onnx", "inputs": inputs,
                             "ops": ops_of(twin)})
            entry["wide_reference"] = n + "_wide"
        manifest.append(entry)
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    bad_manifest = []
    for n in BAD:
        model, expect, kind = build_bad(n, args.seed)
        onnx.save(model, os.path.join(args.out, n + ".onnx"))
        bad_manifest.append({"name": n, "model": n + ".onnx", "error": expect, "kind": kind})
    with open(os.path.join(args.out, "bad_manifest.json"), "w") as f:
        json.dump(bad_manifest, f, indent=1)
    print(f"{len(manifest)} models in {args.out}")


if __name__ == "__main__":
    main()
