// The "partition_loops" pass alone, and with remove_redundant_conditions after it.
#include <gtest/gtest.h>

#include "lower/pass_test_util.h"
#include "tensortune/lower/passes.h"

namespace tensortune::lower {
namespace {

using testing::count_loops;
using testing::expect_same;
using testing::expect_same_results;
using testing::load;
using testing::loop;

Buffer A = Buffer::make("A", DataType::float32(), {100});
Buffer B = Buffer::make("B", DataType::float32(), {100});

PrimFunc func(Stmt body) { return PrimFunc::make("f", {A, B}, 1, std::move(body)); }

/// Number of if statements in `s`.
int count_ifs(const Stmt& s) {
  int n = 0;
  visit_stmts(s, [&](const Stmt& x) { n += x->kind() == StmtKind::kIfThenElse; });
  return n;
}

Stmt loop_from(const Var& v, int64_t min, int64_t extent, Stmt body) {
  return for_loop(v, ir::int_imm(min, v->dtype), ir::int_imm(extent, v->dtype), ForKind::kSerial,
                  std::move(body));
}

TEST(PartitionLoops, SplitsOffTheLastTileOfARaggedSplit) {
  // 100 elements in tiles of 16: tiles 0..5 are whole, tile 6 has 4.
  Var io = Var::make("io"), ii = Var::make("ii");
  Expr idx = io * 16 + ii;
  Stmt guarded = if_then_else(idx < 100, buffer_store(B, idx, load(A, idx) * 2.0f));
  PrimFunc f = func(loop(io, 7, loop(ii, 16, guarded)));
  PrimFunc out = partition_loops(f);
  expect_same(out->body, seq({loop_from(io, 0, 6, loop(ii, 16, guarded)),
                              loop_from(io, 6, 1, loop(ii, 16, guarded))}));
  expect_same_results(f, out);
  // The whole tiles' guard is then provably true; the last tile's stays.
  PrimFunc clean = remove_redundant_conditions(out);
  EXPECT_EQ(count_ifs(clean->body), 1);
  expect_same_results(f, clean);
}

TEST(PartitionLoops, SplitsBothEndsForPaddingGuards) {
  // A 3-tap window over 0..97 with padding 1: reads of x - 1 + r exist for
  // 1 <= x <= 96 whatever r is; the first and the last x are guarded.
  Var x = Var::make("x"), r = Var::make("r");
  Expr at = x - 1 + r;
  Expr inside = logical_and(at >= 0, at < 98);
  // A guarded read, and a select (which reads nothing out of bounds).
  Expr weight = ir::select(inside, ir::make_const(DataType::float32(), 2),
                           ir::make_const(DataType::float32(), 0));
  Stmt body = loop(x, 98,
                   loop(r, 3,
                        seq({if_then_else(inside, buffer_store(B, x, load(B, x) + load(A, at))),
                             buffer_store(B, x + 1, load(B, x + 1) * weight)})));
  PrimFunc f = func(body);
  PrimFunc out = partition_loops(f);
  ASSERT_EQ(out->body->kind(), StmtKind::kSeq);
  const auto& parts = static_cast<const SeqNode&>(*out->body).stmts;
  ASSERT_EQ(parts.size(), 3u);
  std::vector<std::pair<int64_t, int64_t>> bounds;
  for (const auto& p : parts) {
    const auto& l = static_cast<const ForNode&>(*p);
    bounds.emplace_back(*ir::as_const_int(l.min), *ir::as_const_int(l.extent));
  }
  EXPECT_EQ(bounds, (std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 96}, {97, 1}}));
  PrimFunc clean = remove_redundant_conditions(out);
  // The middle loop has neither the if nor the select.
  const Stmt& middle = static_cast<const SeqNode&>(*clean->body).stmts[1];
  EXPECT_EQ(count_ifs(middle), 0) << to_string(middle);
  EXPECT_EQ(to_string(middle).find("select"), std::string::npos) << to_string(middle);
  expect_same_results(f, clean);
}

TEST(PartitionLoops, LeavesLoopsWhoseGuardsHoldThroughoutOrNowhereUniformly) {
  Var io = Var::make("io"), ii = Var::make("ii"), n = Var::make("n");
  Expr idx = io * 16 + ii;
  Stmt store = buffer_store(B, idx, load(A, idx));
  // Always true: remove_redundant_conditions' job, nothing to split.
  PrimFunc always = func(loop(io, 6, loop(ii, 16, if_then_else(idx < 100, store))));
  EXPECT_TRUE(partition_loops(always).same_as(always));
  // A guard on a variable that is not a loop's: no range to split.
  PrimFunc unknown = func(loop(io, 6, loop(ii, 16, if_then_else(idx < n, store))));
  EXPECT_TRUE(partition_loops(unknown).same_as(unknown));
  // Not affine in the loop variable.
  PrimFunc square = func(loop(io, 6, if_then_else(io * io < 10, buffer_store(B, io, 1.0f))));
  EXPECT_TRUE(partition_loops(square).same_as(square));
}

// A parallel loop splits too, by a branch in its one loop: whole tiles
// without guards (a guard in a register tile's multiply-add loop kept the
// accumulators out of registers), the ragged last tile with its own, as
// the last tile, not a launch of its own for threads to wait on.
TEST(PartitionLoops, SplitsParallelLoopsAtTheRaggedTileByABranch) {
  Var io = Var::make("io"), ii = Var::make("ii");
  Expr idx = io * 16 + ii;
  Stmt guarded = if_then_else(idx < 100, buffer_store(B, idx, load(A, idx)));
  PrimFunc par = func(loop(io, 7, loop(ii, 16, guarded, ForKind::kVectorized), ForKind::kParallel));
  PrimFunc out = remove_redundant_conditions(partition_loops(par));
  const std::string text = to_string(out->body);
  EXPECT_EQ(
      text.rfind("parallel for (io, 0, 7) {\n  if (io <= 5) {\n    vectorized for (ii, 0, 16) {\n"
                 "      B[",
                 0),
      0u)
      << text;
  EXPECT_EQ(count_loops(out->body, ForKind::kParallel), 1) << text;
  // The last tile's guard, its tile index a constant there.
  EXPECT_NE(text.find("if (((6 * 16) + ii) < 100)"), std::string::npos) << text;
  expect_same_results(par, out);
  // Guards at both ends: if (io >= lo) { if (io <= hi) middle else tail } else head.
  Var x = Var::make("x");
  Stmt padded =
      if_then_else(logical_and(x - 1 >= 0, x - 1 < 8), buffer_store(B, x, load(A, x - 1)));
  PrimFunc ends = func(loop(x, 10, padded, ForKind::kParallel));
  PrimFunc split = remove_redundant_conditions(partition_loops(ends));
  EXPECT_EQ(count_ifs(split->body), 2) << to_string(split->body);  // the branches only
  expect_same_results(ends, split);
}

TEST(PartitionLoops, SplitsVectorizedLoopsIntoWholeVectorsOnly) {
  // A concat along the vectorized axis: B[l] = l < cut ? A[l] : A[50 + l - cut].
  auto concat = [](int64_t cut) {
    Var l = Var::make("l");
    Expr cut_at = ir::int_imm(cut, l->dtype);
    Expr value = ir::select(l < cut_at, load(A, l), load(A, l - cut_at + 50));
    return func(loop(l, 32, buffer_store(B, l, value), ForKind::kVectorized));
  };
  PrimFunc halves = concat(16);
  PrimFunc out = remove_redundant_conditions(partition_loops(halves));
  EXPECT_EQ(count_loops(out->body, ForKind::kVectorized), 2) << to_string(out->body);
  EXPECT_EQ(to_string(out->body).find("select"), std::string::npos) << to_string(out->body);
  expect_same_results(halves, out);
  // 24 and 8 lanes: the vectorize pass takes no 24, so the loop stays whole.
  PrimFunc ragged = concat(24);
  EXPECT_TRUE(partition_loops(ragged).same_as(ragged));
}

TEST(PartitionLoops, PartitionsInnerLoopsOfTheMiddlePartOnly) {
  // Guards on two axes of a 2-D tiling of a 10 x 10 array by 4 x 4: the
  // row-tile loop splits (2 whole row tiles + the last); inside the whole
  // row tiles the column-tile loop splits too.
  Var i0 = Var::make("i0"), i1 = Var::make("i1"), j0 = Var::make("j0"), j1 = Var::make("j1");
  Expr i = i0 * 4 + i1, j = j0 * 4 + j1;
  Stmt store =
      if_then_else(logical_and(i < 10, j < 10), buffer_store(B, i * 10 + j, load(A, j * 10 + i)));
  PrimFunc f = func(loop(i0, 3, loop(j0, 3, loop(i1, 4, loop(j1, 4, store)))));
  PrimFunc out = partition_loops(f);
  // i0: [0,2) and [2,3); inside [0,2), j0: [0,2) and [2,3).
  EXPECT_EQ(count_loops(out->body, ForKind::kSerial), 2 + 2 * 3 + 3);
  PrimFunc clean = remove_redundant_conditions(out);
  expect_same_results(f, clean);
  std::string text = to_string(clean->body);
  // The whole tiles' store is unguarded: one of the three copies of it.
  EXPECT_EQ(count_ifs(clean->body), 2) << text;
}

}  // namespace
}  // namespace tensortune::lower
