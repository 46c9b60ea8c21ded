/// \file
/// The operator library: the tensor programs of real models, each built from
/// compute() stages that schedules can transform.
///
/// Conventions:
///  - Every op checks its operands (ranks, shapes, matching dtypes) and throws
///    kInvalidArgument / kTypeMismatch naming the op and the operand.
///  - The result has the operands' dtype (comparisons aside); constants are
///    made in the type the op computes in, so every op works on
///    float16/bfloat16/float64 too.
///  - Each stage carries a `tag` naming its family and `attrs` with the op's
///    parameters. Tags: "matmul", "dense", "batch_matmul", "conv2d_nchw",
///    "conv2d_nhwc", "depthwise_conv2d_nchw", "conv2d_transpose_nchw",
///    "pool_max", "pool_sum", "pool_avg" (the division of an average pool),
///    "elemwise" (one input, same shape), "broadcast" (numpy broadcasting of
///    several inputs), "injective" (pure data movement: reshape, transpose,
///    concat, slice, cast), "pad", "reduce" (a reduction over some axes),
///    and the multi-stage normalisations "softmax", "log_softmax",
///    "layer_norm", "batch_norm". Schedules and search rules key on them.
///  - Padding is a separate stage named "pad_data" (tag "pad") wherever an op
///    pads, so that schedules can inline it or compute it at the consumer; a
///    padded read clamps its index into the input, so the select that picks
///    the pad value never reads out of bounds (see evaluator.h).
///  - Reductions accumulate in the operands' dtype, float16 and bfloat16 in
///    float32, rounded once (detail::narrow); what reads such a rounded sum
///    in the same DAG reads the float32 sum (see elemwise).
///  - Axis arguments may be negative (counted from the end, as in numpy).
///  - Convolutions and pools take the operator's attribute node (te/attrs.h)
///    as the graph holds it; their layout is the builder's, not the node's.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tensortune/te/attrs.h"
#include "tensortune/te/tensor.h"

namespace tensortune::te {

// ---- linear algebra -----------------------------------------------------------

/// C[M, N] = A[M, K] · B[K, N]; with transpose_a A is given as [K, M], with
/// transpose_b B as [N, K].
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false,
              std::string name = "matmul");

/// out[M, N] = data[M, K] · weight[N, K]^T (+ bias[N] when given, as a second
/// "broadcast" stage).
Tensor dense(const Tensor& data, const Tensor& weight, const Tensor& bias = Tensor(),
             std::string name = "dense");

/// C[b, M, N] = A[b, M, K] · B[b, K, N] (with the transposes as in matmul); a
/// batch extent of 1 on one side broadcasts against the other.
Tensor batch_matmul(const Tensor& a, const Tensor& b, bool transpose_a = false,
                    bool transpose_b = false, std::string name = "batch_matmul");

/// numpy's matmul of A[..., M, K] and B[..., K, N] with any number of batch
/// axes, computed at the output's own axes (no reshapes): the batch axes of
/// both the same, or one side's all ones and broadcast. Tag "batch_matmul".
Tensor batch_matmul_nd(const Tensor& a, const Tensor& b, std::string name = "batch_matmul");

// ---- convolution and pooling -------------------------------------------------

/// out[N, K, OH, OW] from data[N, C, H, W] and kernel[K, C / groups, R, S],
/// OH = (H + pad_top + pad_bottom - dilation_h * (R - 1) - 1) / stride_h + 1
/// (likewise OW). Output channel k reads the input channels of its group
/// k / (K / groups). Padding is a "pad_data" stage.
Tensor conv2d_nchw(const Tensor& data, const Tensor& kernel, const Conv2dAttrsNode& attrs = {},
                   std::string name = "conv2d_nchw");

/// out[N, OH, OW, K] from data[N, H, W, C] and kernel[R, S, C / groups, K] (HWIO).
Tensor conv2d_nhwc(const Tensor& data, const Tensor& kernel, const Conv2dAttrsNode& attrs = {},
                   std::string name = "conv2d_nhwc");

/// Bytes in int32 words of four, for conv2d_nhwc_int8x4: out[..., C4] from
/// x[..., C] of int8 or uint8, C4 = ceil(C / 4), word c holding channels
/// 4c..4c+3 from its low byte up (zero past C).
Tensor pack_int8x4(const Tensor& x, std::string name = "pack_int8x4");

/// out[N, OH, OW, K] (int32) from data[N, H, W, C4] of words of four uint8
/// channels and kernel[R, S, C4, K] of words of four int8 ones (pack_int8x4
/// of NHWC data and of an HWIO kernel): the sum over the window of
/// dot4_u8s8 of the words, which is VNNI's step. Ungrouped; the padding
/// holds `pad_word` (a scalar).
Tensor conv2d_nhwc_int8x4(const Tensor& data, const Tensor& kernel, const Tensor& pad_word,
                          const Conv2dAttrsNode& attrs = {},
                          std::string name = "conv2d_nhwc_int8x4");

/// The matrices of Winograd's minimal filtering F(tile x tile, 3 x 3) (Lavin
/// and Gray, 2015), alpha = tile + 2, each row-major: a 3x3 convolution of an
/// alpha x alpha input tile d with kernel g is
/// AT . ((G . g . G^T) * (BT . d . BT^T)) . AT^T, tile x tile outputs.
struct WinogradMatrices {
  int64_t tile = 0, alpha = 0;
  std::vector<double> bt;  ///< [alpha, alpha]: the input transform
  std::vector<double> g;   ///< [alpha, 3]: the kernel transform
  std::vector<double> at;  ///< [tile, alpha]: the output transform
};

/// The matrices for output tiles of 2 or 4; kInvalidArgument otherwise.
WinogradMatrices winograd_matrices(int64_t tile);

/// The first step of a 3x3, stride-1 NHWC convolution by Winograd's
/// algorithm: out[alpha, alpha, N, TH, TW, C] = BT . d . BT^T for every
/// alpha x alpha input tile d (tiles `tile` apart, TH = ceil(out_h / tile),
/// TW likewise; the data padded by `padding` (top, left, bottom, right) and
/// with zeros past it) and channel, BT that of winograd_matrices(tile).
/// Rows then columns, each a sum over BT's nonzero entries with the entries
/// as constants: an unrolled loop over a row folds to its few adds.
Tensor winograd_input_transform(const Tensor& data, int64_t tile,
                                const std::array<int64_t, 4>& padding,
                                std::string name = "winograd_input");

/// The last step: out[N, out_h, out_w, K] from the products
/// m[alpha, alpha, N, TH, TW, K] (transformed data times transformed kernel,
/// summed over the input channels): AT . m . AT^T per tile, cropped to
/// out_h x out_w, AT that of winograd_matrices(tile), as constants likewise.
Tensor winograd_output_transform(const Tensor& m, int64_t tile, int64_t out_h, int64_t out_w,
                                 std::string name = "winograd_output");

/// out[N, C * M, OH, OW] from data[N, C, H, W] and kernel[C, M, R, S] (M: the
/// channel multiplier): output channel c * M + m convolves input channel c
/// with kernel[c, m]. attrs.groups must be 1 (it is implied).
Tensor depthwise_conv2d_nchw(const Tensor& data, const Tensor& kernel,
                             const Conv2dAttrsNode& attrs = {},
                             std::string name = "depthwise_conv2d_nchw");

/// The gradient of conv2d_nchw with respect to its input (PyTorch's
/// ConvTranspose2d, groups 1, dilation 1): out[N, K, OH, OW] from
/// data[N, C, H, W] and kernel[C, K, R, S], OH = (H - 1) * stride_h - pad_top -
/// pad_bottom + R + output_padding_h. Built as a stage "data_dilate_pad"
/// (input spread out by the stride and padded by R - 1 - pad) and a direct
/// convolution with the flipped kernel.
Tensor conv2d_transpose_nchw(const Tensor& data, const Tensor& kernel,
                             const Conv2dTransposeAttrsNode& attrs = {},
                             std::string name = "conv2d_transpose_nchw");

/// Max over each window of data[N, C, H, W] (padding is -inf / the type's
/// minimum, so it never wins).
Tensor max_pool2d_nchw(const Tensor& data, const Pool2dAttrsNode& attrs,
                       std::string name = "max_pool2d_nchw");

/// Mean over each window of data[N, C, H, W]: by default the divisor is the
/// number of input elements the window covers (padding excluded); with
/// count_include_pad it is the window clipped to the padded input. Two
/// stages: a "pool_sum" reduction and the "pool_avg" division.
Tensor avg_pool2d_nchw(const Tensor& data, const Pool2dAttrsNode& attrs,
                       std::string name = "avg_pool2d_nchw");

/// max_pool2d_nchw and avg_pool2d_nchw on data[N, H, W, C]: channels
/// innermost, so the window loops read whole vectors of channels.
Tensor max_pool2d_nhwc(const Tensor& data, const Pool2dAttrsNode& attrs,
                       std::string name = "max_pool2d_nhwc");
Tensor avg_pool2d_nhwc(const Tensor& data, const Pool2dAttrsNode& attrs,
                       std::string name = "avg_pool2d_nhwc");

/// Mean over H and W of data[N, C, H, W], giving [N, C, 1, 1].
Tensor global_avg_pool2d_nchw(const Tensor& data, std::string name = "global_avg_pool2d");

/// Max over H and W of data[N, C, H, W], giving [N, C, 1, 1].
Tensor global_max_pool2d_nchw(const Tensor& data, std::string name = "global_max_pool2d");

/// Local response normalisation across channels of data[N, C, H, W] (ONNX's
/// LRN): x / (bias + alpha / size * sum of x^2 over `size` channels around
/// c)^beta. Two stages: "lrn_sum" and "lrn".
Tensor lrn(const Tensor& data, int64_t size, double alpha = 1e-4, double beta = 0.75,
           double bias = 1.0);

// ---- elementwise -------------------------------------------------------------

/// out[i...] = f(x[i...]): the generic elementwise stage (tag "elemwise").
/// Where x rounds a float32 sum, f reads the sum and its stage is rounded
/// by a narrow stage after it: f makes its constants in its operand's type.
Tensor elemwise(const Tensor& x, const std::function<Expr(const Expr&)>& f, std::string name,
                nlohmann::json attrs = nlohmann::json::object());
/// elemwise for a step function (floor, round, sign): f reads x as stored,
/// since a sum just off a step may round onto it.
Tensor step_elemwise(const Tensor& x, const std::function<Expr(const Expr&)>& f, std::string name,
                     nlohmann::json attrs = nlohmann::json::object());

Tensor exp(const Tensor& x);       ///< e^x
Tensor log(const Tensor& x);       ///< natural logarithm
Tensor sqrt(const Tensor& x);      ///< square root
Tensor rsqrt(const Tensor& x);     ///< 1 / sqrt(x)
Tensor tanh(const Tensor& x);      ///< hyperbolic tangent
Tensor sigmoid(const Tensor& x);   ///< 1 / (1 + e^-x)
Tensor erf(const Tensor& x);       ///< error function
Tensor abs(const Tensor& x);       ///< |x|
Tensor negative(const Tensor& x);  ///< -x
Tensor floor(const Tensor& x);     ///< round down
Tensor ceil(const Tensor& x);      ///< round up
Tensor round(const Tensor& x);     ///< round to the nearest integer, ties to even
Tensor sin(const Tensor& x);       ///< sine
Tensor cos(const Tensor& x);       ///< cosine
Tensor atan(const Tensor& x);      ///< arctangent
Tensor relu(const Tensor& x);      ///< max(x, 0)
/// x where x > 0, alpha * x elsewhere.
Tensor leaky_relu(const Tensor& x, double alpha = 0.01);
/// min(max(x, low), high); low <= high.
Tensor clip(const Tensor& x, double low, double high);
/// The exact (erf) GELU: 0.5 * x * (1 + erf(x / sqrt(2))).
Tensor gelu(const Tensor& x);
/// x converted to `dtype` (tag "injective": a conversion, not arithmetic);
/// where x rounds a float32 sum, the sum converted.
Tensor cast(const Tensor& x, DataType dtype);

/// The shape two shapes broadcast to under numpy's rules (aligned at the
/// right; each pair of extents equal or one of them 1); kInvalidArgument otherwise.
std::vector<int64_t> broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

/// out = f(a, b) with numpy broadcasting (tag "broadcast"); dtypes must match.
Tensor broadcast_binary(const Tensor& a, const Tensor& b,
                        const std::function<Expr(const Expr&, const Expr&)>& f, std::string name,
                        nlohmann::json attrs = nlohmann::json::object());

Tensor add(const Tensor& a, const Tensor& b);       ///< a + b, broadcast
Tensor subtract(const Tensor& a, const Tensor& b);  ///< a - b, broadcast
Tensor multiply(const Tensor& a, const Tensor& b);  ///< a * b, broadcast
Tensor divide(const Tensor& a, const Tensor& b);    ///< a / b, broadcast (C division for ints)
Tensor maximum(const Tensor& a, const Tensor& b);   ///< max(a, b), broadcast
Tensor minimum(const Tensor& a, const Tensor& b);   ///< min(a, b), broadcast
Tensor power(const Tensor& a, const Tensor& b);     ///< a ^ b, broadcast (floats)
/// The remainder of a / b with the divisor's sign (Python's %), integers; 0 where b is 0.
Tensor floor_mod(const Tensor& a, const Tensor& b);
/// The remainder of a / b with the dividend's sign (C's fmod and %); integers give 0 where b is 0.
Tensor trunc_mod(const Tensor& a, const Tensor& b);

/// Comparisons, broadcast: a bool tensor; the operands' dtypes must match.
Tensor equal(const Tensor& a, const Tensor& b);          ///< a == b
Tensor greater(const Tensor& a, const Tensor& b);        ///< a > b
Tensor greater_equal(const Tensor& a, const Tensor& b);  ///< a >= b
Tensor less(const Tensor& a, const Tensor& b);           ///< a < b
Tensor less_equal(const Tensor& a, const Tensor& b);     ///< a <= b

/// Logic on bool tensors, broadcast.
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& x);

/// condition ? x : y, the three broadcast together (tag "broadcast");
/// condition is bool, x and y of one dtype.
Tensor where(const Tensor& condition, const Tensor& x, const Tensor& y);

/// x broadcast with `shape` under numpy's rules (ONNX's Expand: the result
/// is the broadcast of both shapes). Tag "broadcast".
Tensor expand(const Tensor& x, const std::vector<int64_t>& shape);

/// data + bias, bias[C] applied along `axis` of data.
Tensor bias_add(const Tensor& data, const Tensor& bias, int axis = 1);

// ---- normalisation -----------------------------------------------------------

/// Softmax along `axis`, numerically stable, in four stages: max-reduce
/// ("<name>_max"), exp(x - max) ("<name>_exp"), sum-reduce ("<name>_sum"),
/// divide (`name`).
Tensor softmax(const Tensor& x, int axis = -1, std::string name = "softmax");

/// log(softmax(x)) along `axis` in three stages: max, sum of exp(x - max),
/// and x - max - log(sum).
Tensor log_softmax(const Tensor& x, int axis = -1, std::string name = "log_softmax");

/// Layer normalisation over the last axis of x[..., D]: (x - mean) /
/// sqrt(var + epsilon) * gamma[D] + beta[D] with the biased variance;
/// gamma and beta may be null (then 1 and 0). Three stages: sum, sum of
/// squared deviations, normalise.
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double epsilon = 1e-5,
                  std::string name = "layer_norm");

/// Batch normalisation in inference form: (x - mean[c]) / sqrt(var[c] +
/// epsilon) * gamma[c] + beta[c], c along `axis`; one stage.
Tensor batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const Tensor& moving_mean, const Tensor& moving_var, int axis = 1,
                            double epsilon = 1e-5, std::string name = "batch_norm");

// ---- data movement -----------------------------------------------------------

/// x padded with `pad_value`: `before[d]` elements before and `after[d]` after
/// dimension d (missing entries are 0; all must be >= 0). Tag "pad".
Tensor pad(const Tensor& x, const std::vector<int64_t>& before, const std::vector<int64_t>& after,
           double pad_value = 0.0, std::string name = "pad_data");

/// x with a new shape of the same size; one extent may be -1 (inferred).
Tensor reshape(const Tensor& x, const std::vector<int64_t>& shape, std::string name = "reshape");

/// out dimension d is x dimension perm[d]; an empty perm reverses the dimensions.
Tensor transpose(const Tensor& x, const std::vector<int>& perm = {},
                 std::string name = "transpose");

/// The tensors joined along `axis`; other extents and dtypes must match.
Tensor concat(const std::vector<Tensor>& xs, int axis = 0, std::string name = "concat");

/// The slices of `data` along `axis` that `indices` (an integer tensor,
/// read at run time) pick: out shape data[:axis] + indices + data[axis+1:]
/// (ONNX's Gather: an embedding lookup). A negative index counts from the
/// end; one out of range is clamped into it, so no read leaves `data`.
Tensor take(const Tensor& data, const Tensor& indices, int axis = 0, std::string name = "take");

/// out[i...] = data[i...] but along `axis`, where it is indices[i...]
/// (ONNX's GatherElements; indices has data's rank, read at run time,
/// negative ones counting from the end, out-of-range ones clamped).
Tensor gather_elements(const Tensor& data, const Tensor& indices, int axis = 0);

/// x repeated `repeats[d]` times along each dimension d (numpy's tile).
Tensor tile(const Tensor& x, const std::vector<int64_t>& repeats);

/// Running sums along `axis`: out[..., i, ...] sums x over j <= i (j < i
/// when exclusive; j >= i, or j > i, when reverse).
Tensor cumsum(const Tensor& x, int axis, bool exclusive = false, bool reverse = false);

/// [indices..., depth] with `axis` the new one (-1: last): on_value where
/// the index (negative counting from depth) equals the position, off_value
/// elsewhere, in `dtype`.
Tensor one_hot(const Tensor& indices, int64_t depth, double on_value, double off_value,
               DataType dtype, int axis = -1);

/// data with updates written where indices point along `axis`
/// (ScatterElements): reduction "none" (the last update to a position
/// wins), "add", "mul", "max" or "min" (with the data's element).
Tensor scatter_elements(const Tensor& data, const Tensor& indices, const Tensor& updates, int axis,
                        const std::string& reduction = "none",
                        std::string name = "scatter_elements");
/// data [d0, .., dm-1, rest...] with updates[q] ([Q, rest...]) written at
/// index tuple indices[q] ([Q, m]) (ScatterND), reduced as scatter_elements.
Tensor scatter_nd(const Tensor& data, const Tensor& indices, const Tensor& updates,
                  const std::string& reduction = "none", std::string name = "scatter_nd");
/// The positions (int64) of the k largest (or smallest) elements along
/// `axis`, best first; equal elements in the order of their positions. Two
/// stages: each element's rank among its row ("<name>_rank", a count over
/// the row), then the position of each rank below k.
Tensor topk_indices(const Tensor& x, int64_t k, int axis, bool largest,
                    std::string name = "topk_indices");
/// The position (int64) of the largest (or smallest) element along `axis`:
/// the first such position, or the last with select_last. Two stages: the
/// extreme value ("<name>_value") and the position where it is.
Tensor arg_reduce(const Tensor& x, int axis, bool keepdims, bool largest, bool select_last,
                  std::string name = "arg_reduce");

/// numpy's x[begin:end:stride] per dimension (missing trailing entries take
/// the whole dimension; negative begin/end count from the end; begin/end are
/// clamped; a negative stride walks backwards). An empty result is kInvalidArgument.
Tensor slice(const Tensor& x, const std::vector<int64_t>& begin, const std::vector<int64_t>& end,
             const std::vector<int64_t>& strides = {}, std::string name = "slice");

/// data[N, C, H, W] resized to [N, C, out_h, out_w] as ONNX's Resize does:
/// "nearest" takes the input element nearest to each output's source
/// coordinate (asymmetric: floor(x * in / out); half_pixel and
/// align_corners: rounding halves down), "linear" interpolates between the
/// two nearest in each axis (edges clamped). coordinate_mode is
/// "half_pixel", "asymmetric" or "align_corners".
Tensor resize2d_nchw(const Tensor& data, int64_t out_h, int64_t out_w, const std::string& method,
                     const std::string& coordinate_mode, std::string name = "resize");
/// The two last axes of NCHW data resampled by taps: output row y is the sum
/// over k of row_weights[y, k] * input row rows[y, k] (indices [OH, T],
/// float32 weights [OH, T]), and columns alike. Any resize rule (cubic,
/// any coordinate mapping, extrapolation from a padded border) is its taps.
Tensor resample2d_nchw(const Tensor& data, const Tensor& rows, const Tensor& row_weights,
                       const Tensor& cols, const Tensor& col_weights,
                       std::string name = "resample");

// ---- reductions --------------------------------------------------------------

/// Sum over `axes` (empty: all); keepdims keeps them with extent 1.
Tensor reduce_sum(const Tensor& x, const std::vector<int>& axes = {}, bool keepdims = false,
                  std::string name = "reduce_sum");
/// Mean over `axes`: a sum stage ("<name>_sum") and a division.
Tensor reduce_mean(const Tensor& x, const std::vector<int>& axes = {}, bool keepdims = false,
                   std::string name = "reduce_mean");
/// Max over `axes`.
Tensor reduce_max(const Tensor& x, const std::vector<int>& axes = {}, bool keepdims = false,
                  std::string name = "reduce_max");
/// Min over `axes`.
Tensor reduce_min(const Tensor& x, const std::vector<int>& axes = {}, bool keepdims = false,
                  std::string name = "reduce_min");
Tensor reduce_prod(const Tensor& x, const std::vector<int>& axes = {}, bool keepdims = false,
                   std::string name = "reduce_prod");

}  // namespace tensortune::te
