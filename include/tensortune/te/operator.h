/// \file
/// The operators a model's graph is made of, each defined once, here: its
/// arity, the type of its attributes, how it fuses with its neighbours, the
/// checks of its arguments and attributes, and its computation as tensor
/// expressions, from which its result's shape and dtype come (infer_type):
/// there is no second shape function to keep in agreement. Attributes are
/// reflected nodes like everything else, one type per family of operators,
/// so that they save, compare and hash with a graph and no field can be
/// forgotten by any of those; their type keys keep the "graph." prefix of
/// the saved graphs that hold them.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <vector>

#include "tensortune/te/tensor.h"

namespace tensortune::te {

/// Base of the attribute nodes.
struct AttrsNode : Object {};
using Attrs = Ref<AttrsNode>;

/// conv2d: layouts "NCHW" (kernel "OIHW") or "NHWC" (kernel "HWIO").
struct Conv2dAttrsNode : AttrsNode {
  std::vector<int64_t> strides = {1, 1};
  std::vector<int64_t> padding = {0, 0, 0, 0};  ///< top, left, bottom, right
  std::vector<int64_t> dilation = {1, 1};
  int64_t groups = 1;
  std::string data_layout = "NCHW";
  TT_NODE(Conv2dAttrsNode, "graph.Conv2dAttrs")
  static void declare(FieldList<Conv2dAttrsNode>& f);
};

/// conv2d_transpose (NCHW data, kernel [C, K, R, S]).
struct Conv2dTransposeAttrsNode : AttrsNode {
  std::vector<int64_t> strides = {1, 1};
  std::vector<int64_t> padding = {0, 0, 0, 0};
  std::vector<int64_t> output_padding = {0, 0};
  TT_NODE(Conv2dTransposeAttrsNode, "graph.Conv2dTransposeAttrs")
  static void declare(FieldList<Conv2dTransposeAttrsNode>& f);
};

/// The Winograd transforms of a 3x3 convolution (see te::winograd_matrices):
/// output tiles of `tile`; the input transform pads by `padding` (top,
/// left, bottom, right), the output transform crops to `output_size`.
struct WinogradAttrsNode : AttrsNode {
  int64_t tile = 4;
  std::vector<int64_t> padding = {0, 0, 0, 0};
  std::vector<int64_t> output_size = {1, 1};  ///< height, width
  TT_NODE(WinogradAttrsNode, "graph.WinogradAttrs")
  static void declare(FieldList<WinogradAttrsNode>& f);
};

/// max_pool2d, avg_pool2d: window, strides, padding; "NCHW" or "NHWC".
struct Pool2dAttrsNode : AttrsNode {
  std::vector<int64_t> kernel = {1, 1};
  std::vector<int64_t> strides = {1, 1};
  std::vector<int64_t> padding = {0, 0, 0, 0};
  bool ceil_mode = false;
  bool count_include_pad = false;
  std::string layout = "NCHW";
  TT_NODE(Pool2dAttrsNode, "graph.Pool2dAttrs")
  static void declare(FieldList<Pool2dAttrsNode>& f);
};

/// global_avg_pool2d: "NCHW" or "NHWC".
struct LayoutAttrsNode : AttrsNode {
  std::string layout = "NCHW";
  TT_NODE(LayoutAttrsNode, "graph.LayoutAttrs")
  static void declare(FieldList<LayoutAttrsNode>& f);
};

/// One axis: softmax, log_softmax, concat, bias_add.
struct AxisAttrsNode : AttrsNode {
  int64_t axis = 0;
  TT_NODE(AxisAttrsNode, "graph.AxisAttrs")
  static void declare(FieldList<AxisAttrsNode>& f);
};

/// Normalisations: batch_norm (channel axis), layer_norm (normalised axis),
/// instance_norm (channel axis 1).
struct NormAttrsNode : AttrsNode {
  int64_t axis = 1;
  double epsilon = 1e-5;
  TT_NODE(NormAttrsNode, "graph.NormAttrs")
  static void declare(FieldList<NormAttrsNode>& f);
};

/// reshape: the new shape (fully known).
struct ReshapeAttrsNode : AttrsNode {
  std::vector<int64_t> shape;
  TT_NODE(ReshapeAttrsNode, "graph.ReshapeAttrs")
  static void declare(FieldList<ReshapeAttrsNode>& f);
};

/// transpose: output dimension d is input dimension perm[d].
struct TransposeAttrsNode : AttrsNode {
  std::vector<int64_t> perm;
  TT_NODE(TransposeAttrsNode, "graph.TransposeAttrs")
  static void declare(FieldList<TransposeAttrsNode>& f);
};

/// slice: numpy's [begin:end:stride] per dimension.
struct SliceAttrsNode : AttrsNode {
  std::vector<int64_t> begin, end, strides;
  TT_NODE(SliceAttrsNode, "graph.SliceAttrs")
  static void declare(FieldList<SliceAttrsNode>& f);
};

/// pad: elements before and after each dimension, with a constant.
struct PadAttrsNode : AttrsNode {
  std::vector<int64_t> before, after;
  double value = 0;
  TT_NODE(PadAttrsNode, "graph.PadAttrs")
  static void declare(FieldList<PadAttrsNode>& f);
};

/// reduce_sum, reduce_mean: axes (empty: all) and keepdims.
struct ReduceAttrsNode : AttrsNode {
  std::vector<int64_t> axes;
  bool keepdims = true;
  TT_NODE(ReduceAttrsNode, "graph.ReduceAttrs")
  static void declare(FieldList<ReduceAttrsNode>& f);
};

/// Scalar parameters of elementwise operators: clip (low, high),
/// leaky_relu (alpha), hard_sigmoid (alpha, beta).
struct ScalarAttrsNode : AttrsNode {
  double alpha = 0, beta = 0;
  TT_NODE(ScalarAttrsNode, "graph.ScalarAttrs")
  static void declare(FieldList<ScalarAttrsNode>& f);
};

/// cast: the target element type.
struct CastAttrsNode : AttrsNode {
  ir::DataType dtype;
  TT_NODE(CastAttrsNode, "graph.CastAttrs")
  static void declare(FieldList<CastAttrsNode>& f);
};

/// resize2d of an NCHW tensor to `size` (height, width): "nearest" (ONNX's
/// round_prefer_floor... asymmetric) or "linear" (half_pixel).
struct ResizeAttrsNode : AttrsNode {
  std::vector<int64_t> size = {1, 1};
  std::string method = "nearest";
  std::string coordinate_mode = "half_pixel";  ///< or "asymmetric", "align_corners"
  TT_NODE(ResizeAttrsNode, "graph.ResizeAttrs")
  static void declare(FieldList<ResizeAttrsNode>& f);
};

/// How an operator combines with its neighbours into tuning tasks.
enum class OpPattern {
  kElemwise,   ///< out[i] = f(in[i]): fuses into anything before it
  kBroadcast,  ///< elementwise with numpy broadcasting
  kInjective,  ///< each output element from a fixed input element (reshape, transpose, pad)
  kReduction,  ///< reduces axes (softmax, norms, pools)
  kAnchor,  ///< data reuse worth tiling (conv, dense, matmul): elementwise followers fuse into it
};

/// A value's type.
struct TensorType {
  std::vector<int64_t> shape;
  ir::DataType dtype;
};

/// One registered operator.
struct OpInfo {
  std::string name;
  std::string doc;  ///< one line
  int min_args = 1, max_args = 1;
  std::string attrs_type;  ///< the attributes node's type key; "" for none
  OpPattern pattern = OpPattern::kInjective;
  /// The checks the computation does not make itself (attribute values, a
  /// layout): a kInvalidArgument error saying what is wrong; may be empty.
  std::function<void(const std::vector<TensorType>& args, const AttrsNode* attrs)> check;
  /// The computation over `args`; checks the operands' ranks, shapes and
  /// dtypes as every te operator does.
  std::function<Tensor(const std::vector<Tensor>& args, const AttrsNode* attrs)> compute;
};

/// Registers an operator (at static initialisation); a duplicate is an internal error.
void register_op(OpInfo info);
/// The operator `name`; kNotFound listing the registered ones otherwise.
const OpInfo& find_op(std::string_view name);
/// Every registered operator name, sorted.
std::vector<std::string> op_names();

/// The result type of `op` on arguments of `args` types: the arity and the
/// attributes' type checked, then op.check, then the shape and dtype of
/// op.compute over placeholders. A user error saying what is wrong
/// otherwise.
TensorType infer_type(const OpInfo& op, const std::vector<TensorType>& args,
                      const AttrsNode* attrs);

}  // namespace tensortune::te
