/// \file
/// The expression simplifier: constant folding and basic algebra.
///
/// The rules are a table (src/ir/simplify.cc), each a named rewrite applied to
/// a node whose operands are already simplified; tests/ir/simplify_test.cc
/// checks each rule and fuzzes the whole against evaluation.
#pragma once

#include "tensortune/ir/expr.h"

namespace tensortune::ir {

/// An expression equal in value to `e` for every assignment of its variables,
/// with constants folded and identities removed. Never changes the type.
Expr simplify(const Expr& e);

/// The names of the simplifier's rules, in the order they are tried.
std::vector<std::string> simplify_rule_names();

}  // namespace tensortune::ir
