#include "tensortune/ir/scalar_semantics.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>

namespace tensortune::ir {
namespace {

// bfloat16 is the top half of a float32: round the low half away, nearest-even.
// One rounding from double: through float by nearest-even would round
// twice (1 + 2^-8 + 2^-40 would become the tie 1 + 2^-8, then 1). Rounded
// to odd instead (truncated, the last bit set when inexact), float keeps
// what bfloat16's nearest-even needs, 16 bits further down.
double round_bfloat16(double value) {
  if (std::isnan(value)) return value;
  float f = static_cast<float>(value);
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if (static_cast<double>(f) != value) {
    if (std::fabs(static_cast<double>(f)) > std::fabs(value)) bits -= 1;  // toward zero
    bits |= 1;
  }
  uint32_t lsb = (bits >> 16) & 1;
  bits += 0x7fff + lsb;
  bits &= 0xffff0000u;
  std::memcpy(&f, &bits, sizeof bits);
  return f;
}

double round_float16(double value) {
  if (std::isnan(value) || std::isinf(value) || value == 0) return value;
  double mag = std::fabs(value);
  if (mag >= 65520.0) return std::copysign(INFINITY, value);
  int exp;
  std::frexp(mag, &exp);  // mag = m * 2^exp, m in [0.5, 1)
  // float16 has 11 significant bits for normals; subnormals have a fixed
  // quantum of 2^-24.
  int e = std::max(exp - 11, -24);
  double quantum = std::ldexp(1.0, e);
  double rounded = std::nearbyint(mag / quantum) * quantum;  // nearest-even by default
  return std::copysign(rounded, value);
}

}  // namespace

double round_to_float(DataType dtype, double value) {
  if (dtype.code() == DataType::Code::kBFloat) return round_bfloat16(value);
  switch (dtype.bits()) {
    case 16: return round_float16(value);
    case 32: return static_cast<float>(value);
    default: return value;
  }
}

int64_t wrap_to_int(DataType dtype, int64_t value) {
  if (dtype.is_bool()) return value != 0;
  int bits = dtype.bits();
  if (bits >= 64) return value;
  uint64_t mask = (uint64_t{1} << bits) - 1;
  uint64_t u = static_cast<uint64_t>(value) & mask;
  if (dtype.is_int() && (u >> (bits - 1))) u |= ~mask;  // sign-extend
  return static_cast<int64_t>(u);
}

double convert_scalar(DataType from, DataType to, double value) {
  if (to.is_float()) return round_to_float(to, value);
  if (to.is_bool()) return value != 0;
  if (std::isnan(value)) return static_cast<double>(std::numeric_limits<int64_t>::min());
  double t = std::trunc(value);
  if (t >= 9.2233720368547758e18 || t < -9.2233720368547758e18) {
    return static_cast<double>(wrap_to_int(to, std::numeric_limits<int64_t>::min()));
  }
  return static_cast<double>(wrap_to_int(to, static_cast<int64_t>(t)));
}

std::optional<int64_t> apply_int(BinaryOp op, DataType dtype, int64_t a, int64_t b) {
  const bool is_unsigned = dtype.is_uint() || dtype.is_bool();
  uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  int64_t r = 0;
  switch (op) {
    case BinaryOp::kAdd: r = static_cast<int64_t>(ua + ub); break;
    case BinaryOp::kSub: r = static_cast<int64_t>(ua - ub); break;
    case BinaryOp::kMul: r = static_cast<int64_t>(ua * ub); break;
    case BinaryOp::kDiv:
    case BinaryOp::kMod:
    case BinaryOp::kFloorDiv:
    case BinaryOp::kFloorMod: {
      if (b == 0) return std::nullopt;
      if (is_unsigned) {
        bool div = op == BinaryOp::kDiv || op == BinaryOp::kFloorDiv;
        r = static_cast<int64_t>(div ? ua / ub : ua % ub);
        break;
      }
      if (a == std::numeric_limits<int64_t>::min() && b == -1) {
        r = (op == BinaryOp::kDiv || op == BinaryOp::kFloorDiv) ? a : 0;
        break;
      }
      int64_t q = a / b, m = a % b;
      if (op == BinaryOp::kDiv) {
        r = q;
      } else if (op == BinaryOp::kMod) {
        r = m;
      } else {
        bool adjust = m != 0 && ((m < 0) != (b < 0));
        r = op == BinaryOp::kFloorDiv ? (adjust ? q - 1 : q) : (adjust ? m + b : m);
      }
      break;
    }
    case BinaryOp::kMin:
      r = is_unsigned ? static_cast<int64_t>(std::min(ua, ub)) : std::min(a, b);
      break;
    case BinaryOp::kMax:
      r = is_unsigned ? static_cast<int64_t>(std::max(ua, ub)) : std::max(a, b);
      break;
  }
  return wrap_to_int(dtype, r);
}

double apply_float(BinaryOp op, DataType dtype, double a, double b) {
  double r = 0;
  switch (op) {
    case BinaryOp::kAdd: r = a + b; break;
    case BinaryOp::kSub: r = a - b; break;
    case BinaryOp::kMul: r = a * b; break;
    case BinaryOp::kDiv: r = a / b; break;
    case BinaryOp::kMod: r = std::fmod(a, b); break;
    case BinaryOp::kFloorDiv: r = std::floor(a / b); break;
    case BinaryOp::kFloorMod: r = a - std::floor(a / b) * b; break;
    // fmin/fmax return the non-NaN operand, as the generated C code does.
    case BinaryOp::kMin: r = std::fmin(a, b); break;
    case BinaryOp::kMax: r = std::fmax(a, b); break;
  }
  return round_to_float(dtype, r);
}

bool apply_compare(CompareOp op, DataType dtype, double a, double b) {
  switch (op) {
    case CompareOp::kEQ: return a == b;
    case CompareOp::kNE: return a != b;
    case CompareOp::kLT: return a < b;
    case CompareOp::kLE: return a <= b;
    case CompareOp::kGT: return a > b;
    case CompareOp::kGE: return a >= b;
  }
  return false;
}

int32_t dot4_u8s8(int32_t a, int32_t b) {
  const auto ua = static_cast<uint32_t>(a), ub = static_cast<uint32_t>(b);
  int32_t sum = 0;
  for (int k = 0; k < 32; k += 8) {
    sum += static_cast<int32_t>((ua >> k) & 0xffu) *
           static_cast<int8_t>(static_cast<uint8_t>((ub >> k) & 0xffu));
  }
  return sum;
}

double apply_intrinsic(Intrinsic op, DataType dtype, double x, double y) {
  if (op == Intrinsic::kDot4U8S8) {
    return dot4_u8s8(static_cast<int32_t>(x), static_cast<int32_t>(y));
  }
  double r = 0;
  switch (op) {
    case Intrinsic::kExp: r = std::exp(x); break;
    case Intrinsic::kLog: r = std::log(x); break;
    case Intrinsic::kSqrt: r = std::sqrt(x); break;
    case Intrinsic::kRsqrt: r = 1.0 / std::sqrt(x); break;
    case Intrinsic::kTanh: r = std::tanh(x); break;
    case Intrinsic::kErf: r = std::erf(x); break;
    case Intrinsic::kSigmoid: r = 1.0 / (1.0 + std::exp(-x)); break;
    case Intrinsic::kPow: r = std::pow(x, y); break;
    case Intrinsic::kFabs: r = std::fabs(x); break;
    case Intrinsic::kFloor: r = std::floor(x); break;
    case Intrinsic::kCeil: r = std::ceil(x); break;
    case Intrinsic::kRound: r = std::nearbyint(x); break;
    case Intrinsic::kTrunc: r = std::trunc(x); break;
    case Intrinsic::kSin: r = std::sin(x); break;
    case Intrinsic::kCos: r = std::cos(x); break;
    case Intrinsic::kExp2: r = std::exp2(x); break;
    case Intrinsic::kLog2: r = std::log2(x); break;
    case Intrinsic::kAtan: r = std::atan(x); break;
    case Intrinsic::kDot4U8S8: break;  // above
  }
  return round_to_float(dtype, r);
}

}  // namespace tensortune::ir

namespace tensortune::ir {
namespace {

class ScalarEvaluator {
 public:
  ScalarEvaluator(const VarValueFn& var_value, const LoadValueFn& load_value)
      : var_value_(var_value), load_value_(load_value) {}

  double eval(const Expr& e) {
    return dispatch(e, [&](const auto& n) -> double {
      using N = std::decay_t<decltype(n)>;
      if constexpr (std::is_same_v<N, IntImmNode>) {
        return static_cast<double>(wrap_to_int(n.dtype, n.value));
      } else if constexpr (std::is_same_v<N, FloatImmNode>) {
        return round_to_float(n.dtype, n.value);
      } else if constexpr (std::is_same_v<N, VarNode>) {
        auto bound = bound_.find(&n);
        if (bound != bound_.end()) return static_cast<double>(bound->second);
        TT_CHECK(var_value_, kInvalidArgument, "free variable '", n.name, "' has no value");
        return var_value_(n);
      } else if constexpr (std::is_same_v<N, BinaryNode>) {
        double a = eval(n.a), b = eval(n.b);
        if (n.dtype.is_float()) return apply_float(n.op, n.dtype, a, b);
        auto r = apply_int(n.op, n.dtype, static_cast<int64_t>(a), static_cast<int64_t>(b));
        TT_CHECK(r, kRuntime, "integer division by zero in ", to_string(e));
        return static_cast<double>(*r);
      } else if constexpr (std::is_same_v<N, CompareNode>) {
        return apply_compare(n.op, n.a.dtype(), eval(n.a), eval(n.b)) ? 1 : 0;
      } else if constexpr (std::is_same_v<N, LogicalNode>) {
        bool a = eval(n.a) != 0;
        if (n.op == LogicalOp::kAnd && !a) return 0;
        if (n.op == LogicalOp::kOr && a) return 1;
        return eval(n.b) != 0 ? 1 : 0;
      } else if constexpr (std::is_same_v<N, NotNode>) {
        return eval(n.a) != 0 ? 0 : 1;
      } else if constexpr (std::is_same_v<N, SelectNode>) {
        return eval(n.condition) != 0 ? eval(n.true_value) : eval(n.false_value);
      } else if constexpr (std::is_same_v<N, CastNode>) {
        return convert_scalar(n.value.dtype(), n.dtype, eval(n.value));
      } else if constexpr (std::is_same_v<N, CallNode>) {
        double x = eval(n.args[0]);
        double y = n.args.size() > 1 ? eval(n.args[1]) : 0;
        return apply_intrinsic(n.op, n.dtype, x, y);
      } else if constexpr (std::is_same_v<N, ReduceNode>) {
        return eval_reduce(n);
      } else if constexpr (std::is_same_v<N, ProducerLoadNode>) {
        TT_CHECK(load_value_, kInvalidArgument, "read of '", n.producer->name,
                 "' but no producer values were given");
        std::vector<int64_t> index;
        index.reserve(n.indices.size());
        for (const auto& i : n.indices) index.push_back(static_cast<int64_t>(eval(i)));
        return load_value_(*n.producer, index);
      } else {
        static_assert(std::is_same_v<N, BufferLoadNode> || std::is_same_v<N, RampNode> ||
                      std::is_same_v<N, BroadcastNode>);
        fail(ErrorKind::kInvalidArgument, "evaluate_scalar handles tensor expressions, not ",
             n.type_key(), " of lowered code");
      }
    });
  }

 private:
  double eval_reduce(const ReduceNode& n) {
    double acc = eval(n.init ? n.init : reduce_identity(n.op, n.dtype));
    std::vector<int64_t> counter(n.axis.size(), 0);
    for (const auto& iv : n.axis) {
      if (iv->extent == 0) return acc;
    }
    for (size_t i = 0; i < n.axis.size(); ++i) bound_[n.axis[i]->var.get()] = 0;
    while (true) {
      if (!n.condition || eval(n.condition) != 0) {
        double v = eval(n.source);
        acc = combine(n.op, n.dtype, acc, v);
      }
      size_t d = n.axis.size();
      while (d > 0) {
        --d;
        if (++counter[d] < n.axis[d]->extent) break;
        counter[d] = 0;
        if (d == 0) {
          for (const auto& iv : n.axis) bound_.erase(iv->var.get());
          return acc;
        }
      }
      for (size_t i = 0; i < n.axis.size(); ++i) bound_[n.axis[i]->var.get()] = counter[i];
    }
  }

  static double combine(ReduceOp op, DataType dtype, double acc, double v) {
    if (dtype.is_float()) {
      switch (op) {
        case ReduceOp::kSum: return apply_float(BinaryOp::kAdd, dtype, acc, v);
        case ReduceOp::kProd: return apply_float(BinaryOp::kMul, dtype, acc, v);
        case ReduceOp::kMax: return apply_float(BinaryOp::kMax, dtype, acc, v);
        case ReduceOp::kMin: return apply_float(BinaryOp::kMin, dtype, acc, v);
      }
    }
    BinaryOp bop = op == ReduceOp::kSum    ? BinaryOp::kAdd
                   : op == ReduceOp::kProd ? BinaryOp::kMul
                   : op == ReduceOp::kMax  ? BinaryOp::kMax
                                           : BinaryOp::kMin;
    return static_cast<double>(
        *apply_int(bop, dtype, static_cast<int64_t>(acc), static_cast<int64_t>(v)));
  }

  const VarValueFn& var_value_;
  const LoadValueFn& load_value_;
  std::unordered_map<const VarNode*, int64_t> bound_;
};

}  // namespace

double evaluate_scalar(const Expr& e, const VarValueFn& var_value, const LoadValueFn& load_value) {
  ScalarEvaluator ev(var_value, load_value);
  return ev.eval(e);
}

}  // namespace tensortune::ir
