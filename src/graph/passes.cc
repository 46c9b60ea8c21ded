#include "tensortune/graph/passes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <unordered_map>

#include "tensortune/ir/pass_context.h"
#include "tensortune/support/checked.h"
#include "tensortune/te/evaluator.h"
#include "tensortune/te/ops.h"

namespace tensortune::graph {
namespace {

const ConstantNode* as_constant(const Value& v) {
  return dynamic_cast<const ConstantNode*>(v.get());
}
const CallNode* as_call(const Value& v) { return dynamic_cast<const CallNode*>(v.get()); }

template <class T>
Ref<T> attrs_node(std::shared_ptr<T> n) {
  if (const auto& check = n->type_info().validate) check(*n);
  return Ref<T>(std::move(n));
}

te::Attrs axis_attrs(int64_t axis) {
  auto a = make_node<te::AxisAttrsNode>();
  a->axis = axis;
  return te::Attrs(attrs_node(std::move(a)));
}

te::Attrs transpose_attrs(std::vector<int64_t> perm) {
  auto a = make_node<te::TransposeAttrsNode>();
  a->perm = std::move(perm);
  return te::Attrs(attrs_node(std::move(a)));
}

te::Attrs shape_attrs(std::vector<int64_t> shape) {
  auto a = make_node<te::ReshapeAttrsNode>();
  a->shape = std::move(shape);
  return te::Attrs(attrs_node(std::move(a)));
}

/// `v` seen in another shape.
Value reshape_call(const Value& v, const std::vector<int64_t>& shape, const std::string& name) {
  return call("reshape", {v}, shape_attrs(shape), name);
}

/// A constant int32 scalar.
Value int32_scalar(int64_t value, const std::string& name) {
  te::NDArray a(ir::DataType::int32(), {});
  a.set_int(0, value);
  return constant(std::move(a), name);
}

bool all_zero(const std::vector<int64_t>& v) {
  return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 0; });
}

/// An NHWC 1x1 convolution of `data` by the constant `kernel` [1, 1, C, K].
Value pointwise_conv(const Value& data, const Value& kernel, const std::string& name) {
  auto a = make_node<te::Conv2dAttrsNode>();
  a->data_layout = "NHWC";
  return call("nn.conv2d", {data, kernel}, te::Attrs(attrs_node(std::move(a))), name);
}

/// `a` with its dimensions permuted: out dimension d is a's dimension perm[d].
te::NDArray transpose_array(const te::NDArray& a, const std::vector<int64_t>& perm) {
  std::vector<int64_t> shape;
  for (int64_t p : perm) shape.push_back(a.shape()[p]);
  te::NDArray out(a.dtype(), shape);
  const size_t rank = shape.size(), elem = static_cast<size_t>(a.dtype().bytes());
  std::vector<int64_t> in_strides(rank, 1);
  for (size_t d = rank; d-- > 1;) in_strides[d - 1] = in_strides[d] * a.shape()[d];
  std::vector<int64_t> index(rank, 0);
  const auto* src = static_cast<const char*>(a.data());
  auto* dst = static_cast<char*>(out.data());
  for (int64_t flat = 0; flat < out.size(); ++flat) {
    int64_t from = 0;
    for (size_t d = 0; d < rank; ++d) from += index[d] * in_strides[perm[d]];
    std::memcpy(dst + flat * elem, src + from * elem, elem);
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

te::NDArray reshape_array(const te::NDArray& a, const std::vector<int64_t>& shape) {
  te::NDArray out(a.dtype(), shape);
  std::memcpy(out.data(), a.data(), a.nbytes());
  return out;
}

/// The value of a call on constants, through the operator's tensor expressions.
te::NDArray evaluate_call(const CallNode& call, const std::vector<Value>& args) {
  if (call.op == "transpose") {
    return transpose_array(as_constant(args[0])->data.array(),
                           dynamic_cast<const te::TransposeAttrsNode&>(*call.attrs).perm);
  }
  if (call.op == "reshape") {
    return reshape_array(as_constant(args[0])->data.array(), call.shape);
  }
  std::vector<te::Tensor> placeholders;
  std::vector<te::NDArray> arrays;
  for (size_t i = 0; i < args.size(); ++i) {
    placeholders.push_back(
        te::placeholder(args[i]->shape, args[i]->dtype, "c" + std::to_string(i)));
    arrays.push_back(as_constant(args[i])->data.array());
  }
  te::Tensor out = te::find_op(call.op).compute(placeholders, call.attrs.get());
  return te::evaluate({out}, placeholders, arrays)[0];
}

/// A constant `a` of shape [C] as the broadcast shape that puts C on `axis`
/// of a rank-`rank` value: [C, 1, ..., 1] with rank - axis dimensions.
std::vector<int64_t> channel_shape(int64_t c, int64_t axis, size_t rank) {
  std::vector<int64_t> s(rank - static_cast<size_t>(axis), 1);
  s[0] = c;
  return s;
}

}  // namespace

Graph rewrite(const Graph& graph,
              const std::function<Value(const CallNode& call, const std::vector<Value>& args)>& f) {
  std::unordered_map<const Object*, Value> map;
  auto mapped = [&](const Value& v) {
    auto it = map.find(v.get());
    return it == map.end() ? v : it->second;
  };
  for (const auto& c : calls_in_order(graph)) {
    std::vector<Value> args;
    bool changed = false;
    for (const auto& a : c->args) {
      args.push_back(mapped(a));
      changed |= !args.back().same_as(a);
    }
    Value out = f(*c, args);
    if (!out) out = changed ? call(c->op, args, c->attrs, c->name) : Value(c);
    map[c.get()] = out;
  }
  std::vector<Value> outputs;
  for (const auto& o : graph->outputs) outputs.push_back(mapped(o));
  return Graph::make(graph->inputs, outputs, graph->output_names);
}

Graph fold_constants(const Graph& graph) {
  return rewrite(graph, [](const CallNode& c, const std::vector<Value>& args) -> Value {
    for (const auto& a : args) {
      if (!as_constant(a)) return Value();
    }
    return constant(evaluate_call(c, args), c.name.empty() ? c.op : c.name);
  });
}

Value fold_call(const Value& v) {
  const CallNode* c = as_call(v);
  if (!c) return v;
  for (const auto& a : c->args) {
    if (!as_constant(a)) return v;
  }
  return constant(evaluate_call(*c, c->args), c->name.empty() ? c->op : c->name);
}

/// x^2, x^3 and x^0.5 of a float x by a constant exponent (every element
/// the same, not broadcasting x) as products and a sqrt: ONNX exporters
/// write a layer norm's variance and the tanh form of GELU with Pow, and
/// powf is a library call per element that no loop around it vectorizes.
/// Null for any other call. (sqrt(-0) is -0 where pow gives +0.)
Value power_as_products(const CallNode& c, const std::vector<Value>& args) {
  if (c.op != "power" || !c.dtype.is_float() || args[0]->shape != c.shape) return Value();
  const ConstantNode* exponent = as_constant(args[1]);
  if (!exponent) return Value();
  const te::NDArray& e = exponent->data.array();
  for (int64_t i = 1; i < e.size(); ++i) {
    if (e.get(i) != e.get(0)) return Value();
  }
  double p = e.size() > 0 ? e.get(0) : 0;
  const Value& x = args[0];
  if (p == 2) return call("multiply", {x, x}, te::Attrs(), c.name);
  if (p == 3)
    return call("multiply", {call("multiply", {x, x}, te::Attrs(), c.name), x}, te::Attrs(),
                c.name);
  if (p == 0.5) return call("sqrt", {x}, te::Attrs(), c.name);
  return Value();
}

Graph simplify_inference(const Graph& graph) {
  return rewrite(graph, [](const CallNode& c, const std::vector<Value>& args) -> Value {
    if (Value product = power_as_products(c, args)) return product;
    if (c.op != "nn.batch_norm") return Value();
    for (size_t i = 1; i < 5; ++i) {
      if (!as_constant(args[i])) return Value();
    }
    const auto& attrs = dynamic_cast<const te::NormAttrsNode&>(*c.attrs);
    const size_t rank = args[0]->shape.size();
    const int64_t axis = attrs.axis < 0 ? attrs.axis + static_cast<int64_t>(rank) : attrs.axis;
    const te::NDArray& gamma = as_constant(args[1])->data.array();
    const te::NDArray& beta = as_constant(args[2])->data.array();
    const te::NDArray& mean = as_constant(args[3])->data.array();
    const te::NDArray& var = as_constant(args[4])->data.array();
    const int64_t channels = gamma.size();
    // y = x * scale + shift, scale = gamma / sqrt(var + eps), shift = beta - mean * scale.
    te::NDArray scale(gamma.dtype(), {channels}), shift(gamma.dtype(), {channels});
    for (int64_t k = 0; k < channels; ++k) {
      double s = gamma.get(k) / std::sqrt(var.get(k) + attrs.epsilon);
      scale.set(k, s);
      shift.set(k, beta.get(k) - mean.get(k) * s);
    }
    // conv2d (constant kernel, NCHW, output channels on axis 1), maybe
    // through a bias_add: the scale goes into the kernel, the shift into
    // the bias.
    Value x = args[0];
    const CallNode* bias = as_call(x);
    te::NDArray bias_values;
    if (bias && bias->op == "nn.bias_add" && as_constant(bias->args[1])) {
      bias_values = as_constant(bias->args[1])->data.array();
      x = bias->args[0];
    } else {
      bias = nullptr;
    }
    const CallNode* conv = as_call(x);
    if (axis == 1 && conv && conv->op == "nn.conv2d" && as_constant(conv->args[1]) &&
        dynamic_cast<const te::Conv2dAttrsNode&>(*conv->attrs).data_layout == "NCHW") {
      te::NDArray w = as_constant(conv->args[1])->data.array();  // a copy: [K, C/g, R, S]
      int64_t per_channel = w.size() / channels;
      for (int64_t k = 0; k < channels; ++k) {
        for (int64_t i = 0; i < per_channel; ++i) {
          w.set(k * per_channel + i, w.get(k * per_channel + i) * scale.get(k));
        }
      }
      te::NDArray b = shift;
      if (bias) {
        for (int64_t k = 0; k < channels; ++k)
          b.set(k, shift.get(k) + bias_values.get(k) * scale.get(k));
      }
      Value folded =
          call("nn.conv2d", {conv->args[0], constant(std::move(w), conv->name + ".folded")},
               conv->attrs, conv->name);
      return call("nn.bias_add", {folded, constant(std::move(b), c.name + ".shift")}, axis_attrs(1),
                  c.name);
    }
    std::vector<int64_t> cs = channel_shape(channels, axis, rank);
    Value scaled =
        call("multiply", {args[0], constant(reshape_array(scale, cs), c.name + ".scale")},
             te::Attrs(), c.name);
    return call("add", {scaled, constant(reshape_array(shift, cs), c.name + ".shift")}, te::Attrs(),
                c.name);
  });
}

namespace {

/// Whether conv2d_transpose `c` has a constant kernel whose windows tile
/// the output exactly: kernel = stride, no padding.
bool tiles_output_exactly(const CallNode& c) {
  const auto& attrs = dynamic_cast<const te::Conv2dTransposeAttrsNode&>(*c.attrs);
  const ConstantNode* kernel = as_constant(c.args[1]);
  return kernel && attrs.strides == std::vector<int64_t>{kernel->shape[2], kernel->shape[3]} &&
         all_zero(attrs.padding) && all_zero(attrs.output_padding);
}

/// conv2d_transpose `c` (tiles_output_exactly) of NHWC data `x` as
/// convert_layout_nhwc moves it. Output channel (i, j, k) of the 1x1
/// convolution is kernel position (i, j) of channel k, so that the shuffle
/// moves whole rows of K channels.
Value conv2d_transpose_as_tiles(const CallNode& c, const Value& x) {
  const ConstantNode& kernel = *as_constant(c.args[1]);
  const std::vector<int64_t>& w = kernel.shape;  // C, K, R, S
  const int64_t channels = w[0], filters = w[1], r = w[2], s = w[3];
  te::NDArray hwio = reshape_array(transpose_array(kernel.data.array(), {0, 2, 3, 1}),
                                   {1, 1, channels, r * s * filters});
  Value y = pointwise_conv(x, constant(std::move(hwio), kernel.name + ".tiles"), c.name + ".tiles");
  const std::vector<int64_t>& in = x->shape;  // N, H, W, C
  Value split = reshape_call(y, {in[0], in[1], in[2], r, s, filters}, c.name + ".positions");
  Value moved =
      call("transpose", {split}, transpose_attrs({0, 1, 3, 2, 4, 5}), c.name + ".shuffle");
  return reshape_call(moved, {in[0], in[1] * r, in[2] * s, filters}, c.name);
}

}  // namespace

Graph convert_layout_nhwc(const Graph& graph) {
  static const std::vector<int64_t> kToNhwc = {0, 2, 3, 1}, kToNchw = {0, 3, 1, 2};
  // Each value in the forms made so far: as it is (NCHW for 4-D values)
  // and, once something asked, transposed to NHWC.
  std::unordered_map<const Object*, Value> nchw, nhwc;
  auto nchw_of = [&](const Value& v) -> Value {
    auto it = nchw.find(v.get());
    if (it != nchw.end()) return it->second;
    auto t = nhwc.find(v.get());
    if (t == nhwc.end()) return v;  // never moved: as it is
    Value back = call("transpose", {t->second}, transpose_attrs(kToNchw), "to_nchw");
    nchw[v.get()] = back;
    return back;
  };
  auto nhwc_of = [&](const Value& v) -> Value {
    auto it = nhwc.find(v.get());
    if (it != nhwc.end()) return it->second;
    Value src = nchw_of(v);
    Value moved;
    if (auto c = as_constant(src)) {
      moved = constant(transpose_array(c->data.array(), kToNhwc), c->name + ".nhwc");
    } else {
      moved = call("transpose", {src}, transpose_attrs(kToNhwc), "to_nhwc");
    }
    nhwc[v.get()] = moved;
    return moved;
  };
  auto is_4d = [](const Value& v) { return v->shape.size() == 4; };
  // Axes 2 and 3 of a 4-D value, as a reduction names them.
  auto spatial_axes = [](std::vector<int64_t> axes) {
    for (auto& a : axes) a = a < 0 ? a + 4 : a;
    std::sort(axes.begin(), axes.end());
    return axes == std::vector<int64_t>{2, 3};
  };
  auto has_nhwc = [&](const Value& v) { return nhwc.count(v.get()) && !nchw.count(v.get()); };

  for (const auto& c : calls_in_order(graph)) {
    const std::string& op = c->op;
    const te::OpInfo& info = te::find_op(op);
    auto remember_nhwc = [&](Value v) {
      nhwc[c.get()] = std::move(v);
      return true;
    };
    bool done = false;
    if (op == "nn.conv2d" &&
        dynamic_cast<const te::Conv2dAttrsNode&>(*c->attrs).data_layout == "NCHW") {
      auto attrs =
          make_node<te::Conv2dAttrsNode>(dynamic_cast<const te::Conv2dAttrsNode&>(*c->attrs));
      attrs->data_layout = "NHWC";
      Value kernel = nchw_of(c->args[1]);
      if (auto k = as_constant(kernel)) {
        kernel = constant(transpose_array(k->data.array(), {2, 3, 1, 0}), k->name + ".hwio");
      } else {
        kernel = call("transpose", {kernel}, transpose_attrs({2, 3, 1, 0}), "to_hwio");
      }
      done = remember_nhwc(call(op, {nhwc_of(c->args[0]), kernel},
                                te::Attrs(attrs_node(std::move(attrs))), c->name));
    } else if (op == "nn.conv2d_transpose" && tiles_output_exactly(*c)) {
      done = remember_nhwc(conv2d_transpose_as_tiles(*c, nhwc_of(c->args[0])));
    } else if ((op == "nn.max_pool2d" || op == "nn.avg_pool2d") && has_nhwc(c->args[0])) {
      auto attrs =
          make_node<te::Pool2dAttrsNode>(dynamic_cast<const te::Pool2dAttrsNode&>(*c->attrs));
      attrs->layout = "NHWC";
      done = remember_nhwc(
          call(op, {nhwc_of(c->args[0])}, te::Attrs(attrs_node(std::move(attrs))), c->name));
    } else if (op == "nn.global_avg_pool2d" && has_nhwc(c->args[0])) {
      auto attrs = make_node<te::LayoutAttrsNode>();
      attrs->layout = "NHWC";
      done = remember_nhwc(
          call(op, {nhwc_of(c->args[0])}, te::Attrs(attrs_node(std::move(attrs))), c->name));
    } else if (const auto* reduce = dynamic_cast<const te::ReduceAttrsNode*>(c->attrs.get());
               reduce && is_4d(c) && has_nhwc(c->args[0]) && spatial_axes(reduce->axes)) {
      // A reduction over the image, keeping its axes (the integer sum of
      // QLinearGlobalAveragePool, a ReduceMean written for a pool): the same
      // axes of the NHWC value, without moving it back.
      auto attrs = make_node<te::ReduceAttrsNode>();
      attrs->axes = {1, 2};
      done = remember_nhwc(
          call(op, {nhwc_of(c->args[0])}, te::Attrs(attrs_node(std::move(attrs))), c->name));
    } else if ((op == "nn.bias_add" || op == "concat") && is_4d(c) &&
               dynamic_cast<const te::AxisAttrsNode&>(*c->attrs).axis % 4 == 1) {
      bool any = false;
      for (size_t i = 0; i < c->args.size(); ++i) {
        if (op == "concat" || i == 0) any |= has_nhwc(c->args[i]);
      }
      if (any) {
        std::vector<Value> args;
        for (size_t i = 0; i < c->args.size(); ++i) {
          args.push_back(op == "nn.bias_add" && i == 1 ? nchw_of(c->args[i]) : nhwc_of(c->args[i]));
        }
        done = remember_nhwc(call(op, args, axis_attrs(3), c->name));
      }
    } else if ((info.pattern == te::OpPattern::kElemwise ||
                info.pattern == te::OpPattern::kBroadcast) &&
               op != "nn.bias_add" && op != "nn.batch_norm" && is_4d(c)) {
      // Elementwise on NHWC values; constants of any rank up to 4 come along
      // (ONNX's per-channel [C, 1, 1] is [1, C, 1, 1], transposed at compile
      // time), and so do those of one element.
      bool any = false, all = true;
      for (const auto& a : c->args) {
        any |= has_nhwc(a);
        all &= is_4d(a) || (as_constant(a) && a->shape.size() <= 4);
      }
      if (any && all) {
        std::vector<Value> args;
        for (const auto& a : c->args) {
          const ConstantNode* k = as_constant(a);
          if (is_4d(a) || !k ||
              std::all_of(a->shape.begin(), a->shape.end(), [](int64_t d) { return d == 1; })) {
            args.push_back(is_4d(a) ? nhwc_of(a) : nchw_of(a));
            continue;
          }
          std::vector<int64_t> shape = a->shape;
          shape.insert(shape.begin(), 4 - shape.size(), 1);
          args.push_back(constant(transpose_array(reshape_array(k->data.array(), shape), kToNhwc),
                                  k->name + ".nhwc"));
        }
        done = remember_nhwc(call(op, args, c->attrs, c->name));
      }
    }
    if (done) continue;
    // Anything else runs as it was, on NCHW values.
    std::vector<Value> args;
    bool changed = false;
    for (const auto& a : c->args) {
      args.push_back(nchw_of(a));
      changed |= !args.back().same_as(a);
    }
    nchw[c.get()] = changed ? call(op, args, c->attrs, c->name) : Value(c);
  }
  std::vector<Value> outputs;
  for (const auto& o : graph->outputs) outputs.push_back(nchw_of(o));
  return fold_constants(Graph::make(graph->inputs, outputs, graph->output_names));
}

namespace {

/// The output tile for a 3x3 convolution of `channels` to `filters` whose
/// output has `images` x `height` x `width` pixels, or 0 to keep it direct
/// (see winograd_conv2d in passes.h).
int64_t winograd_tile(int64_t channels, int64_t filters, int64_t images, int64_t height,
                      int64_t width, const ir::Target& target) {
  // Per output element and filter, the direct form costs 9 * channels
  // multiply-adds, tiles of 4 cost 2.25 * channels in the products plus
  // about 27 * channels / filters and 15 in the transforms: below 16
  // channels the saving is gone in the transforms and the padding.
  if (!target || channels < 16 || filters < 16) return 0;
  // The transformed kernel, (tile + 2)^2 / 9 times the kernel, is read from
  // memory on every call (a model's other layers evict it between calls),
  // and each of its elements serves one multiply-add per output tile: with
  // fewer than 16 tiles the product waits on memory more than the smaller
  // count of multiply-adds saves. Larger tiles do fewer of them.
  constexpr int64_t kMinTiles = 16;
  for (int64_t tile : {4, 2}) {
    int64_t tiles = images * ((height + tile - 1) / tile) * ((width + tile - 1) / tile);
    if (tiles >= kMinTiles) return tile;
  }
  return 0;
}

/// The HWIO kernel `g` [3, 3, C, K] transformed: [alpha * alpha, C, K] with
/// [eps * alpha + nu] = (G . g . G^T)[eps][nu], computed in double.
te::NDArray winograd_kernel(const te::NDArray& g, const te::WinogradMatrices& m) {
  const int64_t a = m.alpha, ck = g.shape()[2] * g.shape()[3];
  const auto* src = static_cast<const float*>(g.data());
  std::vector<double> rows(static_cast<size_t>(a * 3 * ck), 0.0);  // [eps][j][ck] = G . g
  for (int64_t eps = 0; eps < a; ++eps) {
    for (int64_t i = 0; i < 3; ++i) {
      double coef = m.g[static_cast<size_t>(eps * 3 + i)];
      if (coef == 0) continue;
      for (int64_t j = 0; j < 3; ++j) {
        double* dst = &rows[static_cast<size_t>((eps * 3 + j) * ck)];
        const float* from = src + (i * 3 + j) * ck;
        for (int64_t x = 0; x < ck; ++x) dst[x] += coef * from[x];
      }
    }
  }
  te::NDArray out(g.dtype(), {a * a, g.shape()[2], g.shape()[3]});
  auto* dst = static_cast<float*>(out.data());
  std::vector<double> acc(static_cast<size_t>(ck));
  for (int64_t eps = 0; eps < a; ++eps) {
    for (int64_t nu = 0; nu < a; ++nu) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j < 3; ++j) {
        double coef = m.g[static_cast<size_t>(nu * 3 + j)];
        const double* from = &rows[static_cast<size_t>((eps * 3 + j) * ck)];
        for (int64_t x = 0; x < ck; ++x) acc[static_cast<size_t>(x)] += coef * from[x];
      }
      float* to = dst + (eps * a + nu) * ck;
      for (int64_t x = 0; x < ck; ++x) to[x] = static_cast<float>(acc[static_cast<size_t>(x)]);
    }
  }
  return out;
}

}  // namespace

Graph winograd_conv2d(const Graph& graph, const ir::Target& target) {
  return rewrite(graph, [&](const CallNode& c, const std::vector<Value>& args) -> Value {
    if (c.op != "nn.conv2d") return Value();
    const auto& conv = dynamic_cast<const te::Conv2dAttrsNode&>(*c.attrs);
    const ConstantNode* kernel = as_constant(args[1]);
    const std::vector<int64_t> ones = {1, 1};
    if (conv.data_layout != "NHWC" || !kernel || conv.groups != 1 || conv.strides != ones ||
        conv.dilation != ones || c.dtype != ir::DataType::float32() || kernel->shape[0] != 3 ||
        kernel->shape[1] != 3) {
      return Value();
    }
    const int64_t channels = kernel->shape[2], filters = kernel->shape[3];
    const int64_t tile =
        winograd_tile(channels, filters, c.shape[0], c.shape[1], c.shape[2], target);
    if (tile == 0) return Value();
    const te::WinogradMatrices m = te::winograd_matrices(tile);
    const int64_t alpha = m.alpha;
    auto wa = make_node<te::WinogradAttrsNode>();
    wa->tile = tile;
    wa->padding = conv.padding;
    wa->output_size = {c.shape[1], c.shape[2]};
    te::Attrs attrs(attrs_node(std::move(wa)));
    Value data = call("nn.winograd_input_transform", {args[0]}, attrs, c.name + ".input");
    const std::vector<int64_t> tiled = data->shape;  // alpha, alpha, N, TH, TW, C
    const int64_t tiles = tiled[2] * tiled[3] * tiled[4];
    Value u = constant(winograd_kernel(kernel->data.array(), m), kernel->name + ".winograd");
    Value product = call(
        "nn.matmul", {reshape_call(data, {alpha * alpha, tiles, channels}, c.name + ".tiles"), u},
        te::Attrs(), c.name + ".product");
    Value products = reshape_call(product, {alpha, alpha, tiled[2], tiled[3], tiled[4], filters},
                                  c.name + ".products");
    return call("nn.winograd_output_transform", {products}, attrs, c.name);
  });
}

Graph pad_output_channels(const Graph& graph, const ir::Target& target) {
  if (!target) return graph;
  const ir::HardwareParams machine = ir::hardware_params(target);
  return rewrite(graph, [&](const CallNode& c, const std::vector<Value>& args) -> Value {
    // The weight's axis of the output channels.
    size_t axis = 0;
    if (c.op == "nn.conv2d") {
      const auto& conv = dynamic_cast<const te::Conv2dAttrsNode&>(*c.attrs);
      if (conv.data_layout != "NHWC" || conv.groups != 1) return Value();
      axis = 3;  // HWIO
    } else if (c.op == "nn.conv2d_int8x4") {
      axis = 3;  // [R, S, C / 4, K]
    } else if (c.op == "nn.dense") {
      axis = 0;  // [N, K]
    } else if (c.op == "nn.matmul" && args[1]->shape.size() == 2) {
      axis = 1;  // [K, N]
    } else {
      return Value();
    }
    const ConstantNode* weight = as_constant(args[1]);
    if (!weight || c.shape.empty()) return Value();
    const int64_t channels = c.shape.back(), lanes = ir::vector_lanes(*machine, c.dtype);
    const int64_t padded = (channels + lanes - 1) / lanes * lanes;
    // Dot products of words want whole vectors: half ones leave the C
    // compiler a loop of helper calls it does not vectorize. So do float
    // convolutions where a vector holds 16: 24 channels are three 8-lane
    // vectors, 32 two of 16, and the generated MobileNetV2 and
    // EfficientNet-B0 ran 6% faster untuned on AVX-512 (AVX2's half
    // vectors are not measured and stay).
    const bool whole_vectors =
        c.op == "nn.conv2d_int8x4" ||
        (c.op == "nn.conv2d" && ir::vector_lanes(*machine, ir::DataType::float32()) >= 16);
    if (lanes < 4 || channels < lanes || 2 * padded > 3 * channels ||
        channels % (whole_vectors ? lanes : lanes / 2) == 0) {
      return Value();
    }
    const te::NDArray& w = weight->data.array();
    std::vector<int64_t> shape = w.shape();
    int64_t inner = 1;
    for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
    shape[axis] = padded;
    te::NDArray wide(w.dtype(), shape);  // zeros
    for (int64_t i = 0; i < w.size(); ++i) {
      const int64_t outer = i / (channels * inner), rest = i % (channels * inner);
      wide.set(outer * padded * inner + rest, w.get(i));
    }
    std::vector<Value> padded_args = args;
    padded_args[1] = constant(std::move(wide), weight->name + ".padded");
    Value out = call(c.op, std::move(padded_args), c.attrs, c.name + ".padded");
    auto s = make_node<te::SliceAttrsNode>();
    s->begin.assign(c.shape.size(), 0);
    s->end = c.shape;
    s->strides.assign(c.shape.size(), 1);
    return call("slice", {out}, te::Attrs(attrs_node(std::move(s))), c.name);
  });
}

Graph scale_conv_weights(const Graph& graph) {
  // EfficientNet-B0 on 2 threads: the 14x14 layers (data 1.7-2.4 times the
  // weight) ran 30% slower scaled, the 28x28 ones (16 times) faster.
  constexpr int64_t kScaledWeightShare = 8;
  std::unordered_map<const Object*, int> readers;
  for (const auto& c : calls_in_order(graph)) {
    for (const auto& a : c->args) ++readers[a.get()];
  }
  for (const auto& o : graph->outputs) readers[o.get()] += 1;
  Graph scaled = rewrite(graph, [&](const CallNode& c, const std::vector<Value>& args) -> Value {
    if (c.op != "nn.conv2d") return Value();
    const auto& conv = dynamic_cast<const te::Conv2dAttrsNode&>(*c.attrs);
    const CallNode* m = as_call(args[0]);
    // The product must be read by this convolution alone: another reader
    // would keep it, and the pass over the data it costs.
    // float16 is left alone: w * s may pass 65504 where (x * s) * w did not.
    if (conv.data_layout != "NHWC" || conv.groups != 1 || !m || m->op != "multiply" ||
        m->args.size() != 2 || readers[c.args[0].get()] != 1 ||
        (m->dtype != ir::DataType::float32() && m->dtype != ir::DataType::bfloat16())) {
      return Value();
    }
    const Value& weight = args[1];  // HWIO
    const int64_t channels = weight->shape[2];
    for (int side = 0; side < 2; ++side) {
      const Value& data = m->args[static_cast<size_t>(side)];
      const Value& scale = m->args[static_cast<size_t>(1 - side)];
      // One factor per input channel, shared by every image and pixel.
      std::vector<int64_t> factors = scale->shape;
      while (!factors.empty() && factors.front() == 1) factors.erase(factors.begin());
      if (data->shape != m->shape || factors != std::vector<int64_t>{channels}) continue;
      const ConstantNode* constant_scale = as_constant(scale);
      if (constant_scale) {
        // Padding adds zeros after the product: 0 * (w * inf) would be NaN.
        const te::NDArray& values = constant_scale->data.array();
        bool finite = true;
        for (int64_t i = 0; i < values.size() && finite; ++i) finite = std::isfinite(values.get(i));
        if (!finite) continue;
      } else if (!all_zero(conv.padding)) {
        continue;  // the same, for a scale whose values are not known
      }
      // A scale that does not fold into a constant weight costs a pass over
      // the weight per call instead of one over the data, and on several
      // threads each reads the weight from the core that scaled it: only
      // where the weight is much the smaller (a squeeze-excitation's layers
      // of 28x28 pixels and more).
      const bool folds = constant_scale && as_constant(weight);
      if (!folds && kScaledWeightShare * checked_elements(weight->shape, "the weight") >
                        checked_elements(data->shape, "the data")) {
        continue;
      }
      Value column = constant_scale
                         ? constant(reshape_array(constant_scale->data.array(), {channels, 1}),
                                    constant_scale->name)
                         : reshape_call(scale, {channels, 1}, m->name + ".per_input_channel");
      Value w = call("multiply", {weight, column}, te::Attrs(), c.name + ".scaled_weight");
      return call(c.op, {data, w}, c.attrs, c.name);
    }
    return Value();
  });
  return fold_constants(scaled);
}

namespace {

/// Bytes `bytes` (uint8) and a zero point with value == bytes - zero_point
/// - runtime_zero_point: a constant, plus, where the zero point is known
/// only at run time (a DynamicQuantizeLinear's), an int32 scalar.
struct CentredBytes {
  Value bytes;
  int64_t zero_point = 0;
  Value runtime_zero_point;
};

/// The single value of a constant whose elements are all equal.
std::optional<int64_t> uniform_integer(const Value& v) {
  const ConstantNode* k = as_constant(v);
  if (!k || !k->dtype.is_integer() || k->data.array().size() == 0) return std::nullopt;
  const te::NDArray& a = k->data.array();
  const double first = a.get(0);
  for (int64_t i = 1; i < a.size(); ++i) {
    if (a.get(i) != first) return std::nullopt;
  }
  return static_cast<int64_t>(first);
}

te::Attrs cast_attrs(ir::DataType t) {
  auto a = make_node<te::CastAttrsNode>();
  a->dtype = t;
  return te::Attrs(attrs_node(std::move(a)));
}

/// `v`, cast(z) of one value z of type `bytes` to int32, as an int32
/// scalar: a zero point known only at run time.
Value runtime_zero_point(const Value& v, ir::DataType bytes) {
  const CallNode* c = as_call(v);
  if (!c || c->op != "cast" || c->dtype != ir::DataType::int32() || c->args[0]->dtype != bytes ||
      checked_elements(v->shape, "a zero point") != 1) {
    return Value();
  }
  return v->shape.empty() ? v : reshape_call(v, {}, c->name + ".scalar");
}

/// `data` (int32) as centred int8 or uint8 bytes, as the ONNX importer
/// writes ConvInteger's, MatMulInteger's and QLinearConv's operand: cast(x)
/// or subtract(cast(x), zero point), the zero point a constant or one value
/// of x's type, maybe seen through a transpose, reshape or take. int8 bytes are
/// moved up by 128 to uint8, and their zero point with them.
std::optional<CentredBytes> centred_bytes(const Value& data) {
  const CallNode* c = as_call(data);
  if (!c) return std::nullopt;
  if (c->op == "transpose" || c->op == "reshape" || c->op == "take") {
    auto inner = centred_bytes(c->args[0]);
    if (!inner) return std::nullopt;
    std::vector<Value> moved = c->args;
    moved[0] = inner->bytes;
    inner->bytes = call(c->op, std::move(moved), c->attrs, c->name + ".bytes");
    return inner;
  }
  CentredBytes out;
  Value zero_point;
  if (c->op == "subtract") {
    zero_point = c->args[1];
    c = as_call(c->args[0]);
    if (!c) return std::nullopt;
  }
  // A zero point that broadcast the data wider is not one per byte.
  if (c->op != "cast" || c->dtype != ir::DataType::int32() || c->shape != data->shape) {
    return std::nullopt;
  }
  const Value& x = c->args[0];
  if (zero_point) {
    // A zero point of the data's own type keeps |x - z| <= 255.
    if (auto z = uniform_integer(zero_point)) {
      out.zero_point = *z;
    } else if (!(out.runtime_zero_point = runtime_zero_point(zero_point, x->dtype))) {
      return std::nullopt;
    }
  }
  if (x->dtype == ir::DataType::uint(8)) {
    out.bytes = x;
  } else if (x->dtype == ir::DataType::int_(8)) {
    Value moved = call("add",
                       {call("cast", {x}, cast_attrs(ir::DataType::int32()), c->name + ".wide"),
                        int32_scalar(128, c->name + ".offset")},
                       te::Attrs(), c->name + ".offset");
    out.bytes = call("cast", {moved}, cast_attrs(ir::DataType::uint(8)), c->name + ".bytes");
    out.zero_point += 128;
  } else {
    return std::nullopt;
  }
  // A constant zero point must be a byte too: |x - z| <= 255, and the
  // padding of words holds it.
  if (!out.runtime_zero_point && (out.zero_point < 0 || out.zero_point > 255)) return std::nullopt;
  return out;
}

/// Whether every value of `kernel` is an int8 one.
bool fits_int8(const te::NDArray& kernel) {
  for (int64_t i = 0; i < kernel.size(); ++i) {
    if (kernel.get(i) < -128 || kernel.get(i) > 127) return false;
  }
  return true;
}

/// Whether a convolution of centred bytes (|x| <= 255) with `kernel` (its
/// last axis the output channels) sums exactly in float32: every product
/// and partial sum an integer below 2^24, whatever the order of summation.
bool sums_exact_in_float32(const te::NDArray& kernel) {
  double largest = 0;
  for (int64_t i = 0; i < kernel.size(); ++i) largest = std::max(largest, std::abs(kernel.get(i)));
  const double terms =
      static_cast<double>(kernel.size() / std::max<int64_t>(kernel.shape().back(), 1));
  return terms * 255.0 * largest < 16777216.0;
}

}  // namespace

Graph integer_matmul_as_conv2d(const Graph& graph) {
  // One view of the rows per value, however many matmuls read it (a
  // transformer's Q, K and V projections): the passes after key on it.
  std::unordered_map<const Object*, std::pair<Value, Value>> rows_of;
  return rewrite(graph, [&](const CallNode& c, const std::vector<Value>& args) -> Value {
    if (c.op != "nn.matmul" || c.dtype != ir::DataType::int32()) return Value();
    const ConstantNode* weight = as_constant(args[1]);
    const std::vector<int64_t>& a = args[0]->shape;
    if (!weight || weight->shape.size() != 2 || a.size() < 2 || weight->shape[0] == 0 ||
        weight->shape[1] == 0 || !centred_bytes(args[0])) {
      return Value();
    }
    // Only where a pass after takes the convolution: on words, or in float32.
    const te::NDArray& w = weight->data.array();
    if (!fits_int8(w) && !sums_exact_in_float32(w)) return Value();
    const int64_t k = weight->shape[0], n = weight->shape[1];
    auto [it, fresh] = rows_of.try_emplace(args[0].get());
    if (fresh) {
      const int64_t rows = checked_elements(a, "the matrix") / k;
      it->second = {args[0], reshape_call(args[0], {1, 1, rows, k}, c.name + ".rows")};
    }
    Value y = pointwise_conv(it->second.second,
                             constant(reshape_array(w, {1, 1, k, n}), weight->name + ".hwio"),
                             c.name + ".conv");
    return reshape_call(y, c.shape, c.name);
  });
}

namespace {

/// A convolution's data as conv2d_int8x4 reads it: centred bytes in words
/// of four, the word its padding holds (the zero point in each byte), and,
/// where part of the zero point is known only at run time, the whole of it
/// as a value (the bytes' run-time part plus their constant one).
struct WordOperand {
  Value data;  // keeps the object the operands are keyed by alive
  std::optional<CentredBytes> bytes;
  Value words, pad_word, zero_point_value;
};

WordOperand word_operand(const Value& data, const std::string& name) {
  WordOperand out{data, centred_bytes(data), Value(), Value(), Value()};
  if (!out.bytes) return out;
  out.words = call("nn.pack_int8x4", {out.bytes->bytes}, te::Attrs(), name + ".words");
  if (!out.bytes->runtime_zero_point) {
    const uint32_t word = static_cast<uint32_t>(out.bytes->zero_point) * 0x01010101u;
    out.pad_word = int32_scalar(static_cast<int32_t>(word), name + ".pad_word");
    return out;
  }
  Value z = out.bytes->runtime_zero_point;
  if (out.bytes->zero_point != 0) {
    z = call("add", {z, int32_scalar(out.bytes->zero_point, name + ".offset")}, te::Attrs(),
             name + ".zero_point");
  }
  out.zero_point_value = z;
  // The zero point's byte four times, packed as the data is (z * 0x01010101
  // would overflow int32 where z >= 128).
  Value bytes = call(
      "expand", {call("cast", {z}, cast_attrs(ir::DataType::uint(8)), name + ".zero_point_byte")},
      shape_attrs({4}), name + ".zero_point_bytes");
  out.pad_word = reshape_call(call("nn.pack_int8x4", {bytes}, te::Attrs(), name + ".pad_words"), {},
                              name + ".pad_word");
  return out;
}

}  // namespace

Graph integer_conv2d_as_patches(const Graph& graph) {
  // The patches' bytes: a copy (its index, an int32 constant of one
  // image's patches, is four times one image's share).
  constexpr int64_t kMaxPatchBytes = int64_t{1} << 20;
  return rewrite(graph, [&](const CallNode& c, const std::vector<Value>& args) -> Value {
    if (c.op != "nn.conv2d" || c.dtype != ir::DataType::int32()) return Value();
    const auto& conv = dynamic_cast<const te::Conv2dAttrsNode&>(*c.attrs);
    const ConstantNode* weight = as_constant(args[1]);
    if (conv.data_layout != "NHWC" || conv.groups != 1 || !weight) return Value();
    const std::vector<int64_t>& in = args[0]->shape;  // N, H, W, C
    const te::NDArray& w = weight->data.array();      // HWIO
    const int64_t r = w.shape()[0], s = w.shape()[1], channels = w.shape()[2], k = w.shape()[3];
    const int64_t oh = c.shape[1], ow = c.shape[2], taps = r * s * channels;
    // Only where int8_conv2d_words then takes it; the index is int32.
    if (channels % 4 == 0 || r * s == 1 || !all_zero(conv.padding) ||
        in[0] * oh * ow * taps > kMaxPatchBytes ||
        in[1] * in[2] * in[3] > std::numeric_limits<int32_t>::max() || !fits_int8(w) ||
        !centred_bytes(args[0])) {
      return Value();
    }
    const int64_t sh = conv.strides[0], sw = conv.strides[1];
    const int64_t dh = conv.dilation[0], dw = conv.dilation[1];
    te::NDArray index(ir::DataType::int32(), {oh * ow, taps});
    int64_t at = 0;
    for (int64_t y = 0; y < oh; ++y) {
      for (int64_t x = 0; x < ow; ++x) {
        for (int64_t ry = 0; ry < r; ++ry) {
          for (int64_t rx = 0; rx < s; ++rx) {
            const int64_t first = ((y * sh + ry * dh) * in[2] + x * sw + rx * dw) * in[3];
            for (int64_t ch = 0; ch < channels; ++ch) {
              index.set_int(at++, static_cast<int32_t>(first + ch));
            }
          }
        }
      }
    }
    Value flat = reshape_call(args[0], {in[0], in[1] * in[2] * in[3]}, c.name + ".flat");
    Value patches = call("take", {flat, constant(std::move(index), c.name + ".patch_index")},
                         axis_attrs(1), c.name + ".patches");
    return pointwise_conv(reshape_call(patches, {in[0], oh, ow, taps}, c.name + ".patch_rows"),
                          constant(reshape_array(w, {1, 1, taps, k}), weight->name + ".taps"),
                          c.name);
  });
}

Graph int8_conv2d_words(const Graph& graph) {
  // One packing per value, however many convolutions read it (a
  // transformer's Q, K and V projections).
  std::unordered_map<const Object*, WordOperand> operands;
  return rewrite(graph, [&](const CallNode& c, const std::vector<Value>& args) -> Value {
    if (c.op != "nn.conv2d" || c.dtype != ir::DataType::int32()) return Value();
    const auto& conv = dynamic_cast<const te::Conv2dAttrsNode&>(*c.attrs);
    const ConstantNode* weight = as_constant(args[1]);
    if (conv.data_layout != "NHWC" || conv.groups != 1 || !weight) return Value();
    const te::NDArray& w = weight->data.array();
    if (!fits_int8(w)) return Value();
    auto [it, fresh] = operands.try_emplace(args[0].get());
    if (fresh) it->second = word_operand(args[0], c.name);
    const WordOperand& data = it->second;
    if (!data.bytes) return Value();
    // The kernel in words, and per output channel the sum of its weights:
    // sum((x - z) * w) = sum(x * w) - z * sum(w), padding included, since
    // the data is padded with z.
    const int64_t r = w.shape()[0], s = w.shape()[1], channels = w.shape()[2], k = w.shape()[3];
    const int64_t words = (channels + 3) / 4;
    te::NDArray packed(ir::DataType::int32(), {r, s, words, k});
    te::NDArray weight_sums(ir::DataType::int32(), {k});  // zeros
    for (int64_t rs = 0; rs < r * s; ++rs) {
      for (int64_t word = 0; word < words; ++word) {
        for (int64_t o = 0; o < k; ++o) {
          uint32_t bits = 0;
          for (int64_t j = 0; j < 4 && 4 * word + j < channels; ++j) {
            const auto v = static_cast<int64_t>(w.get((rs * channels + 4 * word + j) * k + o));
            weight_sums.set_int(o, weight_sums.get_int(o) + v);
            bits |= (static_cast<uint32_t>(v) & 0xffu) << (8 * j);
          }
          packed.set_int((rs * words + word) * k + o, static_cast<int32_t>(bits));
        }
      }
    }
    Value out =
        call("nn.conv2d_int8x4",
             {data.words, constant(std::move(packed), weight->name + ".words"), data.pad_word},
             c.attrs, c.name);
    Value correction;
    if (data.zero_point_value) {
      correction =
          call("multiply",
               {data.zero_point_value, constant(std::move(weight_sums), c.name + ".weight_sums")},
               te::Attrs(), c.name + ".zero_point_sums");
    } else if (data.bytes->zero_point != 0) {
      const int64_t z = data.bytes->zero_point;
      for (int64_t o = 0; o < k; ++o) weight_sums.set_int(o, z * weight_sums.get_int(o));
      correction = constant(std::move(weight_sums), c.name + ".zero_point_sums");
    } else {
      return out;
    }
    return call("subtract", {out, correction}, te::Attrs(), c.name + ".centred");
  });
}

namespace {

/// Float32 copies of values, each made once however many operators read
/// it: a constant widened at compile time, anything else cast where it is
/// computed (one cast, not one per reader: a layer norm's output read by
/// the Q, K and V projections).
class Float32Copies {
 public:
  /// `c` with every operand in float32, with c's attributes.
  Value call_in_float32(const CallNode& c, const std::vector<Value>& args) {
    std::vector<Value> wide;
    for (const Value& a : args) wide.push_back(of(a));
    return call(c.op, wide, c.attrs, c.name + ".float");
  }

 private:
  Value of(const Value& v) {
    if (v->dtype == ir::DataType::float32()) return v;
    auto it = copies_.find(v.get());
    if (it != copies_.end()) return it->second.second;
    Value wide;
    if (const ConstantNode* k = as_constant(v)) {
      const te::NDArray& a = k->data.array();
      wide = constant(a.converted(ir::DataType::float32()), k->name + ".float");
    } else {
      const auto* input = dynamic_cast<const InputNode*>(v.get());
      const auto* producer = dynamic_cast<const CallNode*>(v.get());
      wide = call("cast", {v}, cast_attrs(ir::DataType::float32()),
                  (input      ? input->name
                   : producer ? producer->name
                              : "value") +
                      ".float");
    }
    copies_.emplace(v.get(), std::pair{v, wide});  // holds v: its address stays its own
    return wide;
  }
  std::unordered_map<const Object*, std::pair<Value, Value>> copies_;
};

/// `c`, a float16 operator that widens its operands, works in float32 and
/// rounds once, computed on operands widened once: the same values. It
/// rounds as the operator does: by `narrow` where the operator ends in
/// detail::narrow (the products: what is fused after it, a bias, an
/// activation, a residual add, reads the float32 sum and rounds once), else
/// by `cast` (softmax and
/// layer norm round in their last stage, and what is fused after them
/// reads the rounded value).
Value float16_in_float32(Float32Copies& copies, const CallNode& c, const std::vector<Value>& args,
                         const char* rounding) {
  return call(rounding, {copies.call_in_float32(c, args)}, cast_attrs(ir::DataType::float16()),
              c.name);
}

}  // namespace

Graph int_conv2d_as_float(const Graph& graph) {
  Float32Copies copies;
  return rewrite(graph, [&](const CallNode& c, const std::vector<Value>& args) -> Value {
    if (c.op != "nn.conv2d" || c.dtype != ir::DataType::int32()) return Value();
    const auto& conv = dynamic_cast<const te::Conv2dAttrsNode&>(*c.attrs);
    const ConstantNode* weight = as_constant(args[1]);
    if (conv.data_layout != "NHWC" || !weight || !centred_bytes(args[0])) return Value();
    if (!sums_exact_in_float32(weight->data.array())) return Value();
    return call("cast", {copies.call_in_float32(c, args)}, cast_attrs(ir::DataType::int32()),
                c.name);
  });
}

Graph float16_conv2d_in_float32(const Graph& graph) {
  Float32Copies copies;
  return rewrite(graph, [&](const CallNode& c, const std::vector<Value>& args) -> Value {
    if (c.op != "nn.conv2d" || c.dtype != ir::DataType::float16() || !as_constant(args[1])) {
      return Value();
    }
    return float16_in_float32(copies, c, args, "narrow");
  });
}

Graph float16_ops_in_float32(const Graph& graph) {
  // Each of these, in float16, widens its operands, works in float32 and
  // rounds once (log_softmax does not: it subtracts the maximum in
  // float16), and the products end in detail::narrow.
  static const std::map<std::string, const char*> rounding = {{"nn.dense", "narrow"},
                                                              {"nn.matmul", "narrow"},
                                                              {"nn.softmax", "cast"},
                                                              {"nn.layer_norm", "cast"}};
  Float32Copies copies;
  return rewrite(graph, [&](const CallNode& c, const std::vector<Value>& args) -> Value {
    auto it = rounding.find(c.op);
    if (it == rounding.end() || c.dtype != ir::DataType::float16()) return Value();
    return float16_in_float32(copies, c, args, it->second);
  });
}

namespace {

/// Bounds of a value known to hold only integers (whatever its type):
/// infinite where unbounded.
struct IntegerRange {
  double low = -INFINITY, high = INFINITY;
  bool within(double a, double b) const { return low >= a && high <= b; }
};

/// The values an integer type holds; 32 bits at most (a bound past 2^53
/// would not be exact in a double).
std::optional<IntegerRange> type_range(ir::DataType t) {
  if (!t.is_integer() || t.bits() > 32) return std::nullopt;
  if (t.is_uint()) return IntegerRange{0, std::ldexp(1.0, t.bits()) - 1};
  return IntegerRange{-std::ldexp(1.0, t.bits() - 1), std::ldexp(1.0, t.bits() - 1) - 1};
}

/// The integers a float type holds exactly, every smaller one with them.
double exact_integers(ir::DataType t) {
  if (t.code() == ir::DataType::Code::kBFloat) return 256;
  return t.bits() == 16 ? 2048 : t.bits() == 32 ? 16777216 : 9007199254740992.0;
}

/// Whether every value of `r` survives a conversion to `t` unchanged.
bool holds(ir::DataType t, const IntegerRange& r) {
  if (t.is_float()) return r.within(-exact_integers(t), exact_integers(t));
  auto range = type_range(t);
  return range && r.within(range->low, range->high);
}

/// Where values provably hold only integers, their bounds: constants,
/// rounding, casts to integers, clips, sums and extrema of such values,
/// their transposes, reshapes and slices, and convolutions of them with
/// integer kernels. Each value's is worked out once: a value reached along
/// many paths (every diamond of a graph) is not walked again.
class IntegerRanges {
 public:
  std::optional<IntegerRange> of(const Value& v) {
    auto it = known_.find(v.get());
    if (it != known_.end()) return it->second.second;
    std::optional<IntegerRange> r = compute(v);
    known_.emplace(v.get(), std::pair{v, r});  // holds v: its address stays its own
    return r;
  }

 private:
  std::optional<IntegerRange> compute(const Value& v);
  std::unordered_map<const Object*, std::pair<Value, std::optional<IntegerRange>>> known_;
};

std::optional<IntegerRange> IntegerRanges::compute(const Value& v) {
  if (const ConstantNode* k = as_constant(v)) {
    const te::NDArray& a = k->data.array();
    if (a.size() == 0) return std::nullopt;
    IntegerRange r{INFINITY, -INFINITY};
    for (int64_t i = 0; i < a.size(); ++i) {
      const double x = a.get(i);
      if (x != std::floor(x)) return std::nullopt;
      r.low = std::min(r.low, x);
      r.high = std::max(r.high, x);
    }
    return r;
  }
  const CallNode* c = as_call(v);
  if (!c) return type_range(v->dtype);
  const std::string& op = c->op;
  auto arg = [&](size_t i) { return of(c->args[i]); };
  // Values moved, none made.
  if (op == "transpose" || op == "reshape" || op == "slice") return arg(0);
  if (op == "round" || op == "floor" || op == "ceil") {
    if (!c->dtype.is_float()) return std::nullopt;
    IntegerRange r;
    if (auto in = arg(0)) r = *in;  // already integers: unchanged
    return r;
  }
  if (op == "cast") {
    auto in = arg(0);
    if (auto t = type_range(c->dtype)) {
      // A float cast to an integer type is truncated into it.
      return in && in->within(t->low, t->high) ? *in : *t;
    }
    if (c->dtype.is_float() && in && holds(c->dtype, *in)) return in;
    return std::nullopt;
  }
  if (op == "clip") {
    auto in = arg(0);
    if (!in) return std::nullopt;
    const auto& a = dynamic_cast<const te::ScalarAttrsNode&>(*c->attrs);
    return IntegerRange{std::max(in->low, std::ceil(a.alpha)),
                        std::min(in->high, std::floor(a.beta))};
  }
  if (op == "add" || op == "nn.bias_add" || op == "subtract" || op == "maximum" ||
      op == "minimum") {
    auto a = arg(0), b = arg(1);
    if (!a || !b) return std::nullopt;
    if (op == "add" || op == "nn.bias_add") return IntegerRange{a->low + b->low, a->high + b->high};
    if (op == "subtract") return IntegerRange{a->low - b->high, a->high - b->low};
    if (op == "maximum") return IntegerRange{std::max(a->low, b->low), std::max(a->high, b->high)};
    return IntegerRange{std::min(a->low, b->low), std::min(a->high, b->high)};
  }
  if (op == "nn.conv2d") {
    // Each output is a sum of products with one output channel's weights;
    // the padding adds zeros.
    const auto& attrs = dynamic_cast<const te::Conv2dAttrsNode&>(*c->attrs);
    const ConstantNode* w = as_constant(c->args[1]);
    auto data = arg(0);
    if (attrs.data_layout != "NHWC" || !w || !data || !std::isfinite(data->low) ||
        !std::isfinite(data->high)) {
      return std::nullopt;
    }
    const double low = std::min(data->low, 0.0), high = std::max(data->high, 0.0);
    const te::NDArray& k = w->data.array();  // HWIO
    const int64_t outputs = k.shape().back();
    std::vector<double> lows(static_cast<size_t>(outputs)), highs(static_cast<size_t>(outputs));
    for (int64_t i = 0; i < k.size(); ++i) {
      const double x = k.get(i);
      if (x != std::floor(x)) return std::nullopt;
      const auto o = static_cast<size_t>(i % outputs);
      lows[o] += std::min(x * low, x * high);
      highs[o] += std::max(x * low, x * high);
    }
    return IntegerRange{*std::min_element(lows.begin(), lows.end()),
                        *std::max_element(highs.begin(), highs.end())};
  }
  return std::nullopt;
}

/// cast(v) as the cast call `c` would give it, or v itself in c's type.
Value recast(const CallNode& c, const Value& v) {
  if (v->dtype == c.dtype) return v;
  return call("cast", {v}, c.attrs, c.name);
}

}  // namespace

Graph exact_integer_casts(const Graph& graph) {
  IntegerRanges ranges;
  return rewrite(graph, [&](const CallNode& c, const std::vector<Value>& args) -> Value {
    if (c.op != "cast" || c.dtype.is_bool()) return Value();
    const CallNode* inner = as_call(args[0]);
    if (!inner) return Value();
    // cast(cast(b)): b's integers pass through the inner type unchanged.
    if (inner->op == "cast" && !inner->dtype.is_bool()) {
      const Value& b = inner->args[0];
      auto r = ranges.of(b);
      if (r && holds(inner->dtype, *r) && holds(c.dtype, *r)) return recast(c, b);
      return Value();
    }
    // cast(cast(b) + k) back to b's type: the sum in b's type is exact.
    const bool sum = inner->op == "add" || inner->op == "subtract" || inner->op == "nn.bias_add";
    if (!sum || !inner->dtype.is_integer()) return Value();
    const CallNode* widened = as_call(inner->args[0]);
    const ConstantNode* k = as_constant(inner->args[1]);
    if (!widened || widened->op != "cast" || !k) return Value();
    const Value& b = widened->args[0];
    auto rb = ranges.of(b), rk = ranges.of(inner->args[1]), out = ranges.of(args[0]);
    if (b->dtype != c.dtype || !rb || !rk || !out || !holds(widened->dtype, *rb) ||
        !holds(inner->dtype, *out) || !holds(c.dtype, *out) || !holds(c.dtype, *rk)) {
      return Value();
    }
    Value converted = fold_call(call("cast", {inner->args[1]}, c.attrs, k->name));
    return call(inner->op, {b, converted}, inner->attrs, inner->name);
  });
}

Graph sink_reshapes(const Graph& graph) {
  auto reshape_of = [](const Value& v) -> const CallNode* {
    const CallNode* c = as_call(v);
    return c && c->op == "reshape" ? c : nullptr;
  };
  return rewrite(graph, [&](const CallNode& c, const std::vector<Value>& args) -> Value {
    te::OpPattern pattern = te::find_op(c.op).pattern;
    if (pattern == te::OpPattern::kElemwise && args.size() == 1) {
      const CallNode* r = reshape_of(args[0]);
      if (!r) return Value();
      return reshape_call(call(c.op, {r->args[0]}, c.attrs, c.name), c.shape, r->name);
    }
    if (pattern != te::OpPattern::kBroadcast || args.size() != 2) return Value();
    // bias_add's bias is one axis of its data: only the constant case below.
    const bool bias = c.op == "nn.bias_add";
    // Both operands reshaped from the same shape to the result's.
    const CallNode* ra = reshape_of(args[0]);
    const CallNode* rb = reshape_of(args[1]);
    if (!bias && ra && rb && ra->shape == c.shape && rb->shape == c.shape &&
        ra->args[0]->shape == rb->args[0]->shape) {
      return reshape_call(call(c.op, {ra->args[0], rb->args[0]}, c.attrs, c.name), c.shape,
                          ra->name);
    }
    for (int side = 0; side < 2; ++side) {
      const CallNode* r = reshape_of(args[static_cast<size_t>(side)]);
      const Value& other = args[static_cast<size_t>(1 - side)];
      // An operand of the result's shape, not broadcast: seen in the
      // reshape's source shape (a view too).
      if (!bias && r && !as_constant(other) && other->shape == c.shape && r->shape == c.shape) {
        Value seen = reshape_call(other, r->args[0]->shape, r->name);
        std::vector<Value> moved =
            side == 0 ? std::vector<Value>{r->args[0], seen} : std::vector<Value>{seen, r->args[0]};
        return reshape_call(call(c.op, moved, c.attrs, c.name), c.shape, r->name);
      }
      const ConstantNode* k = as_constant(other);
      if (!r || !k || c.shape != r->shape) continue;
      // The constant's shape without leading ones must be the trailing
      // dimensions the reshape keeps.
      const std::vector<int64_t>& x = r->args[0]->shape;
      std::vector<int64_t> trailing = k->shape;
      while (!trailing.empty() && trailing.front() == 1) trailing.erase(trailing.begin());
      if (trailing.size() > x.size() || trailing.size() > r->shape.size()) continue;
      if (!std::equal(x.end() - static_cast<std::ptrdiff_t>(trailing.size()), x.end(),
                      r->shape.end() - static_cast<std::ptrdiff_t>(trailing.size()))) {
        continue;
      }
      Value kc = constant(
          reshape_array(k->data.array(), trailing.empty() ? std::vector<int64_t>{1} : trailing),
          k->name);
      std::vector<Value> moved =
          side == 0 ? std::vector<Value>{r->args[0], kc} : std::vector<Value>{kc, r->args[0]};
      te::Attrs attrs = c.attrs;
      if (bias) {
        // Its axis counts from the front: moved only along the last one,
        // which is the last of the reshape's source too.
        const int64_t axis = dynamic_cast<const te::AxisAttrsNode&>(*c.attrs).axis;
        const auto rank = static_cast<int64_t>(c.shape.size());
        if (side != 0 || (axis != -1 && axis != rank - 1) || k->shape.size() != 1 ||
            k->shape[0] != x.back()) {
          continue;
        }
        attrs = axis_attrs(static_cast<int64_t>(x.size()) - 1);
      }
      return reshape_call(call(c.op, moved, attrs, c.name), c.shape, r->name);
    }
    return Value();
  });
}

namespace {

const char* kFailPassOption = "testing.fail_graph_pass";

struct PipelinePass {
  const char* name;
  Graph (*run)(const Graph&, const ir::Target&);
};

template <Graph (*pass)(const Graph&)>
Graph any_target(const Graph& graph, const ir::Target&) {
  return pass(graph);
}

const std::vector<PipelinePass>& pipeline() {
  static const std::vector<PipelinePass> passes = {
      {"simplify_inference", any_target<simplify_inference>},
      {"fold_constants", any_target<fold_constants>},
      {"convert_layout_nhwc", any_target<convert_layout_nhwc>},
      {"integer_matmul_as_conv2d", any_target<integer_matmul_as_conv2d>},
      {"integer_conv2d_as_patches", any_target<integer_conv2d_as_patches>},
      {"int8_conv2d_words", any_target<int8_conv2d_words>},
      {"int_conv2d_as_float", any_target<int_conv2d_as_float>},
      {"exact_integer_casts", any_target<exact_integer_casts>},
      {"float16_conv2d_in_float32", any_target<float16_conv2d_in_float32>},
      {"float16_ops_in_float32", any_target<float16_ops_in_float32>},
      {"winograd_conv2d", winograd_conv2d},
      {"pad_output_channels", pad_output_channels},
      {"scale_conv_weights", any_target<scale_conv_weights>},
      {"sink_reshapes", any_target<sink_reshapes>},
  };
  return passes;
}

}  // namespace

std::vector<std::string> optimize_pass_names() {
  std::vector<std::string> out;
  for (const auto& p : pipeline()) out.push_back(p.name);
  return out;
}

std::string failing_pass_for_testing() {
  return ir::PassContext::current()->get_config<std::string>(kFailPassOption);
}

Graph optimize(const Graph& graph, const ir::Target& target) {
  std::string fail_in = failing_pass_for_testing();
  Graph g = graph;
  for (const auto& p : pipeline()) {
    g = ir::run_pass(p.name, g, [&](const Graph& in) {
      Graph out = p.run(in, target);
      // Testing: a pass that fails halfway, after its work was done.
      TT_CHECK(fail_in != p.name, kRuntime, "graph pass ", p.name, " failed (planted by ",
               kFailPassOption, ")");
      return out;
    });
  }
  return g;
}

namespace {
/// "" and every graph pass: a misspelt pass would fail nothing, silently.
std::vector<std::string> fail_pass_choices() {
  std::vector<std::string> choices = optimize_pass_names();
  choices.insert(choices.begin(), "");
  return choices;
}
}  // namespace

TT_REGISTER_CONFIG_OPTION(kFailPassOption, ir::ConfigType::kString, "",
                          "testing: the graph pass of optimize() that fails halfway (for tests)",
                          fail_pass_choices());

}  // namespace tensortune::graph
