// Helpers shared by the lowering passes (private to src/lower/).
#pragma once

#include <functional>

#include "tensortune/lower/stmt.h"

namespace tensortune::lower::detail {

/// `s` with `rewrite` applied to every expression its statements hold directly
/// (loop bounds, conditions, indices, values); unchanged parts stay shared.
Stmt map_exprs(const Stmt& s, const std::function<Expr(const Expr&)>& rewrite);

/// `s` with variables replaced by expressions wherever they occur
/// (ir::substitute on every expression).
Stmt substitute(const Stmt& s, const std::function<Expr(const ir::VarNode&)>& replacement);

/// `s` with variable `var` replaced by `value`.
Stmt substitute(const Stmt& s, const ir::VarNode* var, const Expr& value);

/// A statement that does nothing (an empty sequence).
Stmt no_op();

/// True if `s` is an empty sequence.
bool is_no_op(const Stmt& s);

/// The body of `loop` (a constant power-of-two extent from 2 to 64) rewritten
/// into vector operations of that many lanes, as the vectorize pass does but
/// without its check that the iterations are independent (the caller knows);
/// a null Stmt when something in it has no vector form.
Stmt vectorize_body(const ForNode& loop);

}  // namespace tensortune::lower::detail
