#include "tensortune/ir/expr_functor.h"

namespace tensortune::ir {

Expr ExprMutator::mutate(const Expr& e) {
  if (!e) return e;
  switch (e->kind()) {
#define TT_MUTATE_CASE(name) \
  case ExprKind::k##name: return rewrite(static_cast<const name##Node&>(*e), e);
    TT_EXPR_NODES(TT_MUTATE_CASE)
#undef TT_MUTATE_CASE
  }
  TT_ICHECK(false, "bad expression kind");
  return e;
}

bool ExprMutator::mutate_all(const std::vector<Expr>& in, std::vector<Expr>* out) {
  bool changed = false;
  out->clear();
  out->reserve(in.size());
  for (const auto& e : in) {
    out->push_back(mutate(e));
    changed |= !out->back().same_as(e);
  }
  return changed;
}

Expr ExprMutator::rewrite(const IntImmNode&, const Expr& self) { return self; }
Expr ExprMutator::rewrite(const FloatImmNode&, const Expr& self) { return self; }
Expr ExprMutator::rewrite(const VarNode&, const Expr& self) { return self; }

Expr ExprMutator::rewrite(const BinaryNode& n, const Expr& self) {
  Expr a = mutate(n.a), b = mutate(n.b);
  if (a.same_as(n.a) && b.same_as(n.b)) return self;
  return binary(n.op, a, b);
}
Expr ExprMutator::rewrite(const CompareNode& n, const Expr& self) {
  Expr a = mutate(n.a), b = mutate(n.b);
  if (a.same_as(n.a) && b.same_as(n.b)) return self;
  return compare(n.op, a, b);
}
Expr ExprMutator::rewrite(const LogicalNode& n, const Expr& self) {
  Expr a = mutate(n.a), b = mutate(n.b);
  if (a.same_as(n.a) && b.same_as(n.b)) return self;
  return logical(n.op, a, b);
}
Expr ExprMutator::rewrite(const NotNode& n, const Expr& self) {
  Expr a = mutate(n.a);
  if (a.same_as(n.a)) return self;
  return logical_not(a);
}
Expr ExprMutator::rewrite(const SelectNode& n, const Expr& self) {
  Expr c = mutate(n.condition), t = mutate(n.true_value), f = mutate(n.false_value);
  if (c.same_as(n.condition) && t.same_as(n.true_value) && f.same_as(n.false_value)) return self;
  return select(c, t, f);
}
Expr ExprMutator::rewrite(const CastNode& n, const Expr& self) {
  Expr v = mutate(n.value);
  if (v.same_as(n.value)) return self;
  return cast(n.dtype, v);
}
Expr ExprMutator::rewrite(const CallNode& n, const Expr& self) {
  std::vector<Expr> args;
  if (!mutate_all(n.args, &args)) return self;
  return call(n.op, std::move(args));
}
Expr ExprMutator::rewrite(const ReduceNode& n, const Expr& self) {
  Expr source = mutate(n.source), cond = mutate(n.condition), init = mutate(n.init);
  if (source.same_as(n.source) && cond.same_as(n.condition) && init.same_as(n.init)) return self;
  return reduce(n.op, source, n.axis, cond, init);
}
Expr ExprMutator::rewrite(const ProducerLoadNode& n, const Expr& self) {
  std::vector<Expr> indices;
  if (!mutate_all(n.indices, &indices)) return self;
  return producer_load(n.producer, std::move(indices));
}

Expr ExprMutator::rewrite(const BufferLoadNode& n, const Expr& self) {
  Expr index = mutate(n.index);
  return index.same_as(n.index) ? self : buffer_load(n.buffer, index);
}
Expr ExprMutator::rewrite(const RampNode& n, const Expr& self) {
  Expr base = mutate(n.base), stride = mutate(n.stride);
  if (base.same_as(n.base) && stride.same_as(n.stride)) return self;
  return ramp(base, stride, n.lanes);
}
Expr ExprMutator::rewrite(const BroadcastNode& n, const Expr& self) {
  Expr value = mutate(n.value);
  return value.same_as(n.value) ? self : broadcast(value, n.lanes);
}

void visit_pre_order(const Expr& e, const std::function<void(const Expr&)>& visit) {
  if (!e) return;
  visit(e);
  dispatch(e, [&](const auto& n) {
    using N = std::decay_t<decltype(n)>;
    if constexpr (std::is_same_v<N, BinaryNode> || std::is_same_v<N, CompareNode> ||
                  std::is_same_v<N, LogicalNode>) {
      visit_pre_order(n.a, visit);
      visit_pre_order(n.b, visit);
    } else if constexpr (std::is_same_v<N, NotNode>) {
      visit_pre_order(n.a, visit);
    } else if constexpr (std::is_same_v<N, SelectNode>) {
      visit_pre_order(n.condition, visit);
      visit_pre_order(n.true_value, visit);
      visit_pre_order(n.false_value, visit);
    } else if constexpr (std::is_same_v<N, CastNode>) {
      visit_pre_order(n.value, visit);
    } else if constexpr (std::is_same_v<N, CallNode>) {
      for (const auto& a : n.args) visit_pre_order(a, visit);
    } else if constexpr (std::is_same_v<N, ReduceNode>) {
      visit_pre_order(n.source, visit);
      visit_pre_order(n.condition, visit);
      visit_pre_order(n.init, visit);
    } else if constexpr (std::is_same_v<N, ProducerLoadNode>) {
      for (const auto& i : n.indices) visit_pre_order(i, visit);
    } else if constexpr (std::is_same_v<N, BufferLoadNode>) {
      visit_pre_order(n.index, visit);
    } else if constexpr (std::is_same_v<N, RampNode>) {
      visit_pre_order(n.base, visit);
      visit_pre_order(n.stride, visit);
    } else if constexpr (std::is_same_v<N, BroadcastNode>) {
      visit_pre_order(n.value, visit);
    }
  });
}

namespace {
class Substituter final : public ExprMutator {
 public:
  explicit Substituter(const std::function<Expr(const VarNode&)>& replacement)
      : replacement_(replacement) {}

 protected:
  using ExprMutator::rewrite;
  Expr rewrite(const VarNode& n, const Expr& self) override {
    Expr r = replacement_(n);
    return r ? r : self;
  }

 private:
  const std::function<Expr(const VarNode&)>& replacement_;
};
}  // namespace

Expr substitute(const Expr& e, const std::function<Expr(const VarNode&)>& replacement) {
  Substituter s(replacement);
  return s.mutate(e);
}

}  // namespace tensortune::ir
