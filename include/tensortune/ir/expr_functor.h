/// \file
/// Rewriting expressions: a mutator that rebuilds only what changed.
#pragma once

#include <functional>

#include "tensortune/ir/expr.h"

namespace tensortune::ir {

/// Default-recursive expression rewriter. Override `rewrite` for the kinds you
/// change; a node whose children are unchanged is returned as is, so
/// untouched subtrees stay shared.
class ExprMutator {
 public:
  virtual ~ExprMutator() = default;
  /// Rewrites `e` (dispatches on its kind to `rewrite`).
  virtual Expr mutate(const Expr& e);

 protected:
#define TT_MUTATOR_METHOD(name) virtual Expr rewrite(const name##Node& node, const Expr& self);
  TT_EXPR_NODES(TT_MUTATOR_METHOD)
#undef TT_MUTATOR_METHOD
  /// Rewrites every expression of a list; returns true if any changed.
  bool mutate_all(const std::vector<Expr>& in, std::vector<Expr>* out);
};

/// Calls `visit` on `e` and every sub-expression, parents before children
/// (reduction axes' variables are not visited as sub-expressions).
void visit_pre_order(const Expr& e, const std::function<void(const Expr&)>& visit);

/// Replaces variables by expressions wherever they occur.
Expr substitute(const Expr& e, const std::function<Expr(const VarNode&)>& replacement);

}  // namespace tensortune::ir
