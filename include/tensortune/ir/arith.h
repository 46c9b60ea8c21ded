/// \file
/// Integer arithmetic analysis for lowering: ranges of index expressions and
/// differences of linear expressions.
#pragma once

#include <map>
#include <optional>

#include "tensortune/ir/expr.h"

namespace tensortune::ir {

/// The values an integer expression takes: [min, min + extent). `min` may use
/// variables that are held fixed; `extent` is a constant upper bound on the
/// number of distinct values (exact for affine expressions).
struct IntBound {
  Expr min;
  int64_t extent = 1;
};

/// Ranges of the variables that vary: each over [0, extent).
using VarRanges = std::map<const VarNode*, int64_t>;

/// The bound of `e` when the variables in `ranges` vary and every other
/// variable is held fixed; nullopt when no constant-extent bound is found
/// (non-affine use of a varying variable the rules do not cover).
std::optional<IntBound> bound_of(const Expr& e, const VarRanges& ranges);

/// a - b when it is a constant (both affine in the same terms), else nullopt.
std::optional<int64_t> const_difference(const Expr& a, const Expr& b);

/// True if every variable `e` uses is in `vars`.
bool uses_only(const Expr& e, const VarRanges& vars);

/// True if `e` uses variable `v`.
bool uses_var(const Expr& e, const VarNode* v);

}  // namespace tensortune::ir
