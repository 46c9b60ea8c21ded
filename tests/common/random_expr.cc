#include "common/random_expr.h"

namespace tensortune::testing {

using namespace ir;  // NOLINT: test helper

Expr RandomExprGen::leaf_int() {
  int choice = pick(4);
  if (choice == 0 || (free_vars_.empty() && bound_.empty())) return int_imm(pick(17) - 8);
  if (choice == 1 && !bound_.empty()) return bound_[pick(static_cast<int>(bound_.size()))];
  if (!free_vars_.empty()) return free_vars_[pick(static_cast<int>(free_vars_.size()))];
  return int_imm(pick(9));
}

Expr RandomExprGen::int_expr(int depth) {
  if (depth <= 0) return leaf_int();
  switch (pick(9)) {
    case 0: return leaf_int();
    case 1: return int_expr(depth - 1) + int_expr(depth - 1);
    case 2: return int_expr(depth - 1) - int_expr(depth - 1);
    case 3: return int_expr(depth - 1) * int_expr(depth - 1);
    case 4: return floordiv(int_expr(depth - 1), int_imm(pick(7) + 1));
    case 5: return floormod(int_expr(depth - 1), int_imm(pick(7) + 1));
    case 6:
      return pick(2) ? min(int_expr(depth - 1), int_expr(depth - 1))
                     : max(int_expr(depth - 1), int_expr(depth - 1));
    case 7: return select(bool_expr(depth - 1), int_expr(depth - 1), int_expr(depth - 1));
    default: {
      // A small reduction binding a fresh variable.
      IterVar k = IterVar::make("k" + std::to_string(next_bound_++) + suffix_, pick(3) + 1,
                                IterKind::kReduce);
      bound_.push_back(k->var);
      Expr body = int_expr(depth - 1);
      Expr cond = pick(3) == 0 ? bool_expr(depth - 1) : Expr();
      bound_.pop_back();
      ReduceOp op = static_cast<ReduceOp>(pick(3));  // sum, max, min
      return reduce(op, body, {k}, cond);
    }
  }
}

Expr RandomExprGen::float_expr(int depth) {
  if (depth <= 0) {
    return pick(2) ? float_imm((pick(33) - 16) / 4.0) : cast(DataType::float32(), leaf_int());
  }
  switch (pick(6)) {
    case 0: return float_expr(depth - 1) + float_expr(depth - 1);
    case 1: return float_expr(depth - 1) * float_expr(depth - 1);
    case 2: return float_expr(depth - 1) - float_expr(depth - 1);
    case 3: return tanh(float_expr(depth - 1));
    case 4: return select(bool_expr(depth - 1), float_expr(depth - 1), float_expr(depth - 1));
    default: return max(float_expr(depth - 1), float_expr(depth - 1));
  }
}

Expr RandomExprGen::bool_expr(int depth) {
  if (depth <= 0) return int_expr(0) < int_expr(0);
  switch (pick(5)) {
    case 0: return int_expr(depth - 1) < int_expr(depth - 1);
    case 1: return int_expr(depth - 1) == int_expr(depth - 1);
    case 2: return logical_and(bool_expr(depth - 1), bool_expr(depth - 1));
    case 3: return logical_or(bool_expr(depth - 1), bool_expr(depth - 1));
    default: return logical_not(bool_expr(depth - 1));
  }
}

}  // namespace tensortune::testing
