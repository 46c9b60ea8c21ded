// The "split_wide_vectors" pass: vector statements wider than the registers
// become register-wide pieces that compute the same thing.
#include <gtest/gtest.h>

#include "lower/pass_test_util.h"
#include "tensortune/lower/passes.h"

namespace tensortune::lower {
namespace {

using testing::count_stores;
using testing::expect_same;
using testing::expect_same_results;
using testing::load;
using testing::loop;

Buffer A = Buffer::make("A", DataType::float32(), {256});
Buffer B = Buffer::make("B", DataType::float32(), {256});
Buffer C = Buffer::make("C", DataType::float32(), {256});
Buffer D = Buffer::make("D", DataType::float64(), {256});

PrimFunc func(Stmt body) { return PrimFunc::make("f", {A, B, D, C}, 3, std::move(body)); }

Expr ramp(Expr base, int lanes) { return ir::ramp(std::move(base), 1, lanes); }

TEST(SplitWideVectors, AStoreOfSixteenFloatsBecomesTwoOfEightOnThirtyTwoByteRegisters) {
  Var i = Var::make("i");
  Expr r = ramp(i * 16, 16);
  PrimFunc f = func(loop(i, 16, buffer_store(C, r, load(A, r) * ir::broadcast(2.0f, 16))));
  PrimFunc out = split_wide_vectors(f, 32);
  Expr lo = ramp(i * 16, 8), hi = ramp(i * 16 + 8, 8);
  expect_same(out->body, loop(i, 16,
                              seq({buffer_store(C, lo, load(A, lo) * ir::broadcast(2.0f, 8)),
                                   buffer_store(C, hi, load(A, hi) * ir::broadcast(2.0f, 8))})));
  expect_same_results(f, out);
  // Registers of 64 bytes hold all sixteen: nothing changes.
  EXPECT_TRUE(split_wide_vectors(f, 64).same_as(f));
}

TEST(SplitWideVectors, AnAccumulatorUpdateSplitsIntoUpdatesOfEachPiece) {
  // C[0:32] += broadcast(A[k]) * B[32k : 32k + 32] over k: a register tile row.
  Var k = Var::make("k");
  Expr acc = ramp(0, 32);
  PrimFunc f = func(
      loop(k, 8,
           buffer_store(C, acc,
                        load(C, acc) + ir::broadcast(load(A, k), 32) * load(B, ramp(k * 32, 32)))));
  PrimFunc out = split_wide_vectors(f, 32);
  EXPECT_EQ(count_stores(out->body), 4) << to_string(out);
  // No temporaries: each piece's store follows its own loads.
  visit_stmts(out->body, [](const Stmt& s) { EXPECT_NE(s->kind(), StmtKind::kLetStmt); });
  expect_same_results(f, out);
}

TEST(SplitWideVectors, AStoreReadingLanesAnotherPieceWritesComputesEveryPieceFirst) {
  // C[1:17] = C[0:16] + 1 reads C[8] before any lane is written; cut into two
  // plain stores, the second piece would read the first piece's result.
  PrimFunc f = func(buffer_store(C, ramp(1, 16), load(C, ramp(0, 16)) + ir::broadcast(1.0f, 16)));
  PrimFunc out = split_wide_vectors(f, 32);
  EXPECT_EQ(count_stores(out->body), 2);
  EXPECT_EQ(out->body->kind(), StmtKind::kLetStmt) << to_string(out);
  expect_same_results(f, out);
}

TEST(SplitWideVectors, TheWidestLaneDecidesThePieces) {
  // A float64 vector of 8 lanes takes 64 bytes: 4 lanes per 32-byte register,
  // and the float32 vectors of the same function take pieces of 4 too.
  Expr r = ramp(0, 8);
  PrimFunc f = func(seq({buffer_store(C, r, ir::cast(DataType::float32(8), load(D, r))),
                         buffer_store(C, ramp(8, 8), load(A, ramp(8, 8)))}));
  PrimFunc out = split_wide_vectors(f, 32);
  EXPECT_EQ(count_stores(out->body), 4) << to_string(out);
  visit_stmts(out->body, [](const Stmt& s) {
    if (s->kind() == StmtKind::kBufferStore) {
      EXPECT_EQ(static_cast<const BufferStoreNode&>(*s).value.dtype().lanes(), 4);
    }
  });
  expect_same_results(f, out);
}

TEST(SplitWideVectors, AVectorLetBecomesOneLetPerPiece) {
  Var v = Var::make("v", DataType::float32(16));
  Expr r = ramp(0, 16);
  PrimFunc f = func(let_stmt(v, load(A, r) * load(B, r), buffer_store(C, r, v + v)));
  PrimFunc out = split_wide_vectors(f, 32);
  int lets = 0;
  visit_stmts(out->body, [&](const Stmt& s) {
    if (s->kind() == StmtKind::kLetStmt) {
      ++lets;
      EXPECT_EQ(static_cast<const LetStmtNode&>(*s).var->dtype.lanes(), 8);
    }
  });
  EXPECT_EQ(lets, 2) << to_string(out);
  EXPECT_EQ(count_stores(out->body), 2);
  expect_same_results(f, out);
}

TEST(SplitWideVectors, SelectsComparisonsCastsAndIntrinsicsAreCutLaneForLane) {
  Var i = Var::make("i");
  Expr r = ramp(i * 32, 32);
  Expr a = load(A, r), b = load(B, r);
  Expr lane = ir::cast(DataType::float32(32), ramp(i * 32, 32));
  PrimFunc f = func(loop(
      i, 8,
      buffer_store(C, r, ir::select(a < b, ir::exp(a), ir::max(b, lane)) + ir::sqrt(ir::fabs(a)))));
  PrimFunc out = split_wide_vectors(f, 16);
  EXPECT_EQ(count_stores(out->body), 8) << to_string(out);
  expect_same_results(f, out);
}

TEST(SplitWideVectors, ScalarCodeIsLeftAlone) {
  Var i = Var::make("i");
  PrimFunc f = func(loop(i, 256, buffer_store(C, i, load(A, i) + load(B, i))));
  EXPECT_TRUE(split_wide_vectors(f, 16).same_as(f));
}

}  // namespace
}  // namespace tensortune::lower
