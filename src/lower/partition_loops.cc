// The "partition_loops" pass: see passes.h.
#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "lower/pass_util.h"
#include "tensortune/ir/arith.h"
#include "tensortune/ir/expr_functor.h"
#include "tensortune/ir/simplify.h"
#include "tensortune/lower/passes.h"

namespace tensortune::lower {
namespace {

using ir::CompareOp;
using ir::ExprKind;

/// Values [lo, hi] of a loop variable, both ends included; empty when lo > hi.
struct Interval {
  int64_t lo = 0;
  int64_t hi = -1;
  bool empty() const { return lo > hi; }
  Interval intersect(const Interval& o) const { return {std::max(lo, o.lo), std::min(hi, o.hi)}; }
};

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

/// Finds, for one loop, the guards below it that hold for every value of the
/// loops between it and them on a sub-range of its own variable: where the
/// body computes a tile that lies wholly inside the tensor. A guard must be a
/// comparison affine in the variable, whose other variables are those of
/// enclosing loops inside this one (with constant ranges from 0).
class GuardFinder final : public StmtMutator {
 public:
  GuardFinder(const ir::VarNode* var, Interval range) : var_(var), range_(range) {}

  /// The sub-ranges found, one per guard that holds on part of the range only.
  const std::vector<Interval>& ranges() const { return found_; }

  Expr mutate_expr(const Expr& e) override {
    if (!e) return e;
    SelectFinder finder(*this);
    finder.mutate(e);
    return e;
  }

 protected:
  using StmtMutator::rewrite;

  Stmt rewrite(const ForNode& n, const Stmt& self) override {
    auto min = ir::as_const_int(n.min), extent = ir::as_const_int(n.extent);
    bool tracked = min && extent && *min == 0 && *extent > 0;
    if (tracked) inner_[n.loop_var.get()] = *extent;
    mutate(n.body);
    if (tracked) inner_.erase(n.loop_var.get());
    return self;
  }

  Stmt rewrite(const IfThenElseNode& n, const Stmt& self) override {
    consider(n.condition);
    mutate_expr(n.condition);
    mutate(n.then_case);
    if (n.else_case) mutate(n.else_case);
    return self;
  }

 private:
  class SelectFinder final : public ir::ExprMutator {
   public:
    explicit SelectFinder(GuardFinder& owner) : owner_(owner) {}

   protected:
    using ir::ExprMutator::rewrite;
    Expr rewrite(const ir::SelectNode& n, const Expr& self) override {
      if (n.condition.dtype().is_scalar()) owner_.consider(n.condition);
      return ir::ExprMutator::rewrite(n, self);
    }

   private:
    GuardFinder& owner_;
  };

  /// Records where each conjunct of `cond` holds throughout.
  void consider(const Expr& cond) {
    if (cond->kind() == ExprKind::kLogical) {
      const auto& n = static_cast<const ir::LogicalNode&>(*cond);
      if (n.op == ir::LogicalOp::kAnd) {
        consider(n.a);
        consider(n.b);
      }
      return;
    }
    if (cond->kind() != ExprKind::kCompare) return;
    const auto& n = static_cast<const ir::CompareNode&>(*cond);
    if (!n.a.dtype().is_integer() || !n.a.dtype().is_scalar()) return;
    if (auto r = holds_on(n); r && !r->empty() && (r->lo > range_.lo || r->hi < range_.hi)) {
      found_.push_back(*r);
    }
  }

  /// The values of the variable for which `a op b` holds whatever the inner
  /// loops' variables are, within the loop's range; nullopt when the
  /// comparison is not of the form this pass understands.
  std::optional<Interval> holds_on(const ir::CompareNode& n) const {
    Expr diff = ir::simplify(n.a - n.b);
    if (!ir::uses_var(diff, var_)) return std::nullopt;
    auto at = [&](int64_t value) {
      return ir::simplify(ir::substitute(diff, [&](const ir::VarNode& v) {
        return &v == var_ ? ir::int_imm(value, v.dtype) : Expr();
      }));
    };
    // diff = coeff * var + rest, checked at three points (affine in var).
    Expr rest = at(0);
    auto coeff = ir::const_difference(at(1), rest);
    auto coeff2 = ir::const_difference(at(2), rest);
    if (!coeff || !coeff2 || *coeff2 != 2 * *coeff || *coeff == 0) return std::nullopt;
    if (!ir::uses_only(rest, inner_)) return std::nullopt;
    auto bound = ir::bound_of(rest, inner_);
    if (!bound) return std::nullopt;
    auto rest_lo = ir::as_const_int(bound->min);
    if (!rest_lo) return std::nullopt;
    const int64_t lo = *rest_lo, hi = lo + bound->extent - 1, c = *coeff;
    // Holds throughout iff c*var <= at_most (LT, LE) or c*var >= at_least (GT, GE).
    std::optional<int64_t> at_most, at_least;
    switch (n.op) {
      case CompareOp::kLT: at_most = -hi - 1; break;
      case CompareOp::kLE: at_most = -hi; break;
      case CompareOp::kGT: at_least = -lo + 1; break;
      case CompareOp::kGE: at_least = -lo; break;
      default: return std::nullopt;
    }
    Interval r = range_;
    if (at_most) {
      if (c > 0) r.hi = std::min(r.hi, floor_div(*at_most, c));
      if (c < 0) r.lo = std::max(r.lo, ceil_div(*at_most, c));
    } else {
      if (c > 0) r.lo = std::max(r.lo, ceil_div(*at_least, c));
      if (c < 0) r.hi = std::min(r.hi, floor_div(*at_least, c));
    }
    return r;
  }

  const ir::VarNode* var_;
  Interval range_;
  ir::VarRanges inner_;
  std::vector<Interval> found_;
};

class LoopPartitioner final : public StmtMutator {
 protected:
  using StmtMutator::rewrite;

  Stmt rewrite(const ForNode& n, const Stmt& self) override {
    auto min = ir::as_const_int(n.min), extent = ir::as_const_int(n.extent);
    // A parallel loop is split too, its full tiles then unguarded (a guard
    // in a register tile's multiply-add loop keeps the compiler from holding
    // the accumulators in registers: a 7-row tile of 128 rows ran at 48
    // GFLOP/s, without the guard at 77). But by a branch in its body, not
    // into loops: a loop of its own for the ragged tile would be one more
    // round for all threads to wait on (19 tiles on 8 threads: 3 rounds
    // and 1, not 3).
    bool splittable = (n.for_kind == ForKind::kSerial || n.for_kind == ForKind::kUnrolled ||
                       n.for_kind == ForKind::kVectorized || n.for_kind == ForKind::kParallel) &&
                      min && extent && *extent > 1;
    if (!splittable) return StmtMutator::rewrite(n, self);
    const Interval range{*min, *min + *extent - 1};
    GuardFinder finder(n.loop_var.get(), range);
    finder.mutate(n.body);
    // The sub-range where as many guards as possible hold together, in the
    // order met: a guard that would leave it empty is skipped.
    std::optional<Interval> middle;
    for (const Interval& r : finder.ranges()) {
      Interval next = middle ? middle->intersect(r) : r;
      if (!next.empty()) middle = next;
    }
    if (!middle) return StmtMutator::rewrite(n, self);
    // A vectorized loop is split only into loops the vectorize pass takes
    // (a power-of-two number of lanes): a concat's select of its operands
    // along the channels becomes two plain vector copies instead of a
    // per-lane select of two gathers.
    if (n.for_kind == ForKind::kVectorized) {
      auto whole_vector = [](int64_t e) { return e == 0 || (e >= 2 && (e & (e - 1)) == 0); };
      if (!whole_vector(middle->lo - range.lo) || !whole_vector(middle->hi - middle->lo + 1) ||
          !whole_vector(range.hi - middle->hi)) {
        return StmtMutator::rewrite(n, self);
      }
    }
    // The middle part is searched again for guards of its inner loops; the
    // head and tail keep theirs (remove_redundant_conditions and unrolling
    // settle them), so the body is copied at most three times per level.
    if (n.for_kind == ForKind::kParallel) {
      // if (v >= lo) { if (v <= hi) middle else tail } else head, each part
      // there only when not empty; remove_redundant_conditions proves the
      // branches' guards from these conditions.
      const Expr& v = n.loop_var;
      Stmt body = mutate(n.body);
      if (middle->hi < range.hi) {
        body = if_then_else(v <= ir::int_imm(middle->hi, v->dtype), body, n.body);
      }
      if (middle->lo > range.lo) {
        body = if_then_else(v >= ir::int_imm(middle->lo, v->dtype), body, n.body);
      }
      return for_loop(n.loop_var, n.min, n.extent, n.for_kind, body);
    }
    std::vector<Stmt> parts;
    auto part = [&](int64_t lo, int64_t hi, Stmt body) {
      if (lo > hi) return;
      parts.push_back(for_loop(n.loop_var, ir::int_imm(lo, n.min.dtype()),
                               ir::int_imm(hi - lo + 1, n.extent.dtype()), n.for_kind,
                               std::move(body)));
    };
    part(range.lo, middle->lo - 1, n.body);
    part(middle->lo, middle->hi, mutate(n.body));
    part(middle->hi + 1, range.hi, n.body);
    return parts.size() == 1 ? parts[0] : seq(std::move(parts));
  }
};

}  // namespace

PrimFunc partition_loops(const PrimFunc& f) {
  LoopPartitioner partitioner;
  Stmt body = partitioner.mutate(f->body);
  return body.same_as(f->body) ? f : f.with_body(body);
}

}  // namespace tensortune::lower
