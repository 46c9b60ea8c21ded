// The "remove_redundant_conditions" pass alone.
#include <gtest/gtest.h>

#include "lower/pass_test_util.h"
#include "tensortune/lower/passes.h"

namespace tensortune::lower {
namespace {

using testing::expect_same;
using testing::expect_same_results;
using testing::load;
using testing::loop;

Buffer A = Buffer::make("A", DataType::float32(), {112});
Buffer B = Buffer::make("B", DataType::float32(), {112});

PrimFunc func(Stmt body) { return PrimFunc::make("f", {A, B}, 1, std::move(body)); }

TEST(RemoveRedundantConditions, DropsGuardProvenByLoopRanges) {
  Var io = Var::make("io"), ii = Var::make("ii");
  Expr idx = io * 16 + ii;
  Stmt store = buffer_store(B, idx, load(A, idx));
  PrimFunc f = func(loop(io, 4, loop(ii, 16, if_then_else(idx < 64, store))));
  PrimFunc out = remove_redundant_conditions(f);
  expect_same(out->body, loop(io, 4, loop(ii, 16, store)));
  expect_same_results(f, out);
}

TEST(RemoveRedundantConditions, KeepsGuardOfNonDivisibleSplit) {
  Var io = Var::make("io"), ii = Var::make("ii");
  Expr idx = io * 16 + ii;
  PrimFunc f =
      func(loop(io, 7, loop(ii, 16, if_then_else(idx < 100, buffer_store(B, idx, load(A, idx))))));
  EXPECT_TRUE(remove_redundant_conditions(f).same_as(f));
}

TEST(RemoveRedundantConditions, FalseConditionTakesElseBranch) {
  Var i = Var::make("i");
  Stmt then_case = buffer_store(B, i, 1.0f), else_case = buffer_store(B, i, 2.0f);
  PrimFunc f = func(loop(i, 16, if_then_else(i >= 16, then_case, else_case)));
  expect_same(remove_redundant_conditions(f)->body, loop(i, 16, else_case));
  PrimFunc g = func(loop(i, 16, if_then_else(i > 20, then_case)));
  expect_same(remove_redundant_conditions(g)->body, loop(i, 16, seq({})));
}

TEST(RemoveRedundantConditions, DropsProvenConjunctOnly) {
  Var i = Var::make("i"), n = Var::make("n");
  Stmt store = buffer_store(B, i, 1.0f);
  PrimFunc f = func(loop(i, 16, if_then_else(logical_and(i < 16, i < n), store)));
  expect_same(remove_redundant_conditions(f)->body, loop(i, 16, if_then_else(i < n, store)));
}

TEST(RemoveRedundantConditions, FoldsDivisionTheRangesKeepConstant) {
  // A fused loop over 0..111 split apart again: i / 112 is always 0 and
  // i % 112 is i; i / 56 varies and stays.
  Var i = Var::make("i");
  Expr quotient = floordiv(Expr(i), Expr(112)), remainder = floormod(Expr(i), Expr(112));
  PrimFunc f = func(loop(i, 112, buffer_store(B, quotient * 7 + remainder, load(A, i))));
  expect_same(remove_redundant_conditions(f)->body, loop(i, 112, buffer_store(B, i, load(A, i))));
  expect_same_results(f, remove_redundant_conditions(f));
  PrimFunc g = func(loop(i, 112, buffer_store(B, floordiv(Expr(i), Expr(56)), load(A, i))));
  EXPECT_TRUE(remove_redundant_conditions(g).same_as(g));
}

TEST(RemoveRedundantConditions, FoldsDivisionUnderShiftedLoop) {
  // i in [8, 16): i / 8 == 1 and i % 8 == i - 8, also for C division.
  Var i = Var::make("i");
  Stmt body = for_loop(i, 8, 8, ForKind::kSerial,
                       buffer_store(B, Expr(i) / Expr(8) * 100 + Expr(i) % Expr(8), load(A, i)));
  PrimFunc f = func(body);
  PrimFunc out = remove_redundant_conditions(f);
  expect_same(out->body,
              for_loop(i, 8, 8, ForKind::kSerial, buffer_store(B, Expr(i) + 92, load(A, i))));
  expect_same_results(f, out);
}

TEST(RemoveRedundantConditions, FoldsDivisionOfMultiplesPlusARestInRange) {
  // The packed index of a rewritten layout: with j1 < 6 and j2 < 16,
  // (j1 * 16 + j2) % 16 is j2 and (j1 * 16 + j2) / 16 is j1, whatever j0 is.
  Var j0 = Var::make("j0"), j1 = Var::make("j1"), j2 = Var::make("j2");
  Expr e = Expr(j0) * 96 + Expr(j1) * 16 + j2;
  Stmt body = loop(
      j1, 6,
      loop(j2, 16, buffer_store(B, floormod(e, Expr(16)) + floordiv(e, Expr(16)), load(A, j2))));
  PrimFunc f = PrimFunc::make("f", {A, B}, 1, for_loop(j0, 0, 1, ForKind::kSerial, body));
  PrimFunc out = remove_redundant_conditions(f);
  // j0 has one iteration and is substituted; the rest folds.
  expect_same(out->body,
              loop(j1, 6, loop(j2, 16, buffer_store(B, Expr(j2) + Expr(j1), load(A, j2)))));
  expect_same_results(f, out);
  // A rest that crosses a multiple stays: (j2 + 8) % 16 varies in how it wraps.
  PrimFunc g = func(loop(j2, 16, buffer_store(B, floormod(Expr(j2) + 8, Expr(16)), load(A, j2))));
  EXPECT_TRUE(remove_redundant_conditions(g).same_as(g));
}

TEST(RemoveRedundantConditions, FoldsThePaddedCopysRowTestAndColumnClamp) {
  // A padded copy: a row test on a fused index and a clamped column, both
  // decided by the loop ranges (i in [0, 8), k in [1, 13)). What stays is
  // the test i >= 1; the clamp of a column that can leave the range stays.
  Var i = Var::make("i"), k = Var::make("k");
  Expr column = ir::max(ir::min(Expr(k) - 1, Expr(11)), Expr(0));
  Expr read = ir::select(floormod(Expr(i), Expr(8)) >= 1, load(A, i * 12 + column), 0.0f);
  Stmt body = loop(i, 8, for_loop(k, 1, 12, ForKind::kSerial, buffer_store(B, i * 14 + k, read)));
  PrimFunc f = func(body);
  PrimFunc out = remove_redundant_conditions(f);
  std::string text = to_string(out);
  EXPECT_EQ(text.find("floormod"), std::string::npos) << text;
  EXPECT_EQ(text.find("min("), std::string::npos) << text;
  EXPECT_EQ(text.find("max("), std::string::npos) << text;
  EXPECT_NE(text.find(">= 1"), std::string::npos) << text;
  expect_same_results(f, out);
  Expr wide = ir::min(Expr(k) + 1, Expr(11));  // 13 for the last k
  PrimFunc g = func(loop(
      i, 8,
      for_loop(k, 1, 12, ForKind::kSerial, buffer_store(B, i * 14 + k, load(A, i * 12 + wide)))));
  EXPECT_TRUE(remove_redundant_conditions(g).same_as(g));
  // An unsigned clamp stays: its difference would wrap around in its type.
  Var u = Var::make("u", DataType::uint(32));
  Expr clamp = ir::min(Expr(u), ir::make_const(DataType::uint(32), 5));
  PrimFunc h = func(for_loop(u, 0, 3, ForKind::kSerial,
                             buffer_store(B, ir::cast(DataType::int32(), clamp), load(A, 0))));
  EXPECT_TRUE(remove_redundant_conditions(h).same_as(h));
}

TEST(RemoveRedundantConditions, UsesConstantLoopMin) {
  Var i = Var::make("i");
  Stmt store = buffer_store(B, i, 1.0f);
  Stmt body = for_loop(i, 4, 8, ForKind::kSerial, if_then_else(logical_and(i >= 4, i < 12), store));
  expect_same(remove_redundant_conditions(func(body))->body,
              for_loop(i, 4, 8, ForKind::kSerial, store));
}

TEST(RemoveRedundantConditions, SimplifiesSelectConditions) {
  Var i = Var::make("i");
  PrimFunc f = func(loop(i, 16, buffer_store(B, i, ir::select(i < 16, load(A, i), 0.0f))));
  expect_same(remove_redundant_conditions(f)->body, loop(i, 16, buffer_store(B, i, load(A, i))));
}

TEST(RemoveRedundantConditions, ProvesGuardsInsideABranchFromItsCondition) {
  // 7 tiles of 16 over 100: under io < 6 the tiles are whole, so the guard
  // goes; in the else branch io is 6, and becomes that constant.
  Var io = Var::make("io"), ii = Var::make("ii");
  Expr idx = io * 16 + ii;
  Stmt store = buffer_store(B, idx, load(A, idx));
  Stmt guarded = if_then_else(idx < 100, store);
  PrimFunc f =
      func(loop(io, 7, if_then_else(io < 6, loop(ii, 16, guarded), loop(ii, 16, guarded))));
  PrimFunc out = remove_redundant_conditions(f);
  Expr last = ir::int_imm(6, io->dtype) * 16 + ii;
  expect_same(
      out->body,
      loop(io, 7,
           if_then_else(
               io < 6, loop(ii, 16, store),
               loop(ii, 16, if_then_else(last < 100, buffer_store(B, last, load(A, last)))))));
  expect_same_results(f, out);
  // The same with the constant on the left, a shifted loop, and a
  // conjunction; the else branch of a conjunction is not narrowed.
  Stmt shifted = for_loop(io, 2, 5, ForKind::kSerial,
                          if_then_else(logical_and(ir::int_imm(6, io->dtype) > io, io >= 3),
                                       loop(ii, 16, guarded), loop(ii, 16, guarded)));
  PrimFunc g = func(shifted);
  PrimFunc g_out = remove_redundant_conditions(g);
  const std::string text = to_string(g_out->body);
  const size_t guard = text.find("if (((io * 16) + ii) < 100)");
  EXPECT_NE(guard, std::string::npos) << text;
  EXPECT_EQ(guard, text.rfind("if (((io * 16) + ii) < 100)")) << text;  // only in the else branch
  expect_same_results(g, g_out);
}

TEST(RemoveRedundantConditions, RemovesLoopsOfExtentOne) {
  Var i = Var::make("i"), j = Var::make("j");
  PrimFunc f = func(loop(i, 8, loop(j, 1, buffer_store(B, i * 4 + j, load(A, i + j)))));
  PrimFunc out = remove_redundant_conditions(f);
  expect_same(out->body, loop(i, 8, buffer_store(B, i * 4 + 0, load(A, i + 0))));
  expect_same_results(f, out);
}

}  // namespace
}  // namespace tensortune::lower
