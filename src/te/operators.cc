// The operators of a graph: attributes, checks and computations, registered
// at static initialisation.
#include "tensortune/te/operator.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "te/op_util.h"
#include "tensortune/support/shape.h"
#include "tensortune/support/strings.h"
#include "tensortune/te/ops.h"

namespace tensortune::te {
namespace {

using ir::Expr;
using Types = std::vector<TensorType>;
using Tensors = std::vector<Tensor>;

template <class T>
const T& attrs_as(const AttrsNode* a) {
  const T* t = dynamic_cast<const T*>(a);
  TT_ICHECK(t, "attributes of the wrong type reached an operator");
  return *t;
}

/// `axis` in [-rank, rank) as a position; kInvalidArgument otherwise (the
/// call's error names the operator).
int64_t normalise_axis(int64_t axis, size_t rank) {
  return normalize_axis(axis, static_cast<int64_t>(rank), "");
}

void check_rank(const TensorType& t, size_t rank, const char* what) {
  TT_CHECK(t.shape.size() == rank, kInvalidArgument, what, " must have rank ", rank, ", got ",
           shape_text(t.shape));
}

void check_float(const TensorType& t, const char* what) {
  TT_CHECK(t.dtype.is_float(), kInvalidArgument, what, " must be a float type, got ",
           t.dtype.str());
}

void check_same_dtype(const Types& args) {
  for (const auto& a : args) {
    TT_CHECK(a.dtype == args[0].dtype, kInvalidArgument, "the arguments' types differ (",
             args[0].dtype.str(), " and ", a.dtype.str(), ")");
  }
}

void check_layout(const std::string& layout) {
  TT_CHECK(layout == "NCHW" || layout == "NHWC", kInvalidArgument, "layout '", layout,
           "' is not supported (NCHW or NHWC)");
}

int64_t pool_extent(int64_t in, int64_t k, int64_t s, int64_t before, int64_t after,
                    bool ceil_mode) {
  int64_t span = in + before + after - k;
  TT_CHECK(span >= 0, kInvalidArgument, "a window of ", k, " does not fit an extent of ", in,
           " padded by ", before, " and ", after);
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  // The last window must start inside the input or the leading padding.
  if (ceil_mode && (out - 1) * s >= in + before) --out;
  return out;
}

// ---- registration helpers ----

void unary(const std::string& name, const std::string& doc, std::function<Tensor(const Tensor&)> f,
           bool float_only = true) {
  register_op({name, doc, 1, 1, "", OpPattern::kElemwise,
               [float_only](const Types& a, const AttrsNode*) {
                 if (float_only) check_float(a[0], "the operand");
               },
               [f](const Tensors& a, const AttrsNode*) { return f(a[0]); }});
}

void binary(const std::string& name, const std::string& doc,
            std::function<Tensor(const Tensor&, const Tensor&)> f) {
  register_op({name, doc, 2, 2, "", OpPattern::kBroadcast, nullptr,
               [f](const Tensors& a, const AttrsNode*) { return f(a[0], a[1]); }});
}

void scalar_unary(const std::string& name, const std::string& doc,
                  std::function<Tensor(const Tensor&, const ScalarAttrsNode&)> f) {
  register_op({name, doc, 1, 1, ScalarAttrsNode::kTypeKey, OpPattern::kElemwise,
               [](const Types& a, const AttrsNode*) { check_float(a[0], "the operand"); },
               [f](const Tensors& a, const AttrsNode* attrs) {
                 return f(a[0], attrs_as<ScalarAttrsNode>(attrs));
               }});
}

Expr float_const(ir::DataType t, double v) { return ir::make_const(t, v); }

bool register_all() {
  // ---- anchors: data reuse worth tiling ----
  register_op({"nn.conv2d", "2-D convolution (NCHW with OIHW kernel, or NHWC with HWIO kernel)", 2,
               2, Conv2dAttrsNode::kTypeKey, OpPattern::kAnchor,
               [](const Types& a, const AttrsNode* attrs) {
                 const auto& c = attrs_as<Conv2dAttrsNode>(attrs);
                 check_layout(c.data_layout);
                 check_rank(a[0], 4, "the data");
                 check_rank(a[1], 4, "the kernel");
                 check_same_dtype(a);
                 bool nchw = c.data_layout == "NCHW";
                 int64_t ch = a[0].shape[nchw ? 1 : 3], h = a[0].shape[nchw ? 2 : 1],
                         w = a[0].shape[nchw ? 3 : 2];
                 int64_t k = a[1].shape[nchw ? 0 : 3], cg = a[1].shape[nchw ? 1 : 2],
                         r = a[1].shape[nchw ? 2 : 0], s = a[1].shape[nchw ? 3 : 1];
                 TT_CHECK(c.groups >= 1 && ch % c.groups == 0 && k % c.groups == 0 &&
                              cg * c.groups == ch,
                          kInvalidArgument, "groups ", c.groups, " do not fit ", ch,
                          " input channels, a kernel of ", cg, " channels per group and ", k,
                          " output channels");
                 // The window must fit the padded data (the output extents are compute's).
                 pool_extent(h, c.dilation[0] * (r - 1) + 1, c.strides[0], c.padding[0],
                             c.padding[2], false);
                 pool_extent(w, c.dilation[1] * (s - 1) + 1, c.strides[1], c.padding[1],
                             c.padding[3], false);
               },
               [](const Tensors& a, const AttrsNode* attrs) {
                 const auto& c = attrs_as<Conv2dAttrsNode>(attrs);
                 return c.data_layout == "NCHW" ? te::conv2d_nchw(a[0], a[1], c)
                                                : te::conv2d_nhwc(a[0], a[1], c);
               }});
  // An int8 convolution on words of four channels (the pass
  // int8_conv2d_words makes them): the packing, and the sum of dot products.
  register_op({"nn.pack_int8x4", "int8 or uint8 bytes in int32 words of four, along the last axis",
               1, 1, "", OpPattern::kInjective,
               [](const Types& a, const AttrsNode*) {
                 TT_CHECK(
                     a[0].dtype == ir::DataType::int_(8) || a[0].dtype == ir::DataType::uint(8),
                     kInvalidArgument, "packs ", a[0].dtype.str(), "; int8 and uint8 are packed");
                 TT_CHECK(!a[0].shape.empty(), kInvalidArgument, "packs a scalar");
               },
               [](const Tensors& a, const AttrsNode*) { return te::pack_int8x4(a[0]); }});
  register_op({"nn.conv2d_int8x4",
               "2-D convolution of NHWC uint8 data and an HWIO int8 kernel, both in words of "
               "four channels (nn.pack_int8x4), to int32; the padding holds the third operand, "
               "a word",
               3, 3, Conv2dAttrsNode::kTypeKey, OpPattern::kAnchor,
               [](const Types& a, const AttrsNode* attrs) {
                 const auto& c = attrs_as<Conv2dAttrsNode>(attrs);
                 TT_CHECK(c.data_layout == "NHWC" && c.groups == 1, kInvalidArgument,
                          "takes NHWC data and no groups");
                 check_rank(a[0], 4, "the data");
                 check_rank(a[1], 4, "the kernel");
                 check_rank(a[2], 0, "the pad word");
                 for (const auto& t : a) {
                   TT_CHECK(t.dtype == ir::DataType::int32(), kInvalidArgument,
                            "needs int32 words, got ", t.dtype.str());
                 }
                 TT_CHECK(a[0].shape[3] == a[1].shape[2], kInvalidArgument, "data ",
                          shape_text(a[0].shape), " and kernel ", shape_text(a[1].shape),
                          " differ in their words of channels");
                 pool_extent(a[0].shape[1], c.dilation[0] * (a[1].shape[0] - 1) + 1, c.strides[0],
                             c.padding[0], c.padding[2], false);
                 pool_extent(a[0].shape[2], c.dilation[1] * (a[1].shape[1] - 1) + 1, c.strides[1],
                             c.padding[1], c.padding[3], false);
               },
               [](const Tensors& a, const AttrsNode* attrs) {
                 return te::conv2d_nhwc_int8x4(a[0], a[1], a[2], attrs_as<Conv2dAttrsNode>(attrs));
               }});
  // The steps of a 3x3 convolution by Winograd's algorithm (the pass
  // winograd_conv2d makes them): the input transform, a batched product
  // with the transformed kernel (nn.matmul), the output transform. The
  // transforms' matrices are constants of the computation, not inputs. Each
  // transform groups like a reduction: the output's elementwise followers
  // fuse into it.
  register_op({"nn.winograd_input_transform",
               "Winograd's input transform of NHWC data: [alpha, alpha, N, TH, TW, C]", 1, 1,
               WinogradAttrsNode::kTypeKey, OpPattern::kReduction,
               [](const Types& a, const AttrsNode* attrs) {
                 const auto& wa = attrs_as<WinogradAttrsNode>(attrs);
                 check_rank(a[0], 4, "the data");
                 check_float(a[0], "the data");
                 // Attrs made in code skip load's validation: te names a bad tile.
                 te::winograd_matrices(wa.tile);
                 int64_t oh = a[0].shape[1] + wa.padding[0] + wa.padding[2] - 2;
                 int64_t ow = a[0].shape[2] + wa.padding[1] + wa.padding[3] - 2;
                 TT_CHECK(oh >= 1 && ow >= 1, kInvalidArgument, "data ", shape_text(a[0].shape),
                          " is smaller than the 3x3 window");
                 TT_CHECK(wa.output_size == (std::vector<int64_t>{oh, ow}), kInvalidArgument,
                          "output size ", shape_text(wa.output_size), " differs from the ", oh, "x",
                          ow, " the data and padding give");
               },
               [](const Tensors& a, const AttrsNode* attrs) {
                 const auto& wa = attrs_as<WinogradAttrsNode>(attrs);
                 return te::winograd_input_transform(
                     a[0], wa.tile, {wa.padding[0], wa.padding[1], wa.padding[2], wa.padding[3]});
               }});
  register_op({"nn.winograd_output_transform",
               "Winograd's output transform to NHWC: [N, OH, OW, K] from [alpha, alpha, N, TH, "
               "TW, K]",
               1, 1, WinogradAttrsNode::kTypeKey, OpPattern::kReduction,
               [](const Types& a, const AttrsNode* attrs) {
                 const auto& wa = attrs_as<WinogradAttrsNode>(attrs);
                 check_rank(a[0], 6, "the products");
                 check_float(a[0], "the products");
                 int64_t alpha = te::winograd_matrices(wa.tile).alpha, oh = wa.output_size[0],
                         ow = wa.output_size[1];
                 const std::vector<int64_t>& s = a[0].shape;
                 TT_CHECK(s[0] == alpha && s[1] == alpha && s[3] == (oh + wa.tile - 1) / wa.tile &&
                              s[4] == (ow + wa.tile - 1) / wa.tile,
                          kInvalidArgument, "products ", shape_text(s), " do not make a ", oh, "x",
                          ow, " output with tiles of ", wa.tile);
               },
               [](const Tensors& a, const AttrsNode* attrs) {
                 const auto& wa = attrs_as<WinogradAttrsNode>(attrs);
                 return te::winograd_output_transform(a[0], wa.tile, wa.output_size[0],
                                                      wa.output_size[1]);
               }});
  register_op(
      {"nn.conv2d_transpose", "transposed 2-D convolution, NCHW data and a [C, K, R, S] kernel", 2,
       2, Conv2dTransposeAttrsNode::kTypeKey, OpPattern::kAnchor,
       [](const Types& a, const AttrsNode* attrs) {
         const auto& c = attrs_as<Conv2dTransposeAttrsNode>(attrs);
         check_rank(a[0], 4, "the data");
         check_rank(a[1], 4, "the kernel");
         check_same_dtype(a);
         TT_CHECK(a[1].shape[0] == a[0].shape[1], kInvalidArgument, "the kernel's ", a[1].shape[0],
                  " input channels differ from the data's ", a[0].shape[1]);
         int64_t oh = (a[0].shape[2] - 1) * c.strides[0] - c.padding[0] - c.padding[2] +
                      a[1].shape[2] + c.output_padding[0];
         int64_t ow = (a[0].shape[3] - 1) * c.strides[1] - c.padding[1] - c.padding[3] +
                      a[1].shape[3] + c.output_padding[1];
         TT_CHECK(oh >= 1 && ow >= 1, kInvalidArgument, "the output would be empty");
       },
       [](const Tensors& a, const AttrsNode* attrs) {
         return te::conv2d_transpose_nchw(a[0], a[1], attrs_as<Conv2dTransposeAttrsNode>(attrs));
       }});
  register_op({"nn.dense", "out[M, N] = data[M, K] . weight[N, K]^T", 2, 2, "", OpPattern::kAnchor,
               [](const Types& a, const AttrsNode*) {
                 check_rank(a[0], 2, "the data");
                 check_rank(a[1], 2, "the weight");
                 check_same_dtype(a);
                 TT_CHECK(a[0].shape[1] == a[1].shape[1], kInvalidArgument, "data ",
                          shape_text(a[0].shape), " and weight ", shape_text(a[1].shape),
                          " differ in K");
               },
               [](const Tensors& a, const AttrsNode*) { return te::dense(a[0], a[1]); }});
  register_op({"nn.matmul", "numpy's matmul of [..., M, K] and [..., K, N] (batch dims broadcast)",
               2, 2, "", OpPattern::kAnchor,
               [](const Types& a, const AttrsNode*) {
                 check_same_dtype(a);
                 TT_CHECK(a[0].shape.size() >= 2 && a[1].shape.size() >= 2, kInvalidArgument,
                          "both operands need rank 2 or more, got ", shape_text(a[0].shape),
                          " and ", shape_text(a[1].shape));
                 size_t ra = a[0].shape.size(), rb = a[1].shape.size();
                 TT_CHECK(a[0].shape[ra - 1] == a[1].shape[rb - 2], kInvalidArgument,
                          "K differs: ", shape_text(a[0].shape), " and ", shape_text(a[1].shape));
                 std::vector<int64_t> ba(a[0].shape.begin(), a[0].shape.end() - 2),
                     bb(a[1].shape.begin(), a[1].shape.end() - 2);
                 te::broadcast_shape(ba, bb);
                 // Broadcast either way along the batch, but only whole: one side's
                 // batch all ones or both the same.
                 auto product = [](const std::vector<int64_t>& s) {
                   return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>());
                 };
                 TT_CHECK(product(ba) == 1 || product(bb) == 1 || ba == bb, kInvalidArgument,
                          "batch dimensions ", shape_text(ba), " and ", shape_text(bb),
                          " broadcast only partly; not supported");
               },
               [](const Tensors& a, const AttrsNode*) {
                 auto shape_a = a[0].shape(), shape_b = a[1].shape();
                 if (shape_a.size() == 2 && shape_b.size() == 2) return te::matmul(a[0], a[1]);
                 // The product at the output's own axes: a reshape stage
                 // around it would copy the product to another shape, and a
                 // copy is no elementwise consumer its tiles could take in.
                 if (shape_a.size() == 3 && shape_b.size() == 3)
                   return te::batch_matmul(a[0], a[1]);
                 return te::batch_matmul_nd(a[0], a[1]);
               }});

  // ---- elementwise ----
  unary("relu", "max(x, 0)", te::relu, false);
  unary("sigmoid", "1 / (1 + e^-x)", te::sigmoid);
  unary("tanh", "hyperbolic tangent", te::tanh);
  unary("erf", "error function", te::erf);
  unary("sqrt", "square root", te::sqrt);
  unary("exp", "e^x", te::exp);
  unary("log", "natural logarithm", te::log);
  unary("abs", "|x|", te::abs, false);
  unary("negative", "-x", te::negative, false);
  unary("floor", "round down", te::floor);
  unary("reciprocal", "1 / x", [](const Tensor& x) {
    return te::elemwise(
        x, [](const Expr& e) { return float_const(e.dtype(), 1.0) / e; }, "reciprocal");
  });
  unary("hard_swish", "x * clip(x / 6 + 1/2, 0, 1)", [](const Tensor& x) {
    return te::elemwise(
        x,
        [&](const Expr& e) {
          Expr t = e * float_const(e.dtype(), 1.0 / 6) + float_const(e.dtype(), 0.5);
          return e * ir::min(ir::max(t, float_const(e.dtype(), 0)), float_const(e.dtype(), 1));
        },
        "hard_swish");
  });
  scalar_unary(
      "leaky_relu", "x for x > 0, alpha * x elsewhere",
      [](const Tensor& x, const ScalarAttrsNode& a) { return te::leaky_relu(x, a.alpha); });
  scalar_unary("clip", "min(max(x, alpha), beta)", [](const Tensor& x, const ScalarAttrsNode& a) {
    return te::clip(x, a.alpha, a.beta);
  });
  scalar_unary(
      "hard_sigmoid", "clip(alpha * x + beta, 0, 1)",
      [](const Tensor& x, const ScalarAttrsNode& a) {
        return te::elemwise(
            x,
            [&](const Expr& e) {
              Expr t = e * float_const(e.dtype(), a.alpha) + float_const(e.dtype(), a.beta);
              return ir::min(ir::max(t, float_const(e.dtype(), 0)), float_const(e.dtype(), 1));
            },
            "hard_sigmoid");
      });
  unary("ceil", "round up", te::ceil);
  unary("round", "round to the nearest integer, ties to even", te::round);
  unary("sin", "sine", te::sin);
  unary("cos", "cosine", te::cos);
  unary("atan", "arctangent", te::atan);
  unary(
      "sign", "-1, 0 or 1",
      [](const Tensor& x) {
        return te::step_elemwise(
            x,
            [](const Expr& e) {
              Expr zero = ir::make_const(e.dtype(), 0);
              return ir::select(e > zero, ir::make_const(e.dtype(), 1),
                                ir::select(e < zero, ir::make_const(e.dtype(), -1), zero));
            },
            "sign");
      },
      false);
  // log(1 + e^x) as max(x, 0) + log(1 + e^-|x|): no overflow for large x.
  auto softplus = [](const Expr& e) {
    return ir::max(e, float_const(e.dtype(), 0)) +
           ir::log(float_const(e.dtype(), 1) + ir::exp(-ir::fabs(e)));
  };
  unary("softplus", "log(1 + e^x)",
        [softplus](const Tensor& x) { return te::elemwise(x, softplus, "softplus"); });
  unary("softsign", "x / (1 + |x|)", [](const Tensor& x) {
    return te::elemwise(
        x, [](const Expr& e) { return e / (float_const(e.dtype(), 1) + ir::fabs(e)); }, "softsign");
  });
  unary("mish", "x * tanh(softplus(x))", [softplus](const Tensor& x) {
    return te::elemwise(
        x, [softplus](const Expr& e) { return e * ir::tanh(softplus(e)); }, "mish");
  });
  unary("gelu", "0.5 x (1 + erf(x / sqrt 2))", te::gelu);
  unary("gelu_tanh", "0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))", [](const Tensor& x) {
    return te::elemwise(
        x,
        [](const Expr& e) {
          ir::DataType t = e.dtype();
          Expr inner =
              float_const(t, 0.7978845608028654) * (e + float_const(t, 0.044715) * e * e * e);
          return float_const(t, 0.5) * e * (float_const(t, 1) + ir::tanh(inner));
        },
        "gelu_tanh");
  });
  scalar_unary("elu", "x for x >= 0, alpha * (e^x - 1) elsewhere",
               [](const Tensor& x, const ScalarAttrsNode& a) {
                 return te::elemwise(
                     x,
                     [&](const Expr& e) {
                       ir::DataType t = e.dtype();
                       return ir::select(e < float_const(t, 0),
                                         float_const(t, a.alpha) * (ir::exp(e) - float_const(t, 1)),
                                         e);
                     },
                     "elu");
               });
  scalar_unary("selu", "beta * x for x > 0, beta * alpha * (e^x - 1) elsewhere",
               [](const Tensor& x, const ScalarAttrsNode& a) {
                 return te::elemwise(
                     x,
                     [&](const Expr& e) {
                       ir::DataType t = e.dtype();
                       Expr negative = float_const(t, a.alpha) * (ir::exp(e) - float_const(t, 1));
                       return float_const(t, a.beta) *
                              ir::select(e > float_const(t, 0), e, negative);
                     },
                     "selu");
               });
  scalar_unary("celu", "max(x, 0) + min(0, alpha * (e^(x / alpha) - 1))",
               [](const Tensor& x, const ScalarAttrsNode& a) {
                 return te::elemwise(
                     x,
                     [&](const Expr& e) {
                       ir::DataType t = e.dtype();
                       Expr zero = float_const(t, 0);
                       Expr negative =
                           float_const(t, a.alpha) *
                           (ir::exp(e * float_const(t, 1 / a.alpha)) - float_const(t, 1));
                       return ir::max(e, zero) + ir::min(zero, negative);
                     },
                     "celu");
               });
  scalar_unary("thresholded_relu", "x for x > alpha, 0 elsewhere",
               [](const Tensor& x, const ScalarAttrsNode& a) {
                 return te::elemwise(
                     x,
                     [&](const Expr& e) {
                       return ir::select(e > float_const(e.dtype(), a.alpha), e,
                                         float_const(e.dtype(), 0));
                     },
                     "thresholded_relu");
               });
  binary("equal", "a == b, broadcast (bool)", te::equal);
  binary("greater", "a > b, broadcast (bool)", te::greater);
  binary("greater_equal", "a >= b, broadcast (bool)", te::greater_equal);
  binary("less", "a < b, broadcast (bool)", te::less);
  binary("less_equal", "a <= b, broadcast (bool)", te::less_equal);
  binary("logical_and", "a and b, broadcast (bools)", te::logical_and);
  binary("logical_or", "a or b, broadcast (bools)", te::logical_or);
  binary("logical_xor", "a xor b, broadcast (bools)", te::logical_xor);
  unary("logical_not", "not x (bool)", te::logical_not, false);
  register_op({"where", "condition ? x : y, the three broadcast", 3, 3, "", OpPattern::kBroadcast,
               nullptr,
               [](const Tensors& a, const AttrsNode*) { return te::where(a[0], a[1], a[2]); }});
  register_op({"take", "the slices of data along `axis` that run-time indices pick (Gather)", 2, 2,
               AxisAttrsNode::kTypeKey, OpPattern::kInjective, nullptr,
               [](const Tensors& a, const AttrsNode* attrs) {
                 return te::take(a[0], a[1], static_cast<int>(attrs_as<AxisAttrsNode>(attrs).axis));
               }});
  register_op({"gather_elements", "data with run-time indices along `axis` (GatherElements)", 2, 2,
               AxisAttrsNode::kTypeKey, OpPattern::kInjective, nullptr,
               [](const Tensors& a, const AttrsNode* attrs) {
                 return te::gather_elements(a[0], a[1],
                                            static_cast<int>(attrs_as<AxisAttrsNode>(attrs).axis));
               }});
  register_op({"tile", "x repeated along each dimension", 1, 1, TileAttrsNode::kTypeKey,
               OpPattern::kInjective, nullptr, [](const Tensors& a, const AttrsNode* attrs) {
                 return te::tile(a[0], attrs_as<TileAttrsNode>(attrs).repeats);
               }});
  register_op({"cumsum", "running sums along `axis`", 1, 1, CumSumAttrsNode::kTypeKey,
               OpPattern::kReduction, nullptr, [](const Tensors& a, const AttrsNode* attrs) {
                 const auto& c = attrs_as<CumSumAttrsNode>(attrs);
                 return te::cumsum(a[0], static_cast<int>(c.axis), c.exclusive, c.reverse);
               }});
  register_op({"one_hot", "on_value at each index along a new axis, off_value elsewhere", 1, 1,
               OneHotAttrsNode::kTypeKey, OpPattern::kInjective, nullptr,
               [](const Tensors& a, const AttrsNode* attrs) {
                 const auto& o = attrs_as<OneHotAttrsNode>(attrs);
                 return te::one_hot(a[0], o.depth, o.on_value, o.off_value, o.dtype,
                                    static_cast<int>(o.axis));
               }});
  register_op({"expand", "x broadcast with `shape`", 1, 1, ReshapeAttrsNode::kTypeKey,
               OpPattern::kBroadcast, nullptr, [](const Tensors& a, const AttrsNode* attrs) {
                 return te::expand(a[0], attrs_as<ReshapeAttrsNode>(attrs).shape);
               }});
  binary("add", "a + b, broadcast", te::add);
  binary("subtract", "a - b, broadcast", te::subtract);
  binary("multiply", "a * b, broadcast", te::multiply);
  binary("divide", "a / b, broadcast", te::divide);
  binary("power", "a ^ b, broadcast", te::power);
  binary("floor_mod", "a mod b with b's sign (integers), broadcast", te::floor_mod);
  binary("trunc_mod", "a mod b with a's sign, broadcast", te::trunc_mod);
  binary("maximum", "max(a, b), broadcast", te::maximum);
  binary("minimum", "min(a, b), broadcast", te::minimum);
  binary("prelu", "x for x > 0, slope * x elsewhere (slope broadcast)",
         [](const Tensor& x, const Tensor& slope) {
           return te::broadcast_binary(
               x, slope,
               [](const Expr& a, const Expr& s) {
                 return ir::select(a > ir::make_const(a.dtype(), 0), a, a * s);
               },
               "prelu");
         });
  register_op({"cast", "conversion to another element type", 1, 1, CastAttrsNode::kTypeKey,
               OpPattern::kElemwise, nullptr, [](const Tensors& a, const AttrsNode* attrs) {
                 return te::cast(a[0], attrs_as<CastAttrsNode>(attrs).dtype);
               }});
  // What a float16 product computed in float32 ends with (the graph passes
  // float16_conv2d_in_float32 and float16_ops_in_float32 make it): the
  // operators fused after it read the float32 value and round once, at
  // their end, as they do after the float16 operator itself; a cast
  // converts the float32 value.
  register_op({"narrow",
               "rounding to a narrower float type that fused operators after it read through", 1, 1,
               CastAttrsNode::kTypeKey, OpPattern::kElemwise, nullptr,
               [](const Tensors& a, const AttrsNode* attrs) {
                 return detail::narrow(a[0], attrs_as<CastAttrsNode>(attrs).dtype, "narrow");
               }});
  register_op(
      {"nn.bias_add", "data + bias along `axis`", 2, 2, AxisAttrsNode::kTypeKey,
       OpPattern::kBroadcast,
       [](const Types& a, const AttrsNode* attrs) {
         check_same_dtype(a);
         int64_t axis = normalise_axis(attrs_as<AxisAttrsNode>(attrs).axis, a[0].shape.size());
         TT_CHECK(a[1].shape.size() == 1 && a[1].shape[0] == a[0].shape[axis], kInvalidArgument,
                  "the bias must be [", a[0].shape[axis], "], got ", shape_text(a[1].shape));
       },
       [](const Tensors& a, const AttrsNode* attrs) {
         int64_t axis = normalise_axis(attrs_as<AxisAttrsNode>(attrs).axis, a[0].ndim());
         return te::bias_add(a[0], a[1], static_cast<int>(axis));
       }});

  // ---- normalisation and pooling ----
  register_op({"nn.batch_norm", "inference batch normalisation along `axis`", 5, 5,
               NormAttrsNode::kTypeKey, OpPattern::kBroadcast,
               [](const Types& a, const AttrsNode* attrs) {
                 check_same_dtype(a);
                 int64_t axis =
                     normalise_axis(attrs_as<NormAttrsNode>(attrs).axis, a[0].shape.size());
                 for (size_t i = 1; i < 5; ++i) {
                   TT_CHECK(a[i].shape.size() == 1 && a[i].shape[0] == a[0].shape[axis],
                            kInvalidArgument, "scale, bias, mean and variance must be [",
                            a[0].shape[axis], "], got ", shape_text(a[i].shape));
                 }
               },
               [](const Tensors& a, const AttrsNode* attrs) {
                 const auto& n = attrs_as<NormAttrsNode>(attrs);
                 int64_t axis = normalise_axis(n.axis, a[0].ndim());
                 return te::batch_norm_inference(a[0], a[1], a[2], a[3], a[4],
                                                 static_cast<int>(axis), n.epsilon);
               }});
  register_op({"nn.layer_norm", "layer normalisation over the last axis, with scale and bias", 3, 3,
               NormAttrsNode::kTypeKey, OpPattern::kReduction,
               [](const Types& a, const AttrsNode* attrs) {
                 check_same_dtype(a);
                 check_float(a[0], "the data");
                 int64_t axis =
                     normalise_axis(attrs_as<NormAttrsNode>(attrs).axis, a[0].shape.size());
                 TT_CHECK(axis + 1 == static_cast<int64_t>(a[0].shape.size()), kInvalidArgument,
                          "only the last axis is normalised, got axis ", axis);
                 for (size_t i = 1; i < 3; ++i) {
                   TT_CHECK(a[i].shape.size() == 1 && a[i].shape[0] == a[0].shape.back(),
                            kInvalidArgument, "scale and bias must be [", a[0].shape.back(),
                            "], got ", shape_text(a[i].shape));
                 }
               },
               [](const Tensors& a, const AttrsNode* attrs) {
                 return te::layer_norm(a[0], a[1], a[2], attrs_as<NormAttrsNode>(attrs).epsilon);
               }});
  register_op(
      {"nn.instance_norm", "per sample and channel normalisation over the spatial axes (NC...)", 3,
       3, NormAttrsNode::kTypeKey, OpPattern::kReduction,
       [](const Types& a, const AttrsNode*) {
         check_same_dtype(a);
         check_float(a[0], "the data");
         TT_CHECK(a[0].shape.size() >= 3, kInvalidArgument, "the data needs rank 3 or more");
         for (size_t i = 1; i < 3; ++i) {
           TT_CHECK(a[i].shape.size() == 1 && a[i].shape[0] == a[0].shape[1], kInvalidArgument,
                    "scale and bias must be [", a[0].shape[1], "], got ", shape_text(a[i].shape));
         }
       },
       [](const Tensors& a, const AttrsNode* attrs) {
         const Tensor& x = a[0];
         std::vector<int> spatial;
         for (int d = 2; d < x.ndim(); ++d) spatial.push_back(d);
         Tensor mean = te::reduce_mean(x, spatial, true, "in_mean");
         Tensor centred = te::subtract(x, mean);
         Tensor var = te::reduce_mean(te::multiply(centred, centred), spatial, true, "in_var");
         double eps = attrs_as<NormAttrsNode>(attrs).epsilon;
         Tensor inv = te::elemwise(
             var, [&](const Expr& v) { return ir::rsqrt(v + float_const(v.dtype(), eps)); },
             "in_rsqrt");
         std::vector<int64_t> cshape(static_cast<size_t>(x.ndim() - 1), 1);
         cshape[0] = x.shape()[1];
         Tensor scale = te::reshape(a[1], cshape, "in_scale"),
                bias = te::reshape(a[2], cshape, "in_bias");
         return te::add(te::multiply(te::multiply(centred, inv), scale), bias);
       }});
  for (const char* name : {"nn.max_pool2d", "nn.avg_pool2d"}) {
    bool is_max = std::string(name) == "nn.max_pool2d";
    register_op({name, is_max ? "max over 2-D windows" : "mean over 2-D windows", 1, 1,
                 Pool2dAttrsNode::kTypeKey, OpPattern::kReduction,
                 [](const Types& a, const AttrsNode* attrs) {
                   const auto& p = attrs_as<Pool2dAttrsNode>(attrs);
                   check_layout(p.layout);
                   check_rank(a[0], 4, "the data");
                   bool nchw = p.layout == "NCHW";
                   // The window must fit the padded data (the output extents are compute's).
                   pool_extent(a[0].shape[nchw ? 2 : 1], p.kernel[0], p.strides[0], p.padding[0],
                               p.padding[2], p.ceil_mode);
                   pool_extent(a[0].shape[nchw ? 3 : 2], p.kernel[1], p.strides[1], p.padding[1],
                               p.padding[3], p.ceil_mode);
                 },
                 [is_max](const Tensors& a, const AttrsNode* attrs) {
                   const auto& p = attrs_as<Pool2dAttrsNode>(attrs);
                   if (p.layout == "NCHW") {
                     return is_max ? te::max_pool2d_nchw(a[0], p) : te::avg_pool2d_nchw(a[0], p);
                   }
                   return is_max ? te::max_pool2d_nhwc(a[0], p) : te::avg_pool2d_nhwc(a[0], p);
                 }});
  }
  for (const char* name : {"argmax", "argmin"}) {
    const bool largest = std::string(name) == "argmax";
    register_op({name,
                 largest ? "position of the largest along `axis` (int64)"
                         : "position of the smallest along `axis` (int64)",
                 1, 1, ArgReduceAttrsNode::kTypeKey, OpPattern::kReduction, nullptr,
                 [largest](const Tensors& a, const AttrsNode* attrs) {
                   const auto& r = attrs_as<ArgReduceAttrsNode>(attrs);
                   return te::arg_reduce(a[0], static_cast<int>(r.axis), r.keepdims, largest,
                                         r.select_last, largest ? "argmax" : "argmin");
                 }});
  }
  register_op({"scatter_elements",
               "data with updates written where indices point along `axis` (ScatterElements)", 3, 3,
               ScatterAttrsNode::kTypeKey, OpPattern::kReduction, nullptr,
               [](const Tensors& a, const AttrsNode* attrs) {
                 const auto& s = attrs_as<ScatterAttrsNode>(attrs);
                 return te::scatter_elements(a[0], a[1], a[2], static_cast<int>(s.axis),
                                             s.reduction);
               }});
  register_op(
      {"scatter_nd", "data with updates [Q, rest] written at index tuples [Q, m] (ScatterND)", 3, 3,
       ScatterAttrsNode::kTypeKey, OpPattern::kReduction, nullptr,
       [](const Tensors& a, const AttrsNode* attrs) {
         return te::scatter_nd(a[0], a[1], a[2], attrs_as<ScatterAttrsNode>(attrs).reduction);
       }});
  register_op({"topk_indices", "positions (int64) of the k largest or smallest along `axis`", 1, 1,
               TopKAttrsNode::kTypeKey, OpPattern::kReduction,
               [](const Types& a, const AttrsNode* attrs) {
                 const auto& t = attrs_as<TopKAttrsNode>(attrs);
                 const auto rank = static_cast<int64_t>(a[0].shape.size());
                 TT_CHECK(t.axis >= -rank && t.axis < rank, kInvalidArgument, "axis ", t.axis,
                          " is out of range for rank ", rank);
                 const int64_t extent = a[0].shape[static_cast<size_t>((t.axis + rank) % rank)];
                 TT_CHECK(t.k >= 1 && t.k <= extent, kInvalidArgument, "k = ", t.k,
                          " must lie in [1, ", extent, "]");
               },
               [](const Tensors& a, const AttrsNode* attrs) {
                 const auto& t = attrs_as<TopKAttrsNode>(attrs);
                 return te::topk_indices(a[0], t.k, static_cast<int>(t.axis), t.largest);
               }});
  register_op({"nn.lrn", "local response normalisation across channels (NCHW)", 1, 1,
               LrnAttrsNode::kTypeKey, OpPattern::kReduction, nullptr,
               [](const Tensors& a, const AttrsNode* attrs) {
                 const auto& l = attrs_as<LrnAttrsNode>(attrs);
                 return te::lrn(a[0], l.size, l.alpha, l.beta, l.bias);
               }});
  register_op({"nn.global_max_pool2d", "max over the two spatial axes (kept with extent 1)", 1, 1,
               LayoutAttrsNode::kTypeKey, OpPattern::kReduction,
               [](const Types& a, const AttrsNode* attrs) {
                 check_layout(attrs_as<LayoutAttrsNode>(attrs).layout);
                 check_rank(a[0], 4, "the data");
               },
               [](const Tensors& a, const AttrsNode* attrs) {
                 return attrs_as<LayoutAttrsNode>(attrs).layout == "NCHW"
                            ? te::global_max_pool2d_nchw(a[0])
                            : te::reduce_max(a[0], {1, 2}, true, "global_max_pool2d");
               }});
  register_op({"nn.global_avg_pool2d", "mean over the two spatial axes (kept with extent 1)", 1, 1,
               LayoutAttrsNode::kTypeKey, OpPattern::kReduction,
               [](const Types& a, const AttrsNode* attrs) {
                 const auto& l = attrs_as<LayoutAttrsNode>(attrs);
                 check_layout(l.layout);
                 check_rank(a[0], 4, "the data");
               },
               [](const Tensors& a, const AttrsNode* attrs) {
                 bool nchw = attrs_as<LayoutAttrsNode>(attrs).layout == "NCHW";
                 return nchw ? te::global_avg_pool2d_nchw(a[0])
                             : te::reduce_mean(a[0], {1, 2}, true, "global_avg_pool2d");
               }});
  for (const char* name : {"nn.softmax", "nn.log_softmax"}) {
    bool log = std::string(name) == "nn.log_softmax";
    register_op({name, log ? "log of softmax along `axis`" : "softmax along `axis`", 1, 1,
                 AxisAttrsNode::kTypeKey, OpPattern::kReduction,
                 [](const Types& a, const AttrsNode* attrs) {
                   check_float(a[0], "the data");
                   normalise_axis(attrs_as<AxisAttrsNode>(attrs).axis, a[0].shape.size());
                 },
                 [log](const Tensors& a, const AttrsNode* attrs) {
                   int axis = static_cast<int>(
                       normalise_axis(attrs_as<AxisAttrsNode>(attrs).axis, a[0].ndim()));
                   return log ? te::log_softmax(a[0], axis) : te::softmax(a[0], axis);
                 }});
  }
  for (const char* name :
       {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"}) {
    std::string op = name;
    register_op({op, op.substr(7) + " over `axes` (all when empty)", 1, 1,
                 ReduceAttrsNode::kTypeKey, OpPattern::kReduction,
                 [](const Types& a, const AttrsNode* attrs) {
                   for (int64_t axis : attrs_as<ReduceAttrsNode>(attrs).axes) {
                     normalise_axis(axis, a[0].shape.size());
                   }
                 },
                 [op](const Tensors& a, const AttrsNode* attrs) {
                   const auto& r = attrs_as<ReduceAttrsNode>(attrs);
                   std::vector<int> axes;
                   for (int64_t axis : r.axes) {
                     axes.push_back(static_cast<int>(normalise_axis(axis, a[0].ndim())));
                   }
                   std::sort(axes.begin(), axes.end());
                   if (op == "reduce_sum") return te::reduce_sum(a[0], axes, r.keepdims);
                   if (op == "reduce_mean") return te::reduce_mean(a[0], axes, r.keepdims);
                   if (op == "reduce_min") return te::reduce_min(a[0], axes, r.keepdims);
                   if (op == "reduce_prod") return te::reduce_prod(a[0], axes, r.keepdims);
                   return te::reduce_max(a[0], axes, r.keepdims);
                 }});
  }

  // ---- data movement ----
  register_op({"reshape", "the same elements in another shape", 1, 1, ReshapeAttrsNode::kTypeKey,
               OpPattern::kInjective,
               [](const Types& a, const AttrsNode* attrs) {
                 const auto& r = attrs_as<ReshapeAttrsNode>(attrs);
                 int64_t in = 1, out = 1;
                 for (int64_t d : a[0].shape) in *= d;
                 for (int64_t d : r.shape) {
                   TT_CHECK(d >= 1, kInvalidArgument, "the new shape ", shape_text(r.shape),
                            " has an extent below 1");
                   out *= d;
                 }
                 TT_CHECK(in == out, kInvalidArgument, "cannot reshape ", shape_text(a[0].shape),
                          " (", in, " elements) to ", shape_text(r.shape), " (", out, ")");
               },
               [](const Tensors& a, const AttrsNode* attrs) {
                 return te::reshape(a[0], attrs_as<ReshapeAttrsNode>(attrs).shape);
               }});
  register_op({"transpose", "output dimension d is input dimension perm[d]", 1, 1,
               TransposeAttrsNode::kTypeKey, OpPattern::kInjective,
               [](const Types& a, const AttrsNode* attrs) {
                 const auto& t = attrs_as<TransposeAttrsNode>(attrs);
                 TT_CHECK(t.perm.size() == a[0].shape.size(), kInvalidArgument, "perm has ",
                          t.perm.size(), " entries for rank ", a[0].shape.size());
                 std::vector<bool> seen(t.perm.size(), false);
                 for (int64_t p : t.perm) {
                   TT_CHECK(p >= 0 && p < static_cast<int64_t>(t.perm.size()) && !seen[p],
                            kInvalidArgument, "perm is not a permutation of 0..",
                            t.perm.size() - 1);
                   seen[p] = true;
                 }
               },
               [](const Tensors& a, const AttrsNode* attrs) {
                 auto perm = attrs_as<TransposeAttrsNode>(attrs).perm;
                 return te::transpose(a[0], std::vector<int>(perm.begin(), perm.end()));
               }});
  register_op(
      {"concat", "the arguments joined along `axis`", 1, 1024, AxisAttrsNode::kTypeKey,
       OpPattern::kInjective,
       [](const Types& a, const AttrsNode* attrs) {
         check_same_dtype(a);
         int64_t axis = normalise_axis(attrs_as<AxisAttrsNode>(attrs).axis, a[0].shape.size());
         for (const auto& t : a) {
           TT_CHECK(t.shape.size() == a[0].shape.size(), kInvalidArgument, "ranks differ");
           for (size_t d = 0; d < t.shape.size(); ++d) {
             TT_CHECK(static_cast<int64_t>(d) == axis || t.shape[d] == a[0].shape[d],
                      kInvalidArgument, "extents off the axis differ: ", shape_text(a[0].shape),
                      " and ", shape_text(t.shape));
           }
         }
       },
       [](const Tensors& a, const AttrsNode* attrs) {
         int axis =
             static_cast<int>(normalise_axis(attrs_as<AxisAttrsNode>(attrs).axis, a[0].ndim()));
         return a.size() == 1 ? te::reshape(a[0], a[0].shape(), "concat") : te::concat(a, axis);
       }});
  register_op({"slice", "numpy's x[begin:end:stride]", 1, 1, SliceAttrsNode::kTypeKey,
               OpPattern::kInjective,
               [](const Types& a, const AttrsNode* attrs) {
                 const auto& s = attrs_as<SliceAttrsNode>(attrs);
                 TT_CHECK(s.begin.size() == a[0].shape.size() && s.end.size() == s.begin.size() &&
                              s.strides.size() == s.begin.size(),
                          kInvalidArgument, "begin, end and strides need one entry per dimension");
                 for (size_t d = 0; d < s.begin.size(); ++d) {
                   int64_t n = a[0].shape[d], st = s.strides[d];
                   TT_CHECK(st != 0, kInvalidArgument, "a stride of 0");
                   auto clamp = [&](int64_t v, int64_t lo, int64_t hi) {
                     if (v < 0) v += n;
                     return std::clamp(v, lo, hi);
                   };
                   int64_t b = st > 0 ? clamp(s.begin[d], 0, n) : clamp(s.begin[d], -1, n - 1);
                   int64_t e = st > 0 ? clamp(s.end[d], 0, n) : clamp(s.end[d], -1, n - 1);
                   int64_t len = st > 0 ? (e - b + st - 1) / st : (b - e - st - 1) / -st;
                   TT_CHECK(len >= 1, kInvalidArgument, "the slice of dimension ", d, " is empty");
                 }
               },
               [](const Tensors& a, const AttrsNode* attrs) {
                 const auto& s = attrs_as<SliceAttrsNode>(attrs);
                 return te::slice(a[0], s.begin, s.end, s.strides);
               }});
  register_op({"pad", "a constant border", 1, 1, PadAttrsNode::kTypeKey, OpPattern::kInjective,
               [](const Types& a, const AttrsNode* attrs) {
                 const auto& p = attrs_as<PadAttrsNode>(attrs);
                 TT_CHECK(p.before.size() == a[0].shape.size() && p.after.size() == p.before.size(),
                          kInvalidArgument, "before and after need one entry per dimension");
                 for (size_t d = 0; d < p.before.size(); ++d) {
                   TT_CHECK(p.before[d] >= 0 && p.after[d] >= 0, kInvalidArgument,
                            "negative padding is not supported");
                 }
               },
               [](const Tensors& a, const AttrsNode* attrs) {
                 const auto& p = attrs_as<PadAttrsNode>(attrs);
                 return te::pad(a[0], p.before, p.after, p.value, "pad");
               }});
  register_op({"resize2d", "resize of the two last axes (nearest or linear)", 1, 1,
               ResizeAttrsNode::kTypeKey, OpPattern::kInjective,
               [](const Types& a, const AttrsNode* attrs) {
                 const auto& r = attrs_as<ResizeAttrsNode>(attrs);
                 check_rank(a[0], 4, "the data");
                 if (r.method != "nearest") check_float(a[0], "the data");
                 TT_CHECK(r.method == "nearest" || r.method == "linear", kInvalidArgument,
                          "method '", r.method, "' (nearest or linear)");
                 TT_CHECK(r.coordinate_mode == "half_pixel" || r.coordinate_mode == "asymmetric" ||
                              r.coordinate_mode == "align_corners",
                          kInvalidArgument, "coordinate mode '", r.coordinate_mode,
                          "' (half_pixel, asymmetric or align_corners)");
                 TT_CHECK(r.size.size() == 2 && r.size[0] >= 1 && r.size[1] >= 1, kInvalidArgument,
                          "size needs two extents >= 1");
               },
               [](const Tensors& a, const AttrsNode* attrs) {
                 const auto& r = attrs_as<ResizeAttrsNode>(attrs);
                 return te::resize2d_nchw(a[0], r.size[0], r.size[1], r.method, r.coordinate_mode);
               }});
  register_op({"resample2d",
               "the two last axes resampled by taps: data, rows, row weights, columns, column "
               "weights (Resize's other rules)",
               5, 5, "", OpPattern::kInjective,
               [](const Types& a, const AttrsNode*) {
                 check_rank(a[0], 4, "the data");
                 check_float(a[0], "the data");
                 for (size_t k : {size_t{1}, size_t{3}}) {
                   TT_CHECK(a[k].dtype.is_integer() && a[k].shape.size() == 2 &&
                                a[k + 1].dtype.is_float() && a[k + 1].shape == a[k].shape,
                            kInvalidArgument,
                            "taps need integer indices and float weights of one 2-D shape");
                 }
               },
               [](const Tensors& a, const AttrsNode*) {
                 return te::resample2d_nchw(a[0], a[1], a[2], a[3], a[4]);
               }});
  return true;
}

const bool registered = register_all();

}  // namespace

void Conv2dAttrsNode::declare(FieldList<Conv2dAttrsNode>& f) {
  f.def("strides", &Conv2dAttrsNode::strides)
      .def("padding", &Conv2dAttrsNode::padding)
      .def("dilation", &Conv2dAttrsNode::dilation)
      .def("groups", &Conv2dAttrsNode::groups)
      .def("data_layout", &Conv2dAttrsNode::data_layout)
      .validate([](const Conv2dAttrsNode& a) {
        TT_CHECK(a.strides.size() == 2 && a.padding.size() == 4 && a.dilation.size() == 2,
                 kInvalidArgument, "conv2d needs 2 strides, 4 paddings and 2 dilations");
        for (int64_t s : a.strides) TT_CHECK(s >= 1, kInvalidArgument, "strides must be >= 1");
        for (int64_t d : a.dilation) TT_CHECK(d >= 1, kInvalidArgument, "dilations must be >= 1");
        for (int64_t p : a.padding) TT_CHECK(p >= 0, kInvalidArgument, "paddings must be >= 0");
        TT_CHECK(a.groups >= 1, kInvalidArgument, "groups must be >= 1");
      });
}

void WinogradAttrsNode::declare(FieldList<WinogradAttrsNode>& f) {
  f.def("tile", &WinogradAttrsNode::tile)
      .def("padding", &WinogradAttrsNode::padding)
      .def("output_size", &WinogradAttrsNode::output_size)
      .validate([](const WinogradAttrsNode& a) {
        TT_CHECK(a.tile == 2 || a.tile == 4, kInvalidArgument, "Winograd output tiles of ", a.tile,
                 " are not supported (2 or 4)");
        TT_CHECK(a.padding.size() == 4 && a.output_size.size() == 2, kInvalidArgument,
                 "the Winograd transforms need 4 paddings and a 2-D output size");
        for (int64_t p : a.padding) TT_CHECK(p >= 0, kInvalidArgument, "paddings must be >= 0");
        for (int64_t e : a.output_size) {
          TT_CHECK(e >= 1, kInvalidArgument, "the output size must be >= 1");
        }
      });
}

void Conv2dTransposeAttrsNode::declare(FieldList<Conv2dTransposeAttrsNode>& f) {
  f.def("strides", &Conv2dTransposeAttrsNode::strides)
      .def("padding", &Conv2dTransposeAttrsNode::padding)
      .def("output_padding", &Conv2dTransposeAttrsNode::output_padding)
      .validate([](const Conv2dTransposeAttrsNode& a) {
        TT_CHECK(a.strides.size() == 2 && a.padding.size() == 4 && a.output_padding.size() == 2,
                 kInvalidArgument,
                 "conv2d_transpose needs 2 strides, 4 paddings, 2 output paddings");
        for (size_t d = 0; d < 2; ++d) {
          TT_CHECK(
              a.strides[d] >= 1 && a.output_padding[d] >= 0 && a.output_padding[d] < a.strides[d],
              kInvalidArgument, "strides must be >= 1 and output padding in [0, stride)");
        }
      });
}

void Pool2dAttrsNode::declare(FieldList<Pool2dAttrsNode>& f) {
  f.def("kernel", &Pool2dAttrsNode::kernel)
      .def("strides", &Pool2dAttrsNode::strides)
      .def("padding", &Pool2dAttrsNode::padding)
      .def("ceil_mode", &Pool2dAttrsNode::ceil_mode)
      .def("count_include_pad", &Pool2dAttrsNode::count_include_pad)
      .def("layout", &Pool2dAttrsNode::layout)
      .validate([](const Pool2dAttrsNode& a) {
        TT_CHECK(a.kernel.size() == 2 && a.strides.size() == 2 && a.padding.size() == 4,
                 kInvalidArgument, "pool2d needs a 2-D window, 2 strides and 4 paddings");
        for (size_t d = 0; d < 2; ++d) {
          TT_CHECK(a.kernel[d] >= 1 && a.strides[d] >= 1, kInvalidArgument,
                   "window and strides must be >= 1");
        }
        for (int64_t p : a.padding) TT_CHECK(p >= 0, kInvalidArgument, "paddings must be >= 0");
      });
}

void LayoutAttrsNode::declare(FieldList<LayoutAttrsNode>& f) {
  f.def("layout", &LayoutAttrsNode::layout);
}
void AxisAttrsNode::declare(FieldList<AxisAttrsNode>& f) { f.def("axis", &AxisAttrsNode::axis); }
void NormAttrsNode::declare(FieldList<NormAttrsNode>& f) {
  f.def("axis", &NormAttrsNode::axis)
      .def("epsilon", &NormAttrsNode::epsilon)
      .validate([](const NormAttrsNode& a) {
        TT_CHECK(a.epsilon >= 0, kInvalidArgument, "epsilon must be >= 0");
      });
}
void ReshapeAttrsNode::declare(FieldList<ReshapeAttrsNode>& f) {
  f.def("shape", &ReshapeAttrsNode::shape);
}
void TransposeAttrsNode::declare(FieldList<TransposeAttrsNode>& f) {
  f.def("perm", &TransposeAttrsNode::perm);
}
void SliceAttrsNode::declare(FieldList<SliceAttrsNode>& f) {
  f.def("begin", &SliceAttrsNode::begin)
      .def("end", &SliceAttrsNode::end)
      .def("strides", &SliceAttrsNode::strides);
}
void PadAttrsNode::declare(FieldList<PadAttrsNode>& f) {
  f.def("before", &PadAttrsNode::before)
      .def("after", &PadAttrsNode::after)
      .def("value", &PadAttrsNode::value);
}
void ReduceAttrsNode::declare(FieldList<ReduceAttrsNode>& f) {
  f.def("axes", &ReduceAttrsNode::axes).def("keepdims", &ReduceAttrsNode::keepdims);
}
void ScalarAttrsNode::declare(FieldList<ScalarAttrsNode>& f) {
  f.def("alpha", &ScalarAttrsNode::alpha).def("beta", &ScalarAttrsNode::beta);
}
void CastAttrsNode::declare(FieldList<CastAttrsNode>& f) { f.def("dtype", &CastAttrsNode::dtype); }
void TileAttrsNode::declare(FieldList<TileAttrsNode>& f) {
  f.def("repeats", &TileAttrsNode::repeats).validate([](const TileAttrsNode& a) {
    for (int64_t r : a.repeats) TT_CHECK(r >= 1, kInvalidArgument, "repeats must be >= 1");
  });
}
void CumSumAttrsNode::declare(FieldList<CumSumAttrsNode>& f) {
  f.def("axis", &CumSumAttrsNode::axis)
      .def("exclusive", &CumSumAttrsNode::exclusive)
      .def("reverse", &CumSumAttrsNode::reverse);
}
void ArgReduceAttrsNode::declare(FieldList<ArgReduceAttrsNode>& f) {
  f.def("axis", &ArgReduceAttrsNode::axis)
      .def("keepdims", &ArgReduceAttrsNode::keepdims)
      .def("select_last", &ArgReduceAttrsNode::select_last);
}
void ScatterAttrsNode::declare(FieldList<ScatterAttrsNode>& f) {
  f.def("axis", &ScatterAttrsNode::axis).def("reduction", &ScatterAttrsNode::reduction);
}
void TopKAttrsNode::declare(FieldList<TopKAttrsNode>& f) {
  f.def("k", &TopKAttrsNode::k)
      .def("axis", &TopKAttrsNode::axis)
      .def("largest", &TopKAttrsNode::largest);
}
void LrnAttrsNode::declare(FieldList<LrnAttrsNode>& f) {
  f.def("size", &LrnAttrsNode::size)
      .range(1, 1 << 20)
      .def("alpha", &LrnAttrsNode::alpha)
      .def("beta", &LrnAttrsNode::beta)
      .def("bias", &LrnAttrsNode::bias);
}
void OneHotAttrsNode::declare(FieldList<OneHotAttrsNode>& f) {
  f.def("depth", &OneHotAttrsNode::depth)
      .range(1, 1 << 30)
      .def("on_value", &OneHotAttrsNode::on_value)
      .def("off_value", &OneHotAttrsNode::off_value)
      .def("dtype", &OneHotAttrsNode::dtype)
      .def("axis", &OneHotAttrsNode::axis);
}
void ResizeAttrsNode::declare(FieldList<ResizeAttrsNode>& f) {
  f.def("size", &ResizeAttrsNode::size)
      .def("method", &ResizeAttrsNode::method)
      .def("coordinate_mode", &ResizeAttrsNode::coordinate_mode);
}

TT_REGISTER_NODE(Conv2dAttrsNode);
TT_REGISTER_NODE(Conv2dTransposeAttrsNode);
TT_REGISTER_NODE(WinogradAttrsNode);
TT_REGISTER_NODE(Pool2dAttrsNode);
TT_REGISTER_NODE(LayoutAttrsNode);
TT_REGISTER_NODE(AxisAttrsNode);
TT_REGISTER_NODE(NormAttrsNode);
TT_REGISTER_NODE(ReshapeAttrsNode);
TT_REGISTER_NODE(TransposeAttrsNode);
TT_REGISTER_NODE(SliceAttrsNode);
TT_REGISTER_NODE(PadAttrsNode);
TT_REGISTER_NODE(ReduceAttrsNode);
TT_REGISTER_NODE(ScalarAttrsNode);
TT_REGISTER_NODE(CastAttrsNode);
TT_REGISTER_NODE(ResizeAttrsNode);
TT_REGISTER_NODE(TileAttrsNode);
TT_REGISTER_NODE(CumSumAttrsNode);
TT_REGISTER_NODE(OneHotAttrsNode);
TT_REGISTER_NODE(LrnAttrsNode);
TT_REGISTER_NODE(ArgReduceAttrsNode);
TT_REGISTER_NODE(TopKAttrsNode);
TT_REGISTER_NODE(ScatterAttrsNode);

namespace {
std::map<std::string, OpInfo>& op_table() {
  static std::map<std::string, OpInfo> table;
  return table;
}
}  // namespace

void register_op(OpInfo info) {
  TT_ICHECK(!info.name.empty() && info.compute, "an operator needs a name and a computation");
  std::string name = info.name;
  TT_ICHECK(op_table().emplace(name, std::move(info)).second, "operator '", name,
            "' is registered twice");
}

const OpInfo& find_op(std::string_view name) {
  auto it = op_table().find(std::string(name));
  if (it == op_table().end()) {
    fail(ErrorKind::kNotFound, "unknown graph operator '", name,
         "'; the operators are: ", join(op_names(), ", "));
  }
  return it->second;
}

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (const auto& [name, info] : op_table()) names.push_back(name);
  return names;
}

TensorType infer_type(const OpInfo& op, const std::vector<TensorType>& args,
                      const AttrsNode* attrs) {
  TT_CHECK(
      static_cast<int>(args.size()) >= op.min_args && static_cast<int>(args.size()) <= op.max_args,
      kInvalidArgument, "takes ",
      op.min_args == op.max_args
          ? std::to_string(op.min_args)
          : std::to_string(op.min_args) + " to " + std::to_string(op.max_args),
      " arguments, got ", args.size());
  if (op.attrs_type.empty()) {
    TT_CHECK(!attrs, kInvalidArgument, "takes no attributes, got a ", attrs->type_key());
  } else {
    TT_CHECK(attrs && attrs->type_key() == op.attrs_type, kInvalidArgument, "needs a ",
             op.attrs_type, ", got ", attrs ? std::string(attrs->type_key()) : "none");
  }
  if (op.check) op.check(args, attrs);
  std::vector<Tensor> placeholders;
  for (size_t i = 0; i < args.size(); ++i) {
    placeholders.push_back(placeholder(args[i].shape, args[i].dtype, "p" + std::to_string(i)));
  }
  Tensor out = op.compute(placeholders, attrs);
  return {out.shape(), out.dtype()};
}

}  // namespace tensortune::te
