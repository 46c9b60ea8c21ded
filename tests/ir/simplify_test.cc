// The simplifier: each rule on its own, and the whole against evaluation on
// random expressions and random variable values.
#include <gtest/gtest.h>

#include <random>

#include "common/random_expr.h"
#include "tensortune/ir/arith.h"
#include "tensortune/ir/scalar_semantics.h"
#include "tensortune/ir/simplify.h"
#include "tensortune/object/structural.h"

namespace tensortune::ir {
namespace {

Var x = Var::make("x");
Var y = Var::make("y");

void expect_simplifies(const Expr& in, const Expr& expected) {
  Expr out = simplify(in);
  EXPECT_TRUE(structural_equal(out, expected))
      << to_string(in) << " simplified to " << to_string(out) << ", expected "
      << to_string(expected);
}

TEST(Simplify, ConstantFolding) {
  expect_simplifies(Expr(2) + 3, 5);
  expect_simplifies(floordiv(Expr(-7), 2), -4);
  expect_simplifies(floormod(Expr(-7), 2), 1);
  expect_simplifies(Expr(-7) / 2, -3);
  expect_simplifies(Expr(-7) % 2, -1);
  expect_simplifies(int_imm(127, DataType::int_(8)) + int_imm(1, DataType::int_(8)),
                    int_imm(-128, DataType::int_(8)));
  expect_simplifies(Expr(1.5) * 2.0, 3.0);
  expect_simplifies(exp(Expr(0.0)), 1.0);
  expect_simplifies(cast(DataType::int32(), Expr(-2.7)), -2);
  // A 64-bit constant double does not hold exactly is cast at run time: a
  // uint64 of 2^64 - 1 (held as -1) would fold to -1.0f, and 2^60 + 1 would
  // lose its last bit before converting.
  Expr big = cast(DataType::float32(), int_imm(-1, DataType::uint(64)));
  EXPECT_TRUE(structural_equal(simplify(big), big)) << to_string(simplify(big));
  Expr wide = cast(DataType::int32(), int_imm((int64_t{1} << 60) + 1, DataType::int64()));
  EXPECT_TRUE(structural_equal(simplify(wide), wide)) << to_string(simplify(wide));
  expect_simplifies(cast(DataType::float32(), int_imm(int64_t{1} << 40, DataType::int64())),
                    make_const(DataType::float32(), 1099511627776.0));
  expect_simplifies(Expr(3) < 4, make_const(DataType::boolean(), 1));
  // Bytes 02 01 ff 80 (unsigned) times 01 ff 80 7f (signed), low byte first.
  const DataType i32 = DataType::int32();
  expect_simplifies(dot4_u8s8(int_imm(-2130771710, i32), int_imm(2139160321, i32)),
                    int_imm(2 - 1 - 255 * 128 + 128 * 127, i32));
  // Division by zero is left for run time.
  Expr div0 = Expr(1) / 0;
  EXPECT_TRUE(structural_equal(simplify(div0), div0));
}

TEST(Simplify, Identities) {
  expect_simplifies(x + 0, x);
  expect_simplifies(0 + Expr(x), x);
  expect_simplifies(x * 1, x);
  expect_simplifies(x * 0, 0);
  expect_simplifies(floordiv(x, 1), x);
  expect_simplifies(floormod(x, 1), 0);
  expect_simplifies(x - x, 0);
  expect_simplifies(min(x, x), x);
  expect_simplifies((x + 2) + 3, x + 5);
  expect_simplifies((x * 2) * 3, x * 6);
  expect_simplifies(floordiv(x * 8, 4), x * 2);
  expect_simplifies(floormod(x * 8, 4), 0);
  expect_simplifies(floormod(floormod(x, 4), 4), floormod(x, 4));
  expect_simplifies(select(Expr(1) < 2, x, y), x);
  expect_simplifies(select(x < y, x + 0, x), x);
  // A condition the same in every lane.
  Expr lanes_x = broadcast(x, 4), lanes_y = broadcast(y, 4);
  expect_simplifies(select(broadcast(Expr(1) < 2, 4), lanes_x, lanes_y), lanes_x);
  expect_simplifies(select(broadcast(Expr(3) < 2, 4), lanes_x, lanes_y), lanes_y);
  expect_simplifies(logical_and(Expr(1) < 2, x < y), x < y);
  expect_simplifies(logical_or(Expr(1) < 2, x < y), make_const(DataType::boolean(), 1));
  expect_simplifies(logical_not(logical_not(x < y)), x < y);
  expect_simplifies(cast(DataType::int32(), x), x);
  // Float x*0 must stay: inf*0 is nan.
  Var f = Var::make("f", DataType::float32());
  Expr f0 = f * 0.0;
  EXPECT_TRUE(structural_equal(simplify(f0), f0));
}

// floordiv(4 * o + i, 4) over i in [0, 4) is o exactly: a consumer's tile
// of a split loop reads one row of its producer, not two.
TEST(Bounds, QuotientsOfASplitLoopAreExact) {
  Var i = Var::make("i");
  VarRanges inner{{i.get(), 4}};
  auto expect_bound = [&](const Expr& e, const Expr& min, int64_t extent) {
    auto b = bound_of(e, inner);
    ASSERT_TRUE(b.has_value()) << to_string(e);
    EXPECT_TRUE(structural_equal(simplify(b->min), simplify(min)))
        << to_string(e) << ": min " << to_string(b->min);
    EXPECT_EQ(b->extent, extent) << to_string(e);
  };
  expect_bound(floordiv(x * 4 + i, 4), x, 1);
  expect_bound(floordiv(x * 8 + i + 2, 4), x * 2, 2);  // 2..5 over 4: 0 and 1
  expect_bound(floordiv(x * 8 + i + 5, 4), x * 2 + 1, 2);
  // x's coefficient not a multiple of 4: the alignment is unknown.
  expect_bound(floordiv(x * 6 + i, 4), floordiv(x * 6, 4), 2);
}

TEST(Simplify, AffineSums) {
  expect_simplifies((x * 8 + 3) - x * 8, 3);
  expect_simplifies(x * 2 + x * 3, x * 5);
  expect_simplifies((x + 1) * 4 + 2, x * 4 + 6);
  expect_simplifies((x + y) - x, y);
  expect_simplifies((x * 16 + y) - (x * 16 + 4), y - 4);
  expect_simplifies(x - (x + 2), -2);
  expect_simplifies((x * y + 1) - x * y, 1);
  // Equal sums written differently become the same expression.
  expect_simplifies((x * 4 + 1) * 512 + y, x * 2048 + y + 512);
  expect_simplifies(y - x * 3 + x * 2048 + 512 - y + y, x * 2045 + y + 512);
  expect_simplifies(Expr(0) - x, Expr(0) - x);
  expect_simplifies(Expr(5) - x * 2 - y, Expr(5) - x * 2 - y);
  // Sums in canonical form keep their shape.
  Expr e = x * 8 + y;
  EXPECT_TRUE(simplify(e).same_as(e));
  // Constants merge modulo the type's width: in int8, 100 - (-100) is -56.
  Var b = Var::make("b", DataType::int_(8));
  Expr c100 = int_imm(100, DataType::int_(8)), cm100 = int_imm(-100, DataType::int_(8));
  expect_simplifies((b * 2 + c100) - (b * 2 + cm100), int_imm(-56, DataType::int_(8)));
}

TEST(Simplify, RulesAreNamed) {
  auto names = simplify_rule_names();
  EXPECT_GE(names.size(), 10u);
  EXPECT_EQ(names.front(), "fold-constants");
}

TEST(Simplify, PreservesValueOnRandomExpressions) {
  std::mt19937 rng(42);
  int changed = 0;
  for (uint32_t seed = 0; seed < 2000; ++seed) {
    testing::RandomExprGen g(seed, {x, y});
    Expr e = g.int_expr(4);
    Expr s = simplify(e);
    ASSERT_EQ(s.dtype(), e.dtype());
    changed += !s.same_as(e);
    for (int trial = 0; trial < 5; ++trial) {
      int64_t vx = std::uniform_int_distribution<int>(-20, 20)(rng);
      int64_t vy = std::uniform_int_distribution<int>(-20, 20)(rng);
      auto env = [&](const VarNode& v) -> double { return v.name == "x" ? vx : vy; };
      ASSERT_EQ(evaluate_scalar(e, env), evaluate_scalar(s, env))
          << to_string(e) << "\nsimplified: " << to_string(s) << "\nx=" << vx << " y=" << vy;
    }
  }
  EXPECT_GT(changed, 200);
}

TEST(Simplify, UnchangedExpressionIsReturnedAsIs) {
  Expr e = x * y + floormod(x, 3);
  EXPECT_TRUE(simplify(e).same_as(e));
}

}  // namespace
}  // namespace tensortune::ir
