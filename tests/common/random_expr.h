/// \file
/// Random well-typed expressions for property tests.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "tensortune/ir/expr.h"

namespace tensortune::testing {

/// Generates random expressions over given free variables. Bound variables
/// (reduction axes) get names ending in `bound_suffix`, so two generators with
/// the same seed and different suffixes give expressions equal up to renaming.
class RandomExprGen {
 public:
  RandomExprGen(uint32_t seed, std::vector<ir::Var> free_vars, std::string bound_suffix = "")
      : rng_(seed), free_vars_(std::move(free_vars)), suffix_(std::move(bound_suffix)) {}

  /// An int32 expression of at most `depth` levels (may contain reductions).
  ir::Expr int_expr(int depth);
  /// A float32 expression of at most `depth` levels.
  ir::Expr float_expr(int depth);
  /// A bool expression of at most `depth` levels.
  ir::Expr bool_expr(int depth);

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  ir::Expr leaf_int();

  std::mt19937 rng_;
  std::vector<ir::Var> free_vars_;
  std::vector<ir::Var> bound_;  // reduction variables in scope
  std::string suffix_;
  int next_bound_ = 0;
};

}  // namespace tensortune::testing
