// Elementwise and broadcasting operators, and the normalisations built on them.
#include <cmath>
#include <numbers>

#include "te/op_util.h"
#include "tensortune/support/shape.h"
#include "tensortune/te/ops.h"

namespace tensortune::te {

using detail::accumulation_type;
using detail::accumulator_name;
using detail::as_exprs;
using detail::as_type;
using detail::check_defined;
using detail::check_float;
using detail::check_rank;
using detail::check_same_dtype;
using detail::index_const;
using detail::json_number;
using detail::narrow;
using detail::value_const;
using detail::wide_source;
using detail::widen;

// ---- unary --------------------------------------------------------------------

namespace {

Tensor elemwise_reading(const Tensor& x, bool read_sum, const std::function<Expr(const Expr&)>& f,
                        std::string name, nlohmann::json attrs) {
  check_defined(x, name, "the operand");
  // A function of a rounded sum works on the sum and rounds once, as
  // ONNX Runtime runs float16 Sigmoid, Mul, ... in float32 on x86 and
  // drops the casts between them. Not where f changes the type.
  Tensor wide = wide_source(x);
  if (read_sum && x.dtype().is_float() && wide.dtype().is_float() && !wide.same_as(x) &&
      f(ir::make_const(x.dtype(), 1)).dtype() == x.dtype()) {
    Tensor out = compute(
        x.shape(), [&](const std::vector<Var>& v) { return f(wide(as_exprs(v))); },
        accumulator_name(name, x.dtype()), "elemwise", attrs);
    return narrow(out, x.dtype(), std::move(name));
  }
  return compute(
      x.shape(), [&](const std::vector<Var>& v) { return f(x(as_exprs(v))); }, std::move(name),
      "elemwise", std::move(attrs));
}

// A float-only unary op that maps straight onto an intrinsic; a step
// function (floor, ceil, round) reads its operand as stored.
Tensor float_unary(const Tensor& x, const char* name, Expr (*f)(Expr), bool step = false) {
  check_defined(x, name, "the operand");
  check_float(x, name);
  return elemwise_reading(
      x, !step, [f](const Expr& e) { return f(e); }, name, nlohmann::json::object());
}

}  // namespace

Tensor elemwise(const Tensor& x, const std::function<Expr(const Expr&)>& f, std::string name,
                nlohmann::json attrs) {
  return elemwise_reading(x, true, f, std::move(name), std::move(attrs));
}

Tensor step_elemwise(const Tensor& x, const std::function<Expr(const Expr&)>& f, std::string name,
                     nlohmann::json attrs) {
  return elemwise_reading(x, false, f, std::move(name), std::move(attrs));
}

Tensor exp(const Tensor& x) { return float_unary(x, "exp", ir::exp); }
Tensor log(const Tensor& x) { return float_unary(x, "log", ir::log); }
Tensor sqrt(const Tensor& x) { return float_unary(x, "sqrt", ir::sqrt); }
Tensor rsqrt(const Tensor& x) { return float_unary(x, "rsqrt", ir::rsqrt); }
Tensor tanh(const Tensor& x) { return float_unary(x, "tanh", ir::tanh); }
Tensor sigmoid(const Tensor& x) { return float_unary(x, "sigmoid", ir::sigmoid); }
Tensor erf(const Tensor& x) { return float_unary(x, "erf", ir::erf); }
Tensor floor(const Tensor& x) { return float_unary(x, "floor", ir::floor, true); }
Tensor ceil(const Tensor& x) { return float_unary(x, "ceil", ir::ceil, true); }
Tensor round(const Tensor& x) {
  return float_unary(
      x, "round", [](Expr e) { return ir::call(ir::Intrinsic::kRound, {e}); }, true);
}
Tensor sin(const Tensor& x) {
  return float_unary(x, "sin", [](Expr e) { return ir::call(ir::Intrinsic::kSin, {e}); });
}
Tensor cos(const Tensor& x) {
  return float_unary(x, "cos", [](Expr e) { return ir::call(ir::Intrinsic::kCos, {e}); });
}
Tensor atan(const Tensor& x) {
  return float_unary(x, "atan", [](Expr e) { return ir::call(ir::Intrinsic::kAtan, {e}); });
}

Tensor abs(const Tensor& x) {
  check_defined(x, "abs", "the operand");
  return elemwise(
      x,
      [](const Expr& e) -> Expr {
        DataType t = e.dtype();
        if (t.is_float()) return ir::fabs(e);
        if (t.is_uint() || t.is_bool()) return e;
        return ir::select(e < value_const(t, 0), value_const(t, 0) - e, e);
      },
      "abs");
}

Tensor negative(const Tensor& x) {
  check_defined(x, "negative", "the operand");
  return elemwise(
      x, [](const Expr& e) { return value_const(e.dtype(), 0) - e; }, "negative");
}

Tensor relu(const Tensor& x) {
  check_defined(x, "relu", "the operand");
  return elemwise(
      x, [](const Expr& e) { return ir::max(e, value_const(e.dtype(), 0)); }, "relu");
}

Tensor leaky_relu(const Tensor& x, double alpha) {
  check_defined(x, "leaky_relu", "the operand");
  check_float(x, "leaky_relu");
  return elemwise(x,
                  [alpha](const Expr& e) {
                    DataType t = e.dtype();
                    return ir::select(e > value_const(t, 0), e, e * value_const(t, alpha));
                  },
                  "leaky_relu", {{"alpha", json_number(alpha)}});
}

Tensor clip(const Tensor& x, double low, double high) {
  check_defined(x, "clip", "the operand");
  if (!(low <= high)) {
    fail(ErrorKind::kInvalidArgument, "clip: low (", low, ") must not exceed high (", high, ")");
  }
  return elemwise(x,
                  [low, high](const Expr& e) {
                    DataType t = e.dtype();
                    return ir::min(ir::max(e, value_const(t, low)), value_const(t, high));
                  },
                  "clip", {{"low", json_number(low)}, {"high", json_number(high)}});
}

Tensor gelu(const Tensor& x) {
  check_defined(x, "gelu", "the operand");
  check_float(x, "gelu");
  return elemwise(x,
                  [](const Expr& e) {
                    DataType t = e.dtype();
                    Expr cdf =
                        value_const(t, 1) + ir::erf(e * value_const(t, 1.0 / std::numbers::sqrt2));
                    return value_const(t, 0.5) * e * cdf;
                  },
                  "gelu", {{"approximation", "erf"}});
}

Tensor cast(const Tensor& x, DataType dtype) {
  check_defined(x, "cast", "the operand");
  // A cast of a rounded float sum converts the sum: ONNX Runtime runs a
  // float16 operator without a float16 kernel in float32, and where a Cast
  // follows drops its own cast to float16 (to float32 or float64, to an
  // integer: 2047.5 truncates to 2047, not to half's 2048).
  Tensor source = x;
  if (Tensor wide = wide_source(x); x.dtype().is_float() && wide.dtype().is_float()) {
    source = wide;
  }
  return compute(x.shape(),
                 [&](const std::vector<Var>& v) { return ir::cast(dtype, source(as_exprs(v))); },
                 "cast", "injective", {{"dtype", dtype.str()}});
}

// ---- broadcasting binary --------------------------------------------------------

std::vector<int64_t> broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t d = 0; d < rank; ++d) {
    // Aligned at the right: a missing leading dimension acts as extent 1.
    int64_t ea = d + a.size() >= rank ? a[d + a.size() - rank] : 1;
    int64_t eb = d + b.size() >= rank ? b[d + b.size() - rank] : 1;
    if (ea != eb && ea != 1 && eb != 1) {
      fail(ErrorKind::kInvalidArgument, "shapes ", shape_text(a), " and ", shape_text(b),
           " do not broadcast: dimension ", d, " of the result has extents ", ea, " and ", eb);
    }
    out[d] = ea == 1 ? eb : ea;
  }
  return out;
}

namespace {

// The index into `t` for output index `v` under broadcasting.
std::vector<Expr> broadcast_index(const Tensor& t, const std::vector<Var>& v) {
  std::vector<Expr> index;
  size_t offset = v.size() - t.shape().size();
  for (size_t d = 0; d < t.shape().size(); ++d) {
    index.push_back(t.shape()[d] == 1 ? index_const(0) : Expr(v[offset + d]));
  }
  return index;
}

}  // namespace

Tensor broadcast_binary(const Tensor& a, const Tensor& b,
                        const std::function<Expr(const Expr&, const Expr&)>& f, std::string name,
                        nlohmann::json attrs) {
  check_defined(a, name, "the first operand");
  check_defined(b, name, "the second operand");
  check_same_dtype(a, b, name);
  std::vector<int64_t> shape;
  try {
    shape = broadcast_shape(a.shape(), b.shape());
  } catch (const UserError& e) {
    fail(e.kind(), name, ": ", e.what());
  }
  auto body = [&](const Tensor& x, const Tensor& y) {
    return [&, x, y](const std::vector<Var>& v) {
      return f(widen(x(broadcast_index(x, v))), widen(y(broadcast_index(y, v))));
    };
  };
  // Arithmetic on a rounded sum works on the sum and rounds once, and a
  // comparison compares the sum: ONNX Runtime runs float16 Add, Less, ...
  // in float32 on x86.
  Tensor wa = wide_source(a), wb = wide_source(b);
  if (!wa.same_as(a) || !wb.same_as(b)) {
    const DataType wide = accumulation_type(a.dtype());
    const DataType result = f(ir::make_const(wide, 1), ir::make_const(wide, 1)).dtype();
    if (result.is_bool()) {
      return compute(shape, body(wa, wb), std::move(name), "broadcast", std::move(attrs));
    }
    if (result == wide) {
      return narrow(
          compute(shape, body(wa, wb), accumulator_name(name, a.dtype()), "broadcast", attrs),
          a.dtype(), std::move(name));
    }
  }
  return compute(
      shape,
      [&](const std::vector<Var>& v) {
        return f(a(broadcast_index(a, v)), b(broadcast_index(b, v)));
      },
      std::move(name), "broadcast", std::move(attrs));
}

Tensor add(const Tensor& a, const Tensor& b) {
  return broadcast_binary(
      a, b, [](const Expr& x, const Expr& y) { return x + y; }, "add");
}
Tensor subtract(const Tensor& a, const Tensor& b) {
  return broadcast_binary(
      a, b, [](const Expr& x, const Expr& y) { return x - y; }, "subtract");
}
Tensor multiply(const Tensor& a, const Tensor& b) {
  return broadcast_binary(
      a, b, [](const Expr& x, const Expr& y) { return x * y; }, "multiply");
}
Tensor divide(const Tensor& a, const Tensor& b) {
  return broadcast_binary(
      a, b, [](const Expr& x, const Expr& y) { return x / y; }, "divide");
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  return broadcast_binary(
      a, b, [](const Expr& x, const Expr& y) { return ir::max(x, y); }, "maximum");
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return broadcast_binary(
      a, b, [](const Expr& x, const Expr& y) { return ir::min(x, y); }, "minimum");
}
namespace {

void check_bool(const Tensor& t, std::string_view op, std::string_view what) {
  check_defined(t, op, what);
  if (!t.dtype().is_bool()) {
    fail(ErrorKind::kTypeMismatch, op, ": ", what, " is ", t.dtype().str(), ", not bool");
  }
}

Tensor logic(const Tensor& a, const Tensor& b, const char* name, ir::LogicalOp op) {
  check_bool(a, name, "the first operand");
  check_bool(b, name, "the second operand");
  return broadcast_binary(
      a, b, [op](const Expr& x, const Expr& y) { return ir::logical(op, x, y); }, name);
}

}  // namespace

Tensor equal(const Tensor& a, const Tensor& b) {
  return broadcast_binary(
      a, b, [](const Expr& x, const Expr& y) { return x == y; }, "equal");
}
Tensor greater(const Tensor& a, const Tensor& b) {
  return broadcast_binary(
      a, b, [](const Expr& x, const Expr& y) { return x > y; }, "greater");
}
Tensor greater_equal(const Tensor& a, const Tensor& b) {
  return broadcast_binary(
      a, b, [](const Expr& x, const Expr& y) { return x >= y; }, "greater_equal");
}
Tensor less(const Tensor& a, const Tensor& b) {
  return broadcast_binary(
      a, b, [](const Expr& x, const Expr& y) { return x < y; }, "less");
}
Tensor less_equal(const Tensor& a, const Tensor& b) {
  return broadcast_binary(
      a, b, [](const Expr& x, const Expr& y) { return x <= y; }, "less_equal");
}

Tensor logical_and(const Tensor& a, const Tensor& b) {
  return logic(a, b, "logical_and", ir::LogicalOp::kAnd);
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return logic(a, b, "logical_or", ir::LogicalOp::kOr);
}
Tensor logical_xor(const Tensor& a, const Tensor& b) {
  // On bools, xor is inequality.
  check_bool(a, "logical_xor", "the first operand");
  check_bool(b, "logical_xor", "the second operand");
  return broadcast_binary(
      a, b, [](const Expr& x, const Expr& y) { return x != y; }, "logical_xor");
}
Tensor logical_not(const Tensor& x) {
  check_bool(x, "logical_not", "the operand");
  return elemwise(
      x, [](const Expr& e) { return ir::logical_not(e); }, "logical_not");
}

Tensor where(const Tensor& condition, const Tensor& x, const Tensor& y) {
  check_bool(condition, "where", "the condition");
  check_defined(x, "where", "the second operand");
  check_defined(y, "where", "the third operand");
  check_same_dtype(x, y, "where");
  std::vector<int64_t> shape;
  try {
    shape = broadcast_shape(broadcast_shape(condition.shape(), x.shape()), y.shape());
  } catch (const UserError& e) {
    fail(e.kind(), "where: ", e.what());
  }
  return compute(
      shape,
      [&](const std::vector<Var>& v) {
        return ir::select(condition(broadcast_index(condition, v)), x(broadcast_index(x, v)),
                          y(broadcast_index(y, v)));
      },
      "where", "broadcast");
}

Tensor expand(const Tensor& x, const std::vector<int64_t>& shape) {
  check_defined(x, "expand", "the operand");
  std::vector<int64_t> out;
  try {
    out = broadcast_shape(x.shape(), shape);
  } catch (const UserError& e) {
    fail(e.kind(), "expand: ", e.what());
  }
  return compute(
      out, [&](const std::vector<Var>& v) { return x(broadcast_index(x, v)); }, "expand",
      "broadcast");
}

Tensor power(const Tensor& a, const Tensor& b) {
  check_defined(a, "power", "the first operand");
  check_float(a, "power");
  return broadcast_binary(
      a, b, [](const Expr& x, const Expr& y) { return ir::pow(x, y); }, "power");
}

namespace {

/// `f(x, d)` with a divisor `d` that is never 0 (an integer division by 0
/// would stop the process), and 0 where `y` is 0.
Expr guarded_remainder(const Expr& x, const Expr& y, Expr (*f)(Expr, Expr)) {
  Expr zero = value_const(y.dtype(), 0);
  Expr is_zero = y == zero;
  return ir::select(is_zero, zero, f(x, ir::select(is_zero, value_const(y.dtype(), 1), y)));
}

}  // namespace

Tensor floor_mod(const Tensor& a, const Tensor& b) {
  check_defined(a, "floor_mod", "the first operand");
  TT_CHECK(a.dtype().is_integer(), kTypeMismatch, "floor_mod: operand '", a.name(), "' is ",
           a.dtype().str(), "; integers only (floats take trunc_mod, ONNX's fmod = 1)");
  return broadcast_binary(
      a, b, [](const Expr& x, const Expr& y) { return guarded_remainder(x, y, ir::floormod); },
      "floor_mod");
}

Tensor trunc_mod(const Tensor& a, const Tensor& b) {
  check_defined(a, "trunc_mod", "the first operand");
  if (a.dtype().is_float()) {
    return broadcast_binary(
        a, b,
        [](const Expr& x, const Expr& y) {
          return x - ir::call(ir::Intrinsic::kTrunc, {x / y}) * y;
        },
        "trunc_mod");
  }
  return broadcast_binary(
      a, b,
      [](const Expr& x, const Expr& y) {
        return guarded_remainder(x, y, [](Expr p, Expr q) { return p % q; });
      },
      "trunc_mod");
}

Tensor bias_add(const Tensor& data, const Tensor& bias, int axis) {
  check_defined(data, "bias_add", "data");
  check_rank(bias, 1, "bias_add", "bias");
  check_same_dtype(data, bias, "bias_add");
  int ax = static_cast<int>(normalize_axis(axis, data.ndim(), "bias_add"));
  if (bias.shape()[0] != data.shape()[ax]) {
    fail(ErrorKind::kInvalidArgument, "bias_add: bias ", shape_text(bias.shape()),
         " does not match dimension ", ax, " of data ", shape_text(data.shape()));
  }
  nlohmann::json attrs = {{"op", "bias_add"}, {"axis", ax}};
  // A bias on a rounded sum is added to the sum, which is rounded once.
  if (Tensor wide = wide_source(data); !wide.same_as(data)) {
    Tensor out = compute(
        data.shape(),
        [&](const std::vector<Var>& v) { return wide(as_exprs(v)) + widen(bias(v[ax])); },
        accumulator_name("bias_add", data.dtype()), "broadcast", attrs);
    return narrow(out, data.dtype(), "bias_add");
  }
  return compute(
      data.shape(), [&](const std::vector<Var>& v) { return data(as_exprs(v)) + bias(v[ax]); },
      "bias_add", "broadcast", std::move(attrs));
}

// ---- normalisation --------------------------------------------------------------

namespace {

// `v` without dimension `axis`: the index of a reduced-over-`axis` tensor.
std::vector<Expr> drop_axis(const std::vector<Var>& v, int axis) {
  std::vector<Expr> out;
  for (size_t d = 0; d < v.size(); ++d) {
    if (static_cast<int>(d) != axis) out.push_back(v[d]);
  }
  return out;
}

// `v` with `at` inserted as dimension `axis`.
std::vector<Expr> insert_axis(const std::vector<Var>& v, int axis, const Expr& at) {
  std::vector<Expr> out = as_exprs(v);
  out.insert(out.begin() + axis, at);
  return out;
}

std::vector<int64_t> without(const std::vector<int64_t>& shape, int axis) {
  std::vector<int64_t> out = shape;
  out.erase(out.begin() + axis);
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x, int axis, std::string name) {
  check_defined(x, "softmax", "the operand");
  check_float(x, "softmax");
  int ax = static_cast<int>(normalize_axis(axis, x.ndim(), "softmax"));
  std::vector<int64_t> reduced = without(x.shape(), ax);
  auto attrs = [&](const char* stage) { return nlohmann::json{{"axis", ax}, {"stage", stage}}; };
  IterVar k1 = reduce_axis(x.shape()[ax], "k");
  const Tensor wx = wide_source(x);
  Tensor mx = compute(
      reduced,
      [&](const std::vector<Var>& v) { return max(wx(insert_axis(v, ax, k1.expr())), {k1}); },
      name + "_max", "softmax", attrs("max"));
  Tensor e = compute(
      x.shape(),
      [&](const std::vector<Var>& v) {
        return ir::exp(widen(wx(as_exprs(v))) - widen(mx(drop_axis(v, ax))));
      },
      name + "_exp", "softmax", attrs("exp"));
  IterVar k2 = reduce_axis(x.shape()[ax], "k");
  Tensor total = compute(
      reduced,
      [&](const std::vector<Var>& v) { return sum(e(insert_axis(v, ax, k2.expr())), {k2}); },
      name + "_sum", "softmax", attrs("sum"));
  // One division per row and a multiplication per element, as ONNX Runtime
  // normalises: a vector division costs several multiplications.
  Expr one = value_const(total.dtype(), 1.0);
  return compute(
      x.shape(),
      [&](const std::vector<Var>& v) {
        return as_type(e(as_exprs(v)) * (one / total(drop_axis(v, ax))), x.dtype());
      },
      std::move(name), "softmax", attrs("norm"));
}

Tensor log_softmax(const Tensor& x, int axis, std::string name) {
  check_defined(x, "log_softmax", "the operand");
  check_float(x, "log_softmax");
  int ax = static_cast<int>(normalize_axis(axis, x.ndim(), "log_softmax"));
  std::vector<int64_t> reduced = without(x.shape(), ax);
  auto attrs = [&](const char* stage) { return nlohmann::json{{"axis", ax}, {"stage", stage}}; };
  IterVar k1 = reduce_axis(x.shape()[ax], "k");
  Tensor mx = compute(
      reduced,
      [&](const std::vector<Var>& v) { return max(x(insert_axis(v, ax, k1.expr())), {k1}); },
      name + "_max", "log_softmax", attrs("max"));
  IterVar k2 = reduce_axis(x.shape()[ax], "k");
  Tensor total = compute(
      reduced,
      [&](const std::vector<Var>& v) {
        return sum(widen(ir::exp(x(insert_axis(v, ax, k2.expr())) - mx(as_exprs(v)))), {k2});
      },
      name + "_sum", "log_softmax", attrs("sum"));
  return compute(
      x.shape(),
      [&](const std::vector<Var>& v) {
        std::vector<Expr> outer = drop_axis(v, ax);
        Expr shifted = widen(x(as_exprs(v)) - mx(outer));
        return as_type(shifted - ir::log(total(outer)), x.dtype());
      },
      std::move(name), "log_softmax", attrs("norm"));
}

Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double epsilon,
                  std::string name) {
  const char* op = "layer_norm";
  check_defined(x, op, "the operand");
  check_float(x, op);
  TT_CHECK(x.ndim() >= 1, kInvalidArgument, "layer_norm: the operand must have a dimension");
  int last = x.ndim() - 1;
  int64_t d = x.shape()[last];
  for (const auto& [t, what] : {std::pair{gamma, "gamma"}, std::pair{beta, "beta"}}) {
    if (!t) continue;
    check_rank(t, 1, op, what);
    check_same_dtype(x, t, op);
    if (t.shape()[0] != d) {
      fail(ErrorKind::kInvalidArgument, "layer_norm: ", what, " ", shape_text(t.shape()),
           " must have the extent of the normalised axis (", d, ")");
    }
  }
  // The sums, and the arithmetic on them, are in the accumulation type.
  DataType t = accumulation_type(x.dtype());
  std::vector<int64_t> outer = without(x.shape(), last);
  auto attrs = [&](const char* stage) {
    return nlohmann::json{{"axis", last}, {"epsilon", json_number(epsilon)}, {"stage", stage}};
  };
  Expr inv_d = value_const(t, 1.0 / static_cast<double>(d));
  const Tensor wx = wide_source(x);
  IterVar k1 = reduce_axis(d, "k");
  Tensor total = compute(
      outer,
      [&](const std::vector<Var>& v) {
        return sum(widen(wx(insert_axis(v, last, k1.expr()))), {k1});
      },
      name + "_sum", op, attrs("sum"));
  IterVar k2 = reduce_axis(d, "k");
  Tensor squares = compute(
      outer,
      [&](const std::vector<Var>& v) {
        Expr dev = widen(wx(insert_axis(v, last, k2.expr()))) - total(as_exprs(v)) * inv_d;
        return sum(dev * dev, {k2});
      },
      name + "_var_sum", op, attrs("var_sum"));
  return compute(
      x.shape(),
      [&](const std::vector<Var>& v) {
        std::vector<Expr> o = drop_axis(v, last);
        Expr mean = total(o) * inv_d;
        Expr inv_std = ir::rsqrt(squares(o) * inv_d + value_const(t, epsilon));
        Expr out = (widen(wx(as_exprs(v))) - mean) * inv_std;
        if (gamma) out = out * widen(gamma(v[last]));
        if (beta) out = out + widen(beta(v[last]));
        return as_type(out, x.dtype());
      },
      std::move(name), op, attrs("norm"));
}

Tensor batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const Tensor& moving_mean, const Tensor& moving_var, int axis,
                            double epsilon, std::string name) {
  const char* op = "batch_norm_inference";
  check_defined(x, op, "the operand");
  check_float(x, op);
  int ax = static_cast<int>(normalize_axis(axis, x.ndim(), op));
  int64_t c = x.shape()[ax];
  for (const auto& [t, what] :
       {std::pair{gamma, "gamma"}, std::pair{beta, "beta"}, std::pair{moving_mean, "moving_mean"},
        std::pair{moving_var, "moving_var"}}) {
    check_rank(t, 1, op, what);
    check_same_dtype(x, t, op);
    if (t.shape()[0] != c) {
      fail(ErrorKind::kInvalidArgument, op, ": ", what, " ", shape_text(t.shape()),
           " must have the extent of axis ", ax, " (", c, ")");
    }
  }
  DataType t = x.dtype();
  return compute(x.shape(),
                 [&](const std::vector<Var>& v) {
                   Expr ch = v[ax];
                   Expr inv_std = ir::rsqrt(moving_var(ch) + value_const(t, epsilon));
                   return (x(as_exprs(v)) - moving_mean(ch)) * inv_std * gamma(ch) + beta(ch);
                 },
                 std::move(name), "batch_norm", {{"axis", ax}, {"epsilon", json_number(epsilon)}});
}

}  // namespace tensortune::te
