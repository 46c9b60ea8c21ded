// The "remove_redundant_conditions" pass: see passes.h.
#include "tensortune/lower/passes.h"

#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "lower/pass_util.h"
#include "tensortune/ir/arith.h"
#include "tensortune/ir/expr_functor.h"
#include "tensortune/ir/simplify.h"

namespace tensortune::lower {
namespace {

using ir::CompareOp;
using ir::ExprKind;

/// Integers whose bounds ir::bound_of gives without wrapping: its sums are
/// simplified in their own type, so an unsigned or narrow difference could
/// wrap around and prove the wrong order.
bool exact_bounds(DataType t) { return t.is_int() && t.bits() >= 32 && t.is_scalar(); }

/// Proves conditions from the ranges of the enclosing loops, narrowed by the
/// branches taken on the way. A loop over [min, min + extent) with constant
/// bounds is described to ir::bound_of, which works with ranges
/// [0, extent), as a fresh variable v' over [0, extent) with
/// loop_var = v' + min.
class ConditionProver {
 public:
  /// Enters a loop; returns false (and records nothing) when its bounds are not constant.
  bool enter_loop(const ForNode& loop) {
    auto min = ir::as_const_int(loop.min), extent = ir::as_const_int(loop.extent);
    if (!min || !extent || *extent <= 0) return false;
    set_range(loop.loop_var.get(), *min, *extent);
    return true;
  }
  void exit_loop(const ForNode& loop) { clear_range(loop.loop_var.get()); }

  /// A loop variable's range narrowed for one branch, and what to restore.
  struct Narrowing {
    const ir::VarNode* var = nullptr;
    int64_t old_min = 0, old_extent = 0;
  };

  /// Narrows the ranges of the loop variables that `cond`'s comparisons
  /// with constants bound, for the branch where `cond` is `holds`: the
  /// conjuncts of a true `&&`, a single comparison either way. A parallel
  /// loop split into whole tiles and a ragged one by a branch
  /// (partition_loops) gets its guards proven in each. Undo with restore(),
  /// last first.
  std::vector<Narrowing> narrow(const Expr& cond, bool holds) {
    std::vector<Narrowing> done;
    narrow_into(cond, holds, done);
    return done;
  }
  void restore(const std::vector<Narrowing>& done) {
    for (auto it = done.rbegin(); it != done.rend(); ++it) {
      clear_range(it->var);
      set_range(it->var, it->old_min, it->old_extent);
    }
  }
  /// The value of a loop variable whose range is one value, else null.
  Expr single_value(const ir::VarNode* var) const {
    auto r = range_of(var);
    if (!r || r->second != 1) return Expr();
    return ir::int_imm(r->first, var->dtype);
  }

  /// True / false when the condition holds / fails for every value of the
  /// enclosing loop variables, nullopt when that is not proven.
  std::optional<bool> prove(const Expr& cond) const {
    if (auto c = ir::as_const_int(cond)) return *c != 0;
    switch (cond->kind()) {
      case ExprKind::kLogical: {
        const auto& n = static_cast<const ir::LogicalNode&>(*cond);
        auto a = prove(n.a), b = prove(n.b);
        bool is_and = n.op == ir::LogicalOp::kAnd;
        // For && a false side decides, for || a true one.
        if ((a && *a != is_and) || (b && *b != is_and)) return !is_and;
        if (a && b) return is_and;
        return std::nullopt;
      }
      case ExprKind::kNot: {
        auto a = prove(static_cast<const ir::NotNode&>(*cond).a);
        if (a) return !*a;
        return std::nullopt;
      }
      case ExprKind::kCompare: return prove_compare(static_cast<const ir::CompareNode&>(*cond));
      default: return std::nullopt;
    }
  }

  /// floordiv / floormod (and / % of non-negative values) of an integer by a
  /// constant c > 0. The dividend is split into its terms that are multiples
  /// of c and the rest; when the loop ranges keep the rest within one
  /// multiple of c, qc + r with r in [0, c), the quotient is the multiples
  /// divided by c plus q and the remainder `rest - q*c`. A fused loop's index
  /// split back apart, and the packed index of a layout-rewritten input
  /// (floormod(j0*96 + j1*16 + j2, 16) is j2 for j2 < 16), are the common
  /// cases; folding them matters most once the loop body is outlined, where
  /// its ranges are lost to the C compiler. nullopt when not proven.
  std::optional<Expr> fold_division(const ir::BinaryNode& n) const {
    using ir::BinaryOp;
    bool floor_op = n.op == BinaryOp::kFloorDiv || n.op == BinaryOp::kFloorMod;
    bool trunc_op = n.op == BinaryOp::kDiv || n.op == BinaryOp::kMod;
    if (!(floor_op || trunc_op) || !exact_bounds(n.a.dtype())) {
      return std::nullopt;
    }
    auto divisor = ir::as_const_int(n.b);
    if (!divisor || *divisor <= 0) return std::nullopt;
    const int64_t c = *divisor;
    std::vector<std::pair<int64_t, Expr>> terms;
    collect_terms(n.a, 1, terms);
    Expr multiples, rest;
    auto add = [&](Expr& sum, int64_t coeff, const Expr& atom) {
      Expr term = !atom        ? ir::int_imm(coeff, n.dtype)
                  : coeff == 1 ? atom
                               : atom * ir::int_imm(coeff, n.dtype);
      sum = sum ? sum + term : term;
    };
    for (const auto& [coeff, atom] : terms) {
      if (coeff % c == 0) {
        add(multiples, coeff / c, atom);
      } else {
        add(rest, coeff, atom);
      }
    }
    if (!rest) rest = ir::int_imm(0, n.dtype);
    auto bound = ir::bound_of(ir::simplify(shifted(rest)), ranges_);
    if (!bound) return std::nullopt;
    auto lo = ir::as_const_int(bound->min);
    if (!lo) return std::nullopt;
    // Truncating division agrees with floor division for a non-negative
    // dividend only: the multiples must be proven non-negative too.
    if (trunc_op) {
      if (*lo < 0) return std::nullopt;
      if (multiples) {
        auto m = ir::bound_of(ir::simplify(shifted(multiples)), ranges_);
        auto m_lo = m ? ir::as_const_int(m->min) : std::nullopt;
        if (!m_lo || *m_lo < 0) return std::nullopt;
      }
    }
    int64_t hi = *lo + bound->extent - 1;
    auto floor_div = [c](int64_t a) { return a / c - (a % c != 0 && a < 0 ? 1 : 0); };
    int64_t q = floor_div(*lo);
    if (floor_div(hi) != q) return std::nullopt;
    if (n.op == BinaryOp::kFloorDiv || n.op == BinaryOp::kDiv) {
      Expr quotient = ir::int_imm(q, n.dtype);
      return ir::simplify(multiples ? multiples + quotient : quotient);
    }
    return ir::simplify(rest - ir::int_imm(q * c, n.dtype));
  }
  /// min(a, b) or max(a, b) of integers as the operand the loop ranges
  /// prove it to be: a padded read's clamp of its column, min(k - 1, 223)
  /// for k over [1, 225), is k - 1. nullopt when not proven.
  std::optional<Expr> fold_min_max(const ir::BinaryNode& n) const {
    using ir::BinaryOp;
    if (n.op != BinaryOp::kMin && n.op != BinaryOp::kMax) return std::nullopt;
    auto range = difference_range(n.a, n.b);
    if (!range) return std::nullopt;
    const auto [lo, hi] = *range;
    if (hi <= 0) return n.op == BinaryOp::kMin ? n.a : n.b;  // a <= b throughout
    if (lo >= 0) return n.op == BinaryOp::kMin ? n.b : n.a;  // a >= b throughout
    return std::nullopt;
  }
  /// `cond` with the parts proven true or false replaced by constants, simplified.
  Expr reduce(const Expr& cond) const {
    if (auto p = prove(cond)) return ir::make_const(cond.dtype(), *p);
    if (cond->kind() == ExprKind::kLogical) {
      const auto& n = static_cast<const ir::LogicalNode&>(*cond);
      Expr a = reduce(n.a), b = reduce(n.b);
      if (a.same_as(n.a) && b.same_as(n.b)) return cond;
      return ir::simplify(ir::logical(n.op, a, b));
    }
    return cond;
  }

 private:
  /// [lo, hi] of a - b over the loop ranges; nullopt when not known.
  std::optional<std::pair<int64_t, int64_t>> difference_range(const Expr& a, const Expr& b) const {
    if (!exact_bounds(a.dtype())) return std::nullopt;
    auto bound = ir::bound_of(ir::simplify(shifted(a) - shifted(b)), ranges_);
    auto lo = bound ? ir::as_const_int(bound->min) : std::nullopt;
    if (!lo) return std::nullopt;
    return std::pair{*lo, *lo + bound->extent - 1};
  }

  std::optional<bool> prove_compare(const ir::CompareNode& n) const {
    auto range = difference_range(n.a, n.b);
    if (!range) return std::nullopt;
    const auto [lo, hi] = *range;
    auto decide = [](bool always, bool never) -> std::optional<bool> {
      if (always) return true;
      if (never) return false;
      return std::nullopt;
    };
    switch (n.op) {
      case CompareOp::kLT: return decide(hi < 0, lo >= 0);
      case CompareOp::kLE: return decide(hi <= 0, lo > 0);
      case CompareOp::kGT: return decide(lo > 0, hi <= 0);
      case CompareOp::kGE: return decide(lo >= 0, hi < 0);
      case CompareOp::kEQ: return decide(lo == 0 && hi == 0, lo > 0 || hi < 0);
      case CompareOp::kNE: return decide(lo > 0 || hi < 0, lo == 0 && hi == 0);
    }
    return std::nullopt;
  }

  /// Appends `e` times `scale` as (coefficient, atom) terms of its sums,
  /// differences and products with constants; a null atom is a constant.
  static void collect_terms(const Expr& e, int64_t scale,
                            std::vector<std::pair<int64_t, Expr>>& terms) {
    if (auto k = ir::as_const_int(e)) {
      terms.emplace_back(scale * *k, Expr());
      return;
    }
    if (e->kind() == ExprKind::kBinary) {
      const auto& b = static_cast<const ir::BinaryNode&>(*e);
      switch (b.op) {
        case ir::BinaryOp::kAdd:
          collect_terms(b.a, scale, terms);
          collect_terms(b.b, scale, terms);
          return;
        case ir::BinaryOp::kSub:
          collect_terms(b.a, scale, terms);
          collect_terms(b.b, -scale, terms);
          return;
        case ir::BinaryOp::kMul:
          if (auto k = ir::as_const_int(b.b)) return collect_terms(b.a, scale * *k, terms);
          if (auto k = ir::as_const_int(b.a)) return collect_terms(b.b, scale * *k, terms);
          break;
        default: break;
      }
    }
    terms.emplace_back(scale, e);
  }

  /// [min, min + extent) of a tracked loop variable.
  std::optional<std::pair<int64_t, int64_t>> range_of(const ir::VarNode* var) const {
    if (auto it = shift_.find(var); it != shift_.end()) {
      return std::pair{it->second.min, ranges_.at(it->second.stand_in.get())};
    }
    if (auto it = ranges_.find(var); it != ranges_.end()) return std::pair{int64_t{0}, it->second};
    return std::nullopt;
  }
  void set_range(const ir::VarNode* var, int64_t min, int64_t extent) {
    if (min == 0) {
      ranges_[var] = extent;
      return;
    }
    Var stand_in = Var::make(var->name, var->dtype);
    ranges_[stand_in.get()] = extent;
    shift_[var] = {stand_in, stand_in + ir::int_imm(min, var->dtype), min};
  }
  void clear_range(const ir::VarNode* var) {
    auto it = shift_.find(var);
    if (it == shift_.end()) {
      ranges_.erase(var);
      return;
    }
    ranges_.erase(it->second.stand_in.get());
    shift_.erase(it);
  }

  void narrow_into(const Expr& cond, bool holds, std::vector<Narrowing>& done) {
    if (cond->kind() == ExprKind::kLogical) {
      const auto& n = static_cast<const ir::LogicalNode&>(*cond);
      // a && b true: both hold. Otherwise neither side is known alone.
      if (holds && n.op == ir::LogicalOp::kAnd) {
        narrow_into(n.a, true, done);
        narrow_into(n.b, true, done);
      }
      return;
    }
    if (cond->kind() != ExprKind::kCompare) return;
    const auto& n = static_cast<const ir::CompareNode&>(*cond);
    // v op c, or c op v read as v op' c.
    const ir::VarNode* var = nullptr;
    std::optional<int64_t> c;
    CompareOp op = n.op;
    if (n.a->kind() == ExprKind::kVar) {
      var = static_cast<const ir::VarNode*>(n.a.get());
      c = ir::as_const_int(n.b);
    } else if (n.b->kind() == ExprKind::kVar) {
      var = static_cast<const ir::VarNode*>(n.b.get());
      c = ir::as_const_int(n.a);
      switch (op) {
        case CompareOp::kLT: op = CompareOp::kGT; break;
        case CompareOp::kLE: op = CompareOp::kGE; break;
        case CompareOp::kGT: op = CompareOp::kLT; break;
        case CompareOp::kGE: op = CompareOp::kLE; break;
        default: break;
      }
    }
    // Constants far from the int64 ends, so that c - 1 and c + 1 exist.
    constexpr int64_t kFar = int64_t{1} << 62;
    if (!var || !c || !exact_bounds(var->dtype) || *c <= -kFar || *c >= kFar) return;
    auto range = range_of(var);
    if (!range) return;
    if (!holds) {
      switch (op) {
        case CompareOp::kLT: op = CompareOp::kGE; break;
        case CompareOp::kLE: op = CompareOp::kGT; break;
        case CompareOp::kGT: op = CompareOp::kLE; break;
        case CompareOp::kGE: op = CompareOp::kLT; break;
        default: return;  // v != c says nothing of its range
      }
    }
    int64_t lo = range->first, hi = range->first + range->second - 1;
    switch (op) {
      case CompareOp::kLT: hi = std::min(hi, *c - 1); break;
      case CompareOp::kLE: hi = std::min(hi, *c); break;
      case CompareOp::kGT: lo = std::max(lo, *c + 1); break;
      case CompareOp::kGE: lo = std::max(lo, *c); break;
      case CompareOp::kEQ: lo = std::max(lo, *c), hi = std::min(hi, *c); break;
      case CompareOp::kNE: return;
    }
    // An empty range: the branch is never taken, which prove() settles.
    if (lo > hi || (lo == range->first && hi - lo + 1 == range->second)) return;
    done.push_back({var, range->first, range->second});
    clear_range(var);
    set_range(var, lo, hi - lo + 1);
  }

  Expr shifted(const Expr& e) const {
    if (shift_.empty()) return e;
    return ir::substitute(e, [&](const ir::VarNode& v) {
      auto it = shift_.find(&v);
      return it == shift_.end() ? Expr() : it->second.value;
    });
  }

  /// A loop variable over [min, min + extent) as a stand-in over
  /// [0, extent) (kept alive here: ranges_ holds its address) plus min.
  struct Shift {
    Var stand_in;
    Expr value;  ///< stand_in + min
    int64_t min;
  };
  ir::VarRanges ranges_;
  std::map<const ir::VarNode*, Shift> shift_;
};

/// Rewrites select conditions and divisions inside expressions with the prover.
class SelectReducer final : public ir::ExprMutator {
 public:
  explicit SelectReducer(const ConditionProver& prover) : prover_(prover) {}

 protected:
  using ir::ExprMutator::rewrite;
  Expr rewrite(const ir::SelectNode& n, const Expr& self) override {
    Expr t = mutate(n.true_value), f = mutate(n.false_value);
    Expr c = n.condition.dtype().is_scalar() ? prover_.reduce(n.condition) : n.condition;
    if (auto k = ir::as_const_int(c)) return *k ? t : f;
    // A padded copy's test of its row, floormod(i_j, 226) >= 1 for a fused
    // i_j over [0, 226), is evaluated per element: its divisions fold too.
    c = mutate(c);
    if (c.same_as(n.condition) && t.same_as(n.true_value) && f.same_as(n.false_value)) return self;
    return ir::select(c, t, f);
  }
  Expr rewrite(const ir::BinaryNode& n, const Expr& self) override {
    Expr e = ir::ExprMutator::rewrite(n, self);
    if (e->kind() != ExprKind::kBinary) return e;
    const auto& b = static_cast<const ir::BinaryNode&>(*e);
    auto folded = prover_.fold_division(b);
    if (!folded) folded = prover_.fold_min_max(b);
    return folded ? *folded : e;
  }

 private:
  const ConditionProver& prover_;
};

class RedundancyRemover final : public StmtMutator {
 public:
  Expr mutate_expr(const Expr& e) override {
    if (!e) return e;
    SelectReducer reducer(prover_);
    Expr out = reducer.mutate(e);
    return out.same_as(e) ? e : ir::simplify(out);
  }

 protected:
  using StmtMutator::rewrite;

  Stmt rewrite(const ForNode& n, const Stmt& self) override {
    auto extent = ir::as_const_int(n.extent);
    if (extent && *extent == 1) return mutate(detail::substitute(n.body, n.loop_var.get(), n.min));
    bool tracked = prover_.enter_loop(n);
    Stmt s = StmtMutator::rewrite(n, self);
    if (tracked) prover_.exit_loop(n);
    return s;
  }

  Stmt rewrite(const IfThenElseNode& n, const Stmt& self) override {
    Expr cond = prover_.reduce(n.condition);
    if (auto c = ir::as_const_int(cond)) {
      if (*c) return mutate(n.then_case);
      return n.else_case ? mutate(n.else_case) : detail::no_op();
    }
    cond = mutate_expr(cond);
    Stmt then_case = mutate_branch(cond, true, n.then_case);
    Stmt else_case = n.else_case ? mutate_branch(cond, false, n.else_case) : n.else_case;
    if (cond.same_as(n.condition) && then_case.same_as(n.then_case) &&
        else_case.same_as(n.else_case)) {
      return self;
    }
    return if_then_else(cond, then_case, else_case);
  }

 private:
  /// A branch, with the ranges `cond` being `holds` gives its loop
  /// variables; one left a single value becomes that constant (a ragged
  /// last tile's guards then fold once its rows are unrolled).
  Stmt mutate_branch(const Expr& cond, bool holds, const Stmt& branch) {
    auto narrowed = prover_.narrow(cond, holds);
    Stmt body = branch;
    for (const auto& n : narrowed) {
      if (Expr value = prover_.single_value(n.var)) {
        body = detail::substitute(body, n.var, value);
      }
    }
    body = mutate(body);
    prover_.restore(narrowed);
    return body;
  }

  ConditionProver prover_;
};

}  // namespace

PrimFunc remove_redundant_conditions(const PrimFunc& f) {
  RedundancyRemover remover;
  Stmt body = remover.mutate(f->body);
  return body.same_as(f->body) ? f : f.with_body(body);
}

}  // namespace tensortune::lower
