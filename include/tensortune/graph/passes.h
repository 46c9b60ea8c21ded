/// \file
/// Graph passes. Each takes a graph and returns a new one; the input cannot
/// change (nodes are immutable), and unchanged parts are shared. Values no
/// output depends on are dropped by every pass (a graph is what its outputs
/// reach). The compile path and task extraction run the same pipeline,
/// optimize(), so that the tasks extracted are exactly those compiled.
#pragma once

#include <functional>
#include <string>

#include "tensortune/graph/graph.h"
#include "tensortune/ir/target.h"

namespace tensortune::graph {

/// Rebuilds `graph` call by call, producers first: `f` gets each call and
/// its arguments as already rewritten, and returns the value that replaces
/// it (or null: the call with the new arguments, itself when they are the
/// same). The building block of the passes below.
Graph rewrite(const Graph& graph,
              const std::function<Value(const CallNode& call, const std::vector<Value>& args)>& f);

/// Every call whose arguments are all constants becomes a constant, its
/// value computed by the operator's tensor expressions in the reference
/// evaluator (transposes and reshapes directly).
Graph fold_constants(const Graph& graph);

/// `v` as a constant when it is a call whose arguments are all constants
/// (evaluated as fold_constants does); `v` itself otherwise.
Value fold_call(const Value& v);

/// Inference-time simplification: batch_norm with constant statistics
/// becomes a scale and a shift per channel, and when it follows a conv2d
/// with a constant kernel (optionally through a bias_add) the scale is
/// folded into the kernel and the shift into a bias_add. A float power by
/// a constant exponent of 2, 3 or 0.5 becomes products or a sqrt.
Graph simplify_inference(const Graph& graph);

/// Moves 2-D convolutions and the layout-agnostic operations around them
/// (elementwise, pools, bias_add, concat) to NHWC with HWIO kernels, with
/// transposes only where a value must be NCHW (a reshape, a graph output):
/// the layout the search finds fast CPU kernels for. Kernels, and the
/// constants of elementwise operations (of any rank up to 4, broadcast as
/// ONNX does: [C, 1, 1] is per channel), are transposed at compile time.
/// A transposed convolution with a constant kernel whose windows tile the
/// output exactly (kernel = stride, no padding or output padding: a U-Net's 2x2, stride-2
/// upsampling) becomes a 1x1 NHWC convolution to R * S * K channels and a
/// depth-to-space shuffle, not a convolution of the stride-spread input.
Graph convert_layout_nhwc(const Graph& graph);

/// An int32 matmul of centred int8 or uint8 data (as MatMulInteger and
/// QLinearMatMul import) by a constant 2-D matrix becomes a 1x1 NHWC
/// conv2d over its rows where int8_conv2d_words (an int8 matrix, on VNNI)
/// or int_conv2d_as_float (sums float32 holds exactly) then takes it.
Graph integer_matmul_as_conv2d(const Graph& graph);

/// An int32 NHWC conv2d (ungrouped, unpadded) of centred int8 or uint8 data
/// with a constant int8 kernel over a window of channels that words of four
/// do not fill (an STFT's one-channel signal) becomes a 1x1 conv2d over its
/// patches (each window's bytes gathered into one row; at most 1 MiB of
/// them), whose words are full.
Graph integer_conv2d_as_patches(const Graph& graph);

/// An int32 NHWC conv2d (ungrouped) of centred int8 or uint8 data (the
/// cast, minus one zero point, as ConvInteger and QLinearConv import) with
/// a constant kernel of int8 values becomes nn.conv2d_int8x4 on the bytes
/// packed four channels to a word (VNNI's operands), padded with the zero
/// point, minus the zero point times each output channel's weight sum. A
/// zero point known only at run time (DynamicQuantizeLinear's) is taken
/// too, its pad word packed at run time.
Graph int8_conv2d_words(const Graph& graph);

/// An int32 NHWC conv2d of centred int8 or uint8 data with a constant
/// kernel that int8_conv2d_words leaves (grouped, depthwise, wider than int8) computes in
/// float32 and is cast back, where every partial sum is an integer that
/// float32 holds exactly: float vector kernels run faster than int32 ones.
Graph int_conv2d_as_float(const Graph& graph);

/// A float16 conv2d with a constant kernel computes in float32 on its data
/// widened once and the kernel widened at compile time, and is rounded to
/// float16 after: the values the float16 operator gives (it sums widened
/// products in float32), without widening both operands of every product
/// inside its loops, and open to the float32 passes after it (Winograd). It
/// rounds by `narrow`, which what is fused after it (bias, activations,
/// residual add, a cast) reads through, so it rounds once, as
/// after the float16 operator.
Graph float16_conv2d_in_float32(const Graph& graph);

/// Float16 dense layers, matmuls, softmax and layer normalisation, which
/// work in float32 and round once, compute in float32 in the same way: a
/// constant operand widened at compile time, any other cast once, the
/// result rounded as the float16 operator rounds (`narrow` after a product).
Graph float16_ops_in_float32(const Graph& graph);

/// Casts that provably change no value go: cast(cast(b)) where b holds
/// integers both types hold (a quantized value through uint8 and back),
/// and cast(cast(b) + k) back to b's type where the sum is exact in it (a
/// zero point taken out in int32 of a float). What QLinearConv's
/// requantization and the next layer's centring import as.
Graph exact_integer_casts(const Graph& graph);

/// A 3x3, stride-1 NHWC convolution of float32 data with a constant kernel
/// becomes Winograd's algorithm (te::winograd_matrices): an input
/// transform, a batched product with the kernel transformed at compile
/// time, and an output transform, about 2.25x (tiles of 2) or 4x (tiles of
/// 4) fewer multiply-adds. Only where it pays on `target`: at least 16
/// input and output channels (below that the transforms cost more than the
/// products save) and at least 16 output tiles per call (the transformed
/// kernel, (tile+2)^2 / 9 times the kernel, is read from memory once per
/// call and serves one multiply-add per tile); tiles of 4 where there are
/// that many, else 2.
Graph winograd_conv2d(const Graph& graph, const ir::Target& target);

/// A conv2d (NHWC, ungrouped), conv2d_int8x4, dense or 2-D matmul with a
/// constant weight whose output channels no vector width of `target`
/// divides (an STFT's 2 x 257 bins, a detection head's 3 x 25) computes a
/// few zero channels more, up to a whole number of vectors, and a slice
/// drops them: a register tile of whole vectors instead of scalar code.
/// Only where half a vector does not divide the channels either (for
/// conv2d_int8x4, whose dot products want whole vectors, a whole one), and
/// at most 1.5 times them.
Graph pad_output_channels(const Graph& graph, const ir::Target& target);

/// conv2d(x * s, w) becomes conv2d(x, w * s) for an ungrouped NHWC
/// convolution of float32 or bfloat16 whose data is the product of a value
/// and one factor per input channel (a squeeze-excitation's scale, a
/// constant normalisation), read by nothing else: the product is no longer
/// a pass over the data. A finite constant factor of a constant weight
/// folds into it at compile time (padding adds zeros after the product, so
/// any padding qualifies). Otherwise w * s is computed per call, so only
/// where the weight has at most an eighth of the data's elements and the
/// convolution pads nothing (0 * w * inf would be NaN). Not float16, where
/// w * s may pass 65504 when (x * s) * w did not.
Graph scale_conv_weights(const Graph& graph);

/// Elementwise operations move before the reshapes they read: a unary one
/// always, a binary one when its other operand is a constant that
/// broadcasts along trailing dimensions the reshape keeps (a bias). The
/// operation then fuses into the conv, dense or matmul before the reshape,
/// and the reshape is left a view, which costs nothing.
Graph sink_reshapes(const Graph& graph);

/// Testing: a pipeline pass named `name` in optimize() that fails (throws
/// a kRuntime error) halfway through, for extraction's fallback test. Set
/// through the config option "testing.fail_graph_pass".
std::string failing_pass_for_testing();

/// The pipeline of the compile path (and of task extraction) for `target`:
/// simplify_inference, fold_constants, convert_layout_nhwc (which ends by
/// folding constants again), integer_matmul_as_conv2d, integer_conv2d_as_patches,
/// int8_conv2d_words, int_conv2d_as_float,
/// exact_integer_casts,
/// float16_conv2d_in_float32, float16_ops_in_float32,
/// winograd_conv2d and
/// pad_output_channels (skipped without a target), scale_conv_weights, sink_reshapes. Runs under
/// the current PassContext: a pass in its disabled list is skipped.
Graph optimize(const Graph& graph, const ir::Target& target = ir::Target());

/// The names of optimize()'s passes, in order.
std::vector<std::string> optimize_pass_names();

}  // namespace tensortune::graph
