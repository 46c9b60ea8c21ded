#include "tensortune/ir/simplify.h"

#include <limits>

#include "tensortune/ir/expr_functor.h"
#include "tensortune/ir/scalar_semantics.h"
#include "tensortune/object/structural.h"

namespace tensortune::ir {
namespace {

// ---- small matchers used by the rule table ----

bool is_const(const Expr& e) { return as_const_float(e).has_value(); }

/// Whether a constant's value is exactly the double as_const_float gives: an
/// integer beyond 2^53 is not, and a uint64 at or above 2^63 (held
/// negative) would fold with the wrong sign. Such a cast is left for run
/// time.
bool folds_through_double(const Expr& e) {
  if (e->kind() != ExprKind::kIntImm) return true;
  const int64_t v = static_cast<const IntImmNode&>(*e).value;
  if (e.dtype().is_uint() && e.dtype().bits() == 64 && v < 0) return false;
  constexpr int64_t kExact = int64_t{1} << 53;
  return v >= -kExact && v <= kExact;
}
bool is_int_const(const Expr& e, int64_t v) {
  auto c = as_const_int(e);
  return c && *c == v;
}
bool is_value(const Expr& e, double v) {
  auto c = as_const_float(e);
  return c && *c == v;
}
const BinaryNode* as_binary(const Expr& e, BinaryOp op) {
  if (!e || e->kind() != ExprKind::kBinary) return nullptr;
  auto* b = static_cast<const BinaryNode*>(e.get());
  return b->op == op ? b : nullptr;
}
// Distinct variables may share a name in lowered code: compare them by identity.
bool same(const Expr& a, const Expr& b) {
  return a.same_as(b) || equal_with_free_vars_by_identity(a, b);
}

// ---- affine sums: integer +, - and *constant over opaque terms ----

// A flattened integer sum: constant + sum of coefficient * term. Coefficients
// are kept modulo 2^64 (unsigned), which is exact for every integer type
// because wrap-around arithmetic is a ring: rearranging a sum never changes
// its value.
struct AffineSum {
  uint64_t constant = 0;
  std::vector<std::pair<Expr, uint64_t>> terms;

  void add_term(const Expr& t, uint64_t coeff) {
    for (auto& [term, c] : terms) {
      if (same(term, t)) {
        c += coeff;
        return;
      }
    }
    terms.emplace_back(t, coeff);
  }
  void flatten(const Expr& e, uint64_t scale) {
    if (auto c = as_const_int(e)) {
      constant += static_cast<uint64_t>(*c) * scale;
      return;
    }
    if (const BinaryNode* b = as_binary(e, BinaryOp::kAdd)) {
      flatten(b->a, scale);
      flatten(b->b, scale);
    } else if (const BinaryNode* s = as_binary(e, BinaryOp::kSub)) {
      flatten(s->a, scale);
      flatten(s->b, -scale);
    } else if (const BinaryNode* m = as_binary(e, BinaryOp::kMul); m && as_const_int(m->b)) {
      flatten(m->a, scale * static_cast<uint64_t>(*as_const_int(m->b)));
    } else {
      add_term(e, scale);
    }
  }
};

// Rebuilds a flattened sum in canonical form: the terms with a positive
// coefficient in order of first appearance, then those with a negative one
// subtracted, then the constant (last, where the other rules expect it). With
// no positive term the constant comes first (0 - x). Signs are read in the
// type's width as signed, so an unsigned x - y stays a subtraction.
Expr build_sum(const AffineSum& sum, DataType t) {
  DataType signed_type = DataType::int_(t.bits());
  auto signed_value = [&](uint64_t v) { return wrap_to_int(signed_type, static_cast<int64_t>(v)); };
  auto constant = [&](uint64_t v) { return int_imm(wrap_to_int(t, static_cast<int64_t>(v)), t); };
  auto scaled = [&](const Expr& term, uint64_t coeff) {
    return signed_value(coeff) == 1 ? term : binary(BinaryOp::kMul, term, constant(coeff));
  };
  Expr out;
  for (const auto& [term, coeff] : sum.terms) {
    if (signed_value(coeff) <= 0) continue;
    out = out ? binary(BinaryOp::kAdd, out, scaled(term, coeff)) : scaled(term, coeff);
  }
  bool constant_placed = !out;
  if (!out) out = constant(sum.constant);
  for (const auto& [term, coeff] : sum.terms) {
    if (signed_value(coeff) < 0) out = binary(BinaryOp::kSub, out, scaled(term, -coeff));
  }
  int64_t c = signed_value(sum.constant);
  if (constant_placed || c == 0) return out;
  bool subtract = c < 0 && c != std::numeric_limits<int64_t>::min();
  return subtract ? binary(BinaryOp::kSub, out, constant(-sum.constant))
                  : binary(BinaryOp::kAdd, out, constant(sum.constant));
}

// ---- binary rules: each sees simplified operands; returns null if it does not apply ----

struct BinaryRule {
  const char* name;
  Expr (*apply)(BinaryOp op, const Expr& a, const Expr& b);
};

Expr fold_binary(BinaryOp op, const Expr& a, const Expr& b) {
  if (!is_const(a) || !is_const(b)) return Expr();
  DataType t = a.dtype();
  if (t.is_float()) return float_imm(apply_float(op, t, *as_const_float(a), *as_const_float(b)), t);
  auto r = apply_int(op, t, *as_const_int(a), *as_const_int(b));
  return r ? int_imm(*r, t) : Expr();  // division by zero stays for run time to report
}

bool commutative(BinaryOp op) {
  return op == BinaryOp::kAdd || op == BinaryOp::kMul || op == BinaryOp::kMin ||
         op == BinaryOp::kMax;
}

const BinaryRule kBinaryRules[] = {
    {"fold-constants", fold_binary},
    {"constant-to-the-right",
     [](BinaryOp op, const Expr& a, const Expr& b) {
       return commutative(op) && is_const(a) && !is_const(b) ? binary(op, b, a) : Expr();
     }},
    {"x+0",
     [](BinaryOp op, const Expr& a, const Expr& b) {
       return (op == BinaryOp::kAdd || op == BinaryOp::kSub) && is_value(b, 0) ? a : Expr();
     }},
    {"x*1",
     [](BinaryOp op, const Expr& a, const Expr& b) {
       bool div = op == BinaryOp::kDiv || op == BinaryOp::kFloorDiv;
       return (op == BinaryOp::kMul || (div && a.dtype().is_integer())) && is_value(b, 1) ? a
                                                                                          : Expr();
     }},
    {"x*0",
     [](BinaryOp op, const Expr& a, const Expr& b) {
       // Integers only: for floats, inf*0 and nan*0 are nan.
       return op == BinaryOp::kMul && a.dtype().is_integer() && is_int_const(b, 0) ? b : Expr();
     }},
    {"x%1",
     [](BinaryOp op, const Expr& a, const Expr& b) {
       bool mod = op == BinaryOp::kMod || op == BinaryOp::kFloorMod;
       return mod && is_int_const(b, 1) ? make_const(a.dtype(), 0) : Expr();
     }},
    {"x-x",
     [](BinaryOp op, const Expr& a, const Expr& b) {
       return op == BinaryOp::kSub && a.dtype().is_integer() && same(a, b)
                  ? make_const(a.dtype(), 0)
                  : Expr();
     }},
    {"min(x,x)",
     [](BinaryOp op, const Expr& a, const Expr& b) {
       return (op == BinaryOp::kMin || op == BinaryOp::kMax) && same(a, b) ? a : Expr();
     }},
    {"(x+c1)+c2",
     [](BinaryOp op, const Expr& a, const Expr& b) {
       auto* inner = as_binary(a, BinaryOp::kAdd);
       if (op != BinaryOp::kAdd || !a.dtype().is_integer() || !inner || !is_const(inner->b) ||
           !is_const(b)) {
         return Expr();
       }
       return binary(BinaryOp::kAdd, inner->a, fold_binary(BinaryOp::kAdd, inner->b, b));
     }},
    {"(x*c1)*c2",
     [](BinaryOp op, const Expr& a, const Expr& b) {
       auto* inner = as_binary(a, BinaryOp::kMul);
       if (op != BinaryOp::kMul || !a.dtype().is_integer() || !inner || !is_const(inner->b) ||
           !is_const(b)) {
         return Expr();
       }
       return binary(BinaryOp::kMul, inner->a, fold_binary(BinaryOp::kMul, inner->b, b));
     }},
    {"floordiv(x*c1,c2)",
     [](BinaryOp op, const Expr& a, const Expr& b) {
       auto* inner = as_binary(a, BinaryOp::kMul);
       auto c2 = as_const_int(b);
       if (op != BinaryOp::kFloorDiv || !inner || !c2 || *c2 <= 0) return Expr();
       auto c1 = as_const_int(inner->b);
       if (!c1 || *c1 % *c2 != 0) return Expr();
       return binary(BinaryOp::kMul, inner->a,
                     make_const(a.dtype(), static_cast<double>(*c1 / *c2)));
     }},
    {"floormod(x*c1,c2)",
     [](BinaryOp op, const Expr& a, const Expr& b) {
       auto* inner = as_binary(a, BinaryOp::kMul);
       auto c2 = as_const_int(b);
       if (op != BinaryOp::kFloorMod || !inner || !c2 || *c2 <= 0) return Expr();
       auto c1 = as_const_int(inner->b);
       return c1 && *c1 % *c2 == 0 ? make_const(a.dtype(), 0) : Expr();
     }},
    {"floormod(floormod(x,c),c)",
     [](BinaryOp op, const Expr& a, const Expr& b) {
       auto* inner = as_binary(a, BinaryOp::kFloorMod);
       auto c = as_const_int(b);
       return op == BinaryOp::kFloorMod && inner && c && *c > 0 && is_int_const(inner->b, *c)
                  ? a
                  : Expr();
     }},
    {"affine-sum",
     [](BinaryOp op, const Expr& a, const Expr& b) {
       // Brings a scalar integer sum to canonical form (build_sum): like terms
       // and constants merge, so that (x*8 + 3) - x*8 folds to 3, and equal
       // sums written differently, such as (i*4 + 1)*512 + j and i*2048 + j +
       // 512, become the same expression (which lets the C compiler see that
       // two addresses differ by a constant). A sum already in canonical form
       // is left as is.
       if ((op != BinaryOp::kAdd && op != BinaryOp::kSub) || !a.dtype().is_integer() ||
           !a.dtype().is_scalar()) {
         return Expr();
       }
       AffineSum sum;
       sum.flatten(a, 1);
       sum.flatten(b, op == BinaryOp::kAdd ? 1 : static_cast<uint64_t>(-1));
       Expr built = build_sum(sum, a.dtype());
       const BinaryNode* same_shape = as_binary(built, op);
       if (same_shape && same(same_shape->a, a) && same(same_shape->b, b)) return Expr();
       return built;
     }},
};

class Simplifier final : public ExprMutator {
 protected:
  using ExprMutator::rewrite;

  Expr rewrite(const BinaryNode& n, const Expr& self) override {
    Expr a = mutate(n.a), b = mutate(n.b);
    BinaryOp op = n.op;
    // Apply rules until none fires; each firing shrinks the expression or
    // moves a constant right, so this terminates quickly.
    for (int round = 0; round < 16; ++round) {
      Expr result;
      for (const auto& rule : kBinaryRules) {
        result = rule.apply(op, a, b);
        if (result) break;
      }
      if (!result) break;
      if (result->kind() != ExprKind::kBinary) return result;
      const auto& rb = static_cast<const BinaryNode&>(*result);
      if (rb.op == op && rb.a.same_as(a) && rb.b.same_as(b)) break;
      op = rb.op;
      a = rb.a;
      b = rb.b;
    }
    if (op == n.op && a.same_as(n.a) && b.same_as(n.b)) return self;
    return binary(op, a, b);
  }

  Expr rewrite(const CompareNode& n, const Expr& self) override {
    Expr a = mutate(n.a), b = mutate(n.b);
    if (is_const(a) && is_const(b)) {
      return make_const(n.dtype,
                        apply_compare(n.op, a.dtype(), *as_const_float(a), *as_const_float(b)));
    }
    if (a.dtype().is_integer() && same(a, b)) {
      bool reflexive = n.op == CompareOp::kEQ || n.op == CompareOp::kLE || n.op == CompareOp::kGE;
      return make_const(n.dtype, reflexive);
    }
    if (a.same_as(n.a) && b.same_as(n.b)) return self;
    return compare(n.op, a, b);
  }

  Expr rewrite(const LogicalNode& n, const Expr& self) override {
    Expr a = mutate(n.a), b = mutate(n.b);
    bool is_and = n.op == LogicalOp::kAnd;
    // Identity element: true for &&, false for ||; the absorbing one the opposite.
    for (auto [x, y] : {std::pair{a, b}, std::pair{b, a}}) {
      if (auto c = as_const_int(x)) return (*c != 0) == is_and ? y : x;
    }
    if (same(a, b)) return a;
    if (a.same_as(n.a) && b.same_as(n.b)) return self;
    return logical(n.op, a, b);
  }

  Expr rewrite(const NotNode& n, const Expr& self) override {
    Expr a = mutate(n.a);
    if (auto c = as_const_int(a)) return make_const(n.dtype, *c == 0);
    if (a->kind() == ExprKind::kNot) return static_cast<const NotNode&>(*a).a;
    if (a.same_as(n.a)) return self;
    return logical_not(a);
  }

  Expr rewrite(const SelectNode& n, const Expr& self) override {
    Expr c = mutate(n.condition), t = mutate(n.true_value), f = mutate(n.false_value);
    if (auto k = as_const_int(c)) return *k ? t : f;
    // A condition that does not vary across the lanes (an unrolled loop's
    // row of a Winograd transform).
    if (c->kind() == ExprKind::kBroadcast) {
      if (auto k = as_const_int(static_cast<const BroadcastNode&>(*c).value)) return *k ? t : f;
    }
    if (same(t, f)) return t;
    if (c.same_as(n.condition) && t.same_as(n.true_value) && f.same_as(n.false_value)) return self;
    return select(c, t, f);
  }

  Expr rewrite(const CastNode& n, const Expr& self) override {
    Expr v = mutate(n.value);
    if (v.dtype() == n.dtype) return v;
    if (auto c = as_const_float(v); c && folds_through_double(v))
      return make_const(n.dtype, convert_scalar(v.dtype(), n.dtype, *c));
    if (v.same_as(n.value)) return self;
    return cast(n.dtype, v);
  }

  Expr rewrite(const CallNode& n, const Expr& self) override {
    std::vector<Expr> args;
    bool changed = mutate_all(n.args, &args);
    bool all_const = true;
    for (const auto& a : args) all_const &= is_const(a);
    if (all_const) {
      if (n.op == Intrinsic::kDot4U8S8) {
        return make_const(n.dtype, dot4_u8s8(static_cast<int32_t>(*as_const_float(args[0])),
                                             static_cast<int32_t>(*as_const_float(args[1]))));
      }
      double y = args.size() > 1 ? *as_const_float(args[1]) : 0;
      return float_imm(apply_intrinsic(n.op, n.dtype, *as_const_float(args[0]), y), n.dtype);
    }
    return changed ? call(n.op, std::move(args)) : self;
  }
};

}  // namespace

Expr simplify(const Expr& e) {
  Simplifier s;
  return s.mutate(e);
}

std::vector<std::string> simplify_rule_names() {
  std::vector<std::string> names;
  for (const auto& rule : kBinaryRules) names.emplace_back(rule.name);
  return names;
}

}  // namespace tensortune::ir
