// The "vectorize" pass alone: what becomes vector code, what falls back to a
// (hinted) loop, what must run serially, and the tir.disable_vectorize option.
#include <gtest/gtest.h>

#include "lower/pass_test_util.h"
#include "tensortune/ir/pass_context.h"
#include "tensortune/lower/passes.h"

namespace tensortune::lower {
namespace {

using testing::count_loops;
using testing::expect_same;
using testing::expect_same_results;
using testing::load;
using testing::loop;

Buffer A = Buffer::make("A", DataType::float32(), {256});
Buffer B = Buffer::make("B", DataType::float32(), {256});
Buffer C = Buffer::make("C", DataType::float32(), {256});
Buffer S = Buffer::make("S", DataType::float32(), {1});

PrimFunc func(Stmt body) { return PrimFunc::make("f", {A, B, S, C}, 3, std::move(body)); }

Expr ramp16(Expr base) { return ir::ramp(std::move(base), 1, 16); }

ForKind kind_of_first_loop(const PrimFunc& f) {
  ForKind kind = ForKind::kSerial;
  bool found = false;
  visit_stmts(f->body, [&](const Stmt& s) {
    if (!found && s->kind() == StmtKind::kFor) {
      kind = static_cast<const ForNode&>(*s).for_kind;
      found = true;
    }
  });
  EXPECT_TRUE(found) << to_string(f);
  return kind;
}

TEST(Vectorize, ElementwiseBecomesVectorLoadsAndStores) {
  Var i = Var::make("i");
  PrimFunc f = func(loop(i, 16, buffer_store(C, i, load(A, i) + load(B, i)), ForKind::kVectorized));
  PrimFunc out = vectorize_pass(f);
  expect_same(out->body, buffer_store(C, ramp16(0), load(A, ramp16(0)) + load(B, ramp16(0))));
  expect_same_results(f, out);
}

TEST(Vectorize, IndexAffineInLoopVariableBecomesRampBase) {
  Var io = Var::make("io"), ii = Var::make("ii");
  Expr idx = io * 16 + ii;
  PrimFunc f = func(
      loop(io, 16, loop(ii, 16, buffer_store(C, idx, load(A, idx) * 2.0f), ForKind::kVectorized)));
  PrimFunc out = vectorize_pass(f);
  Expr r = ramp16(io * 16);
  expect_same(out->body, loop(io, 16, buffer_store(C, r, load(A, r) * ir::broadcast(2.0f, 16))));
  expect_same_results(f, out);
}

TEST(Vectorize, WideningCastsOfTheIndexKeepTheRamp) {
  // Lowering computes flat indices in int64 from int32 loop variables.
  Var io = Var::make("io"), ii = Var::make("ii");
  auto i64 = [](Expr e) { return ir::cast(DataType::int64(), std::move(e)); };
  Expr idx = ir::int_imm(0, DataType::int64()) + i64(io) * ir::int_imm(16, DataType::int64()) +
             i64(ii) * ir::int_imm(1, DataType::int64());
  PrimFunc f = func(
      loop(io, 16,
           loop(ii, 16, buffer_store(C, idx, load(A, idx) + load(B, idx)), ForKind::kVectorized)));
  PrimFunc out = vectorize_pass(f);
  Expr r =
      ir::ramp(i64(io) * ir::int_imm(16, DataType::int64()), ir::int_imm(1, DataType::int64()), 16);
  expect_same(out->body, loop(io, 16, buffer_store(C, r, load(A, r) + load(B, r))));
  expect_same_results(f, out);
}

TEST(Vectorize, InvariantLoadIsBroadcast) {
  Var i = Var::make("i");
  PrimFunc f = func(loop(i, 16, buffer_store(C, i, load(A, i) * load(S, 0)), ForKind::kVectorized));
  expect_same(vectorize_pass(f)->body,
              buffer_store(C, ramp16(0), load(A, ramp16(0)) * ir::broadcast(load(S, 0), 16)));
}

TEST(Vectorize, ReductionUpdateInSpatialLoopIsVectorLoadAddStore) {
  Var i = Var::make("i"), k = Var::make("k");
  PrimFunc f = func(loop(i, 16, loop(k, 8, buffer_store(C, i, load(C, i) + load(A, k * 16 + i))),
                         ForKind::kVectorized));
  PrimFunc out = vectorize_pass(f);
  expect_same(out->body,
              loop(k, 8, buffer_store(C, ramp16(0), load(C, ramp16(0)) + load(A, ramp16(k * 16)))));
  expect_same_results(f, out);
}

TEST(Vectorize, LetOfVectorValueGetsVectorVariable) {
  Var i = Var::make("i"), x = Var::make("x", DataType::float32());
  PrimFunc f = func(
      loop(i, 16, let_stmt(x, load(A, i) * 2.0f, buffer_store(C, i, x + x)), ForKind::kVectorized));
  PrimFunc out = vectorize_pass(f);
  Var xv = Var::make("x", DataType::float32(16));
  expect_same(out->body, let_stmt(xv, load(A, ramp16(0)) * ir::broadcast(2.0f, 16),
                                  buffer_store(C, ramp16(0), xv + xv)));
  // (The reference interpreter keeps only lane 0 of a let's value, so the
  // result is checked by the compiled end-to-end tests instead.)
}

TEST(Vectorize, VectorFormIntrinsicIsVectorized) {
  Var i = Var::make("i");
  PrimFunc f = func(loop(i, 8, buffer_store(C, i, ir::sqrt(load(A, i))), ForKind::kVectorized));
  expect_same(vectorize_pass(f)->body,
              buffer_store(C, ir::ramp(0, 1, 8), ir::sqrt(load(A, ir::ramp(0, 1, 8)))));
}

TEST(Vectorize, ReductionAcrossTheLoopRunsSerially) {
  Var k = Var::make("k");
  PrimFunc f = func(loop(k, 16, buffer_store(C, 0, load(C, 0) + load(A, k)), ForKind::kVectorized));
  PrimFunc out = vectorize_pass(f);
  EXPECT_EQ(kind_of_first_loop(out), ForKind::kSerial);
  expect_same_results(f, out);
}

TEST(Vectorize, CrossIterationDependenceRunsSerially) {
  Var i = Var::make("i");
  PrimFunc f = func(loop(i, 16, buffer_store(C, i, load(C, i + 1) * 2.0f), ForKind::kVectorized));
  EXPECT_EQ(kind_of_first_loop(vectorize_pass(f)), ForKind::kSerial);
}

TEST(Vectorize, UnsupportedBodiesStayHintedLoops) {
  Var i = Var::make("i"), n = Var::make("n");
  auto stays_vectorized_loop = [](const Stmt& body) {
    PrimFunc f = func(body);
    PrimFunc out = vectorize_pass(f);
    EXPECT_TRUE(out.same_as(f)) << to_string(out);
  };
  // A condition that depends on the loop variable.
  stays_vectorized_loop(
      loop(i, 16, if_then_else(i < n, buffer_store(C, i, load(A, i))), ForKind::kVectorized));
  // A strided load.
  stays_vectorized_loop(loop(i, 16, buffer_store(C, i, load(A, i * 2)), ForKind::kVectorized));
  // An intrinsic without a vector form.
  stays_vectorized_loop(loop(i, 16, buffer_store(C, i, ir::log(load(A, i))), ForKind::kVectorized));
  // A select over loads that depends on the loop variable.
  stays_vectorized_loop(
      loop(i, 16, buffer_store(C, i, ir::select(i < 8, load(A, i), 0.0f)), ForKind::kVectorized));
  // Extents that are not a power of two, or too large.
  stays_vectorized_loop(loop(i, 12, buffer_store(C, i, load(A, i)), ForKind::kVectorized));
  stays_vectorized_loop(loop(i, 128, buffer_store(C, i, load(A, i)), ForKind::kVectorized));
  // A strided store, whose iterations are still independent.
  Var j = Var::make("j"), k = Var::make("k");
  stays_vectorized_loop(
      loop(j, 16, loop(k, 8, buffer_store(C, j * 8 + k, load(A, k))), ForKind::kVectorized));
}

TEST(Vectorize, DisableVectorizeMakesLoopsSerial) {
  Var i = Var::make("i");
  PrimFunc f = func(loop(i, 16, buffer_store(C, i, load(A, i)), ForKind::kVectorized));
  ir::PassContextGuard guard(
      ir::PassContext::make(ir::PassContextOptions().with_config("tir.disable_vectorize", true)));
  PrimFunc out = vectorize_pass(f);
  expect_same(out->body, loop(i, 16, buffer_store(C, i, load(A, i))));
  EXPECT_EQ(count_loops(out->body, ForKind::kVectorized), 0);
}

}  // namespace
}  // namespace tensortune::lower
