// Structural equality and hash on IR expressions, checked on thousands of
// random expressions, including ones that differ only in bound variable names.
#include <gtest/gtest.h>

#include "common/random_expr.h"
#include "common/test_util.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"

namespace tensortune::ir {
namespace {

std::vector<Var> free_vars() {
  static std::vector<Var> vars = {Var::make("x"), Var::make("y"), Var::make("z")};
  return vars;
}

TEST(Structural, RenamedBoundVariablesAreEqualWithEqualHash) {
  int with_reductions = 0;
  for (uint32_t seed = 0; seed < 3000; ++seed) {
    testing::RandomExprGen g1(seed, free_vars(), "_a"), g2(seed, free_vars(), "_b");
    Expr a = g1.int_expr(5), b = g2.int_expr(5);
    with_reductions += to_string(a) != to_string(b);
    ASSERT_TRUE(structural_equal(a, b)) << to_string(a) << "\nvs\n" << to_string(b);
    ASSERT_EQ(structural_hash(a), structural_hash(b)) << to_string(a);
  }
  // The generator must actually produce bound variables for this to mean anything.
  EXPECT_GT(with_reductions, 300);
}

TEST(Structural, EqualityAndHashAgreeOnRandomPairs) {
  std::vector<Expr> exprs;
  for (uint32_t seed = 0; seed < 2000; ++seed) {
    testing::RandomExprGen g(seed, free_vars(), "_" + std::to_string(seed));
    exprs.push_back(seed % 2 ? g.int_expr(3) : g.bool_expr(3));
  }
  int equal_pairs = 0, hash_collisions = 0;
  for (size_t i = 0; i < exprs.size(); ++i) {
    for (size_t j = i + 1; j < std::min(exprs.size(), i + 40); ++j) {
      bool eq = structural_equal(exprs[i], exprs[j]);
      bool same_hash = structural_hash(exprs[i]) == structural_hash(exprs[j]);
      if (eq) {
        ++equal_pairs;
        ASSERT_TRUE(same_hash) << to_string(exprs[i]) << " vs " << to_string(exprs[j]);
      } else if (same_hash) {
        ++hash_collisions;
      }
    }
  }
  EXPECT_GT(equal_pairs, 0);  // small depth makes some pairs coincide
  EXPECT_EQ(hash_collisions, 0);
}

TEST(Structural, SaveLoadAndDeepCopyPreserveEquality) {
  for (uint32_t seed = 0; seed < 500; ++seed) {
    testing::RandomExprGen g(seed, free_vars());
    Expr e = g.float_expr(4);
    Expr loaded = load_json_as<Expr>(parse_json_text(save_string(e)));
    ASSERT_TRUE(structural_equal(e, loaded)) << *first_difference(e, loaded);
    ASSERT_EQ(structural_hash(e), structural_hash(loaded));
    ASSERT_EQ(save_string(e), save_string(loaded));
    auto copy = deep_copy(e);
    ASSERT_TRUE(structural_equal(e, copy));
  }
}

TEST(Structural, FreeVariablesCompareByNameAndType) {
  Var x = Var::make("x"), x2 = Var::make("x"), y = Var::make("y");
  EXPECT_TRUE(structural_equal(x + 1, x2 + 1));
  EXPECT_FALSE(structural_equal(x + 1, y + 1));
  EXPECT_FALSE(structural_equal(Expr(x), Expr(Var::make("x", DataType::int64()))));
}

TEST(Structural, BoundAndFreeDoNotMix) {
  IterVar k = IterVar::make("k", 4, IterKind::kReduce);
  Var free_k = Var::make("k");
  Expr a = reduce(ReduceOp::kSum, k.expr() * 2, {k});
  IterVar k2 = IterVar::make("k", 4, IterKind::kReduce);
  Expr b = reduce(ReduceOp::kSum, free_k * 2, {k2});
  EXPECT_FALSE(structural_equal(a, b));
  auto diff = first_difference(a, b);
  ASSERT_TRUE(diff);
  EXPECT_NE(diff->find("root.source.a"), std::string::npos) << *diff;
}

TEST(Structural, FirstDifferenceNamesThePath) {
  Var x = Var::make("x");
  Expr a = x * 3 + 4, b = x * 5 + 4;
  auto diff = first_difference(a, b);
  ASSERT_TRUE(diff);
  EXPECT_EQ(*diff, "root.a.b.value: 3 and 5");
  EXPECT_FALSE(first_difference(a, x * 3 + 4));
}

TEST(Structural, LoadRejectsIllTypedNodes) {
  Var x = Var::make("x");
  auto doc = save_json(x + 1);
  // Make the constant a float: the operands then disagree in type.
  for (auto& node : doc["nodes"]) {
    if (node["type"] == "ir.IntImm") node["dtype"] = "int64";
  }
  EXPECT_TT_ERROR(load_json(doc), kTypeMismatch, "(ir.Binary)");
  doc = save_json(x + 1);
  doc["nodes"][0]["dtype"] = "float33";
  EXPECT_TT_ERROR(load_json(doc), kInvalidArgument, "unknown data type 'float33'");
}

TEST(Structural, LoadRejectsNonFiniteConstantsForIntegerOperands) {
  // Found by the JSON loader fuzzer: a NaN float constant compared with an int
  // variable used to be converted to an integer (undefined behaviour).
  const char* text = R"({"format":"tensortune.graph","version":1,"root":2,"nodes":[)"
                     R"({"type":"ir.Var","dtype":"int32","name":"x"},)"
                     R"({"type":"ir.FloatImm","dtype":"float32","value":"nan"},)"
                     R"({"type":"ir.Compare","dtype":"bool","op":"lt","a":0,"b":1}]})";
  EXPECT_TT_ERROR(load_string(text), kInvalidArgument, "cannot be a constant of type int32");
}

}  // namespace
}  // namespace tensortune::ir
