#include "tensortune/ir/arith.h"

#include <vector>

#include "tensortune/ir/expr_functor.h"
#include "tensortune/ir/simplify.h"
#include "tensortune/object/structural.h"

namespace tensortune::ir {
namespace {

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// An affine form: constant + sum of coefficient * term, where terms are
// variables or non-affine sub-expressions compared structurally.
struct Affine {
  int64_t constant = 0;
  std::vector<std::pair<Expr, int64_t>> terms;

  void add_term(const Expr& t, int64_t coeff) {
    for (auto& [term, c] : terms) {
      if (term.same_as(t) || equal_with_free_vars_by_identity(term, t)) {
        c += coeff;
        return;
      }
    }
    terms.emplace_back(t, coeff);
  }
  void add(const Affine& o, int64_t scale) {
    constant += o.constant * scale;
    for (const auto& [t, c] : o.terms) add_term(t, c * scale);
  }
};

Affine affine_of(const Expr& e) {
  Affine out;
  if (auto c = as_const_int(e)) {
    out.constant = *c;
    return out;
  }
  if (e->kind() == ExprKind::kBinary) {
    const auto& b = static_cast<const BinaryNode&>(*e);
    if (b.op == BinaryOp::kAdd || b.op == BinaryOp::kSub) {
      out.add(affine_of(b.a), 1);
      out.add(affine_of(b.b), b.op == BinaryOp::kAdd ? 1 : -1);
      return out;
    }
    if (b.op == BinaryOp::kMul) {
      if (auto c = as_const_int(b.b)) {
        out.add(affine_of(b.a), *c);
        return out;
      }
      if (auto c = as_const_int(b.a)) {
        out.add(affine_of(b.b), *c);
        return out;
      }
    }
  }
  out.add_term(e, 1);
  return out;
}

}  // namespace

std::optional<int64_t> const_difference(const Expr& a, const Expr& b) {
  Affine d = affine_of(a);
  d.add(affine_of(b), -1);
  for (const auto& [t, c] : d.terms) {
    if (c != 0) return std::nullopt;
  }
  return d.constant;
}

bool uses_var(const Expr& e, const VarNode* v) {
  bool found = false;
  visit_pre_order(e, [&](const Expr& x) { found |= x.get() == v; });
  return found;
}

bool uses_only(const Expr& e, const VarRanges& vars) {
  bool ok = true;
  visit_pre_order(e, [&](const Expr& x) {
    if (x->kind() == ExprKind::kVar && !vars.count(static_cast<const VarNode*>(x.get())))
      ok = false;
  });
  return ok;
}

std::optional<IntBound> bound_of(const Expr& e, const VarRanges& ranges) {
  DataType t = e.dtype();
  auto point = [&](Expr v) { return IntBound{std::move(v), 1}; };
  if (as_const_int(e)) return point(e);
  switch (e->kind()) {
    case ExprKind::kVar: {
      auto it = ranges.find(static_cast<const VarNode*>(e.get()));
      if (it == ranges.end()) return point(e);
      return IntBound{make_const(t, 0), std::max<int64_t>(it->second, 1)};
    }
    case ExprKind::kCast: {
      const auto& c = static_cast<const CastNode&>(*e);
      if (!c.dtype.is_integer() || !c.value.dtype().is_integer()) return std::nullopt;
      auto b = bound_of(c.value, ranges);
      if (!b) return std::nullopt;
      return IntBound{cast(t, b->min), b->extent};
    }
    case ExprKind::kBinary: {
      const auto& n = static_cast<const BinaryNode&>(*e);
      auto a = bound_of(n.a, ranges);
      auto b = bound_of(n.b, ranges);
      if (!a || !b) return std::nullopt;
      auto cb = as_const_int(b->min);
      bool b_const = b->extent == 1 && cb.has_value();
      switch (n.op) {
        case BinaryOp::kAdd: return IntBound{simplify(a->min + b->min), a->extent + b->extent - 1};
        case BinaryOp::kSub:
          return IntBound{simplify(a->min - (b->min + make_const(t, b->extent - 1))),
                          a->extent + b->extent - 1};
        case BinaryOp::kMul: {
          auto ca = as_const_int(a->min);
          if (a->extent == 1 && ca && !b_const) std::swap(a, b), std::swap(ca, cb), b_const = true;
          if (!b_const) {
            if (a->extent == 1 && b->extent == 1) return point(e);
            return std::nullopt;
          }
          int64_t c = *cb;
          if (c >= 0) return IntBound{simplify(a->min * b->min), (a->extent - 1) * c + 1};
          return IntBound{simplify((a->min + make_const(t, a->extent - 1)) * b->min),
                          (a->extent - 1) * -c + 1};
        }
        case BinaryOp::kFloorDiv: {
          if (!b_const || *cb <= 0)
            return a->extent == 1 && b->extent == 1 ? std::optional(point(e)) : std::nullopt;
          int64_t c = *cb;
          // A min of symbolic terms that c divides (none: a constant) plus a
          // constant k (a split loop's outer part times the split): the
          // quotient's symbolic part is exact and only k + [0, extent) is
          // divided.
          Affine m = affine_of(a->min);
          bool aligned = true;
          for (const auto& [term, coeff] : m.terms) aligned &= coeff % c == 0;
          if (aligned) {
            int64_t first = floor_div(m.constant, c);
            int64_t last = floor_div(m.constant + a->extent - 1, c);
            Expr q = make_const(t, static_cast<double>(first));
            for (const auto& [term, coeff] : m.terms) {
              q = q + term * make_const(t, static_cast<double>(coeff / c));
            }
            return IntBound{simplify(q), last - first + 1};
          }
          int64_t extent = a->extent == 1 ? 1 : (a->extent - 1) / c + 2;
          return IntBound{simplify(floordiv(a->min, b->min)), extent};
        }
        case BinaryOp::kFloorMod: {
          if (!b_const || *cb <= 0)
            return a->extent == 1 && b->extent == 1 ? std::optional(point(e)) : std::nullopt;
          int64_t c = *cb;
          if (a->extent == 1) return point(simplify(floormod(a->min, b->min)));
          if (auto lo = as_const_int(a->min)) {
            if (floor_div(*lo, c) == floor_div(*lo + a->extent - 1, c)) {
              int64_t m = *lo - floor_div(*lo, c) * c;
              return IntBound{make_const(t, static_cast<double>(m)), a->extent};
            }
          }
          return IntBound{make_const(t, 0), c};
        }
        case BinaryOp::kMin:
        case BinaryOp::kMax: {
          if (a->extent == 1 && b->extent == 1) return point(e);
          auto la = as_const_int(a->min), lb = as_const_int(b->min);
          if (!la || !lb) return std::nullopt;
          int64_t lo = std::min(*la, *lb);
          int64_t hi = std::max(*la + a->extent, *lb + b->extent);
          return IntBound{make_const(t, static_cast<double>(lo)), hi - lo};
        }
        default:
          if (a->extent == 1 && b->extent == 1) return point(e);
          return std::nullopt;
      }
    }
    case ExprKind::kSelect: {
      const auto& s = static_cast<const SelectNode&>(*e);
      auto a = bound_of(s.true_value, ranges), b = bound_of(s.false_value, ranges);
      if (!a || !b) return std::nullopt;
      auto d = const_difference(b->min, a->min);
      if (!d) return std::nullopt;
      Expr lo = *d < 0 ? b->min : a->min;
      int64_t hi = std::max(a->extent, *d + b->extent);
      int64_t lo_off = std::min<int64_t>(0, *d);
      return IntBound{lo, hi - lo_off};
    }
    default: break;
  }
  // Anything else is a point if it uses no varying variable.
  for (const auto& [v, extent] : ranges) {
    if (uses_var(e, v)) return std::nullopt;
  }
  return point(e);
}

}  // namespace tensortune::ir
