/// \file
/// The attributes of the operators (te/operator.h), one reflected node type
/// per family: the graph holds them, the operator's computation and the
/// builders of te/ops.h take them as they are. Their type keys keep the
/// "graph." prefix of the saved graphs that hold them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensortune/ir/dtype.h"
#include "tensortune/object/object.h"

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
  /// The same stride, padding on every side, and dilation in both directions.
  static Conv2dAttrsNode uniform(int64_t stride, int64_t pad, int64_t dilation = 1,
                                 int64_t groups = 1);
  TT_NODE(Conv2dAttrsNode, "graph.Conv2dAttrs")
  static void declare(FieldList<Conv2dAttrsNode>& f);
};

/// conv2d_transpose (NCHW data, kernel [C, K, R, S]).
struct Conv2dTransposeAttrsNode : AttrsNode {
  std::vector<int64_t> strides = {1, 1};
  std::vector<int64_t> padding = {0, 0, 0, 0};   ///< top, left, bottom, right; each <= R-1 / S-1
  std::vector<int64_t> output_padding = {0, 0};  ///< extra rows/columns at the end, < stride
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
  std::vector<int64_t> padding = {0, 0, 0, 0};  ///< top, left, bottom, right
  /// Output extent rounds up instead of down: the last window may hang over
  /// the bottom/right padding; its overhanging part is never counted.
  bool ceil_mode = false;
  /// avg only: divide by the whole window including padding (PyTorch's
  /// count_include_pad=True) rather than by the input elements it covers.
  bool count_include_pad = false;
  std::string layout = "NCHW";
  /// A square window with the same stride and padding on every side.
  static Pool2dAttrsNode uniform(int64_t kernel, int64_t stride, int64_t pad);
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

/// tile: how many times each dimension repeats.
struct TileAttrsNode : AttrsNode {
  std::vector<int64_t> repeats;
  TT_NODE(TileAttrsNode, "graph.TileAttrs")
  static void declare(FieldList<TileAttrsNode>& f);
};

/// cumsum: along `axis`; exclusive leaves the element itself out, reverse
/// sums from the end.
struct CumSumAttrsNode : AttrsNode {
  int64_t axis = 0;
  bool exclusive = false;
  bool reverse = false;
  TT_NODE(CumSumAttrsNode, "graph.CumSumAttrs")
  static void declare(FieldList<CumSumAttrsNode>& f);
};

/// one_hot: `depth` positions along the new `axis`, on_value at the index,
/// off_value elsewhere, in `dtype`.
struct OneHotAttrsNode : AttrsNode {
  int64_t depth = 1;
  double on_value = 1, off_value = 0;
  ir::DataType dtype = ir::DataType::float32();
  int64_t axis = -1;
  TT_NODE(OneHotAttrsNode, "graph.OneHotAttrs")
  static void declare(FieldList<OneHotAttrsNode>& f);
};

/// lrn: the window of channels and the normalisation's constants.
struct LrnAttrsNode : AttrsNode {
  int64_t size = 1;
  double alpha = 1e-4, beta = 0.75, bias = 1.0;
  TT_NODE(LrnAttrsNode, "graph.LrnAttrs")
  static void declare(FieldList<LrnAttrsNode>& f);
};

/// argmax, argmin: the axis, whether it is kept (extent 1), and whether
/// ties give the last position rather than the first.
struct ArgReduceAttrsNode : AttrsNode {
  int64_t axis = 0;
  bool keepdims = true;
  bool select_last = false;
  TT_NODE(ArgReduceAttrsNode, "graph.ArgReduceAttrs")
  static void declare(FieldList<ArgReduceAttrsNode>& f);
};

/// scatter_elements (along `axis`) and scatter_nd: how updates combine.
struct ScatterAttrsNode : AttrsNode {
  int64_t axis = 0;
  std::string reduction = "none";  ///< or "add", "mul", "max", "min"
  TT_NODE(ScatterAttrsNode, "graph.ScatterAttrs")
  static void declare(FieldList<ScatterAttrsNode>& f);
};

/// topk_indices: the positions of the k largest (or smallest) along `axis`.
struct TopKAttrsNode : AttrsNode {
  int64_t k = 1;
  int64_t axis = -1;
  bool largest = true;
  TT_NODE(TopKAttrsNode, "graph.TopKAttrs")
  static void declare(FieldList<TopKAttrsNode>& f);
};

}  // namespace tensortune::te
