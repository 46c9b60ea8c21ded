// The "unroll" pass alone, and the effect of tir.max_unroll_step.
#include <gtest/gtest.h>

#include "lower/pass_test_util.h"
#include "tensortune/ir/pass_context.h"
#include "tensortune/lower/passes.h"

namespace tensortune::lower {
namespace {

using testing::count_loops;
using testing::count_stores;
using testing::expect_same;
using testing::expect_same_results;
using testing::load;
using testing::loop;

Buffer A = Buffer::make("A", DataType::float32(), {64});
Buffer B = Buffer::make("B", DataType::float32(), {64});

PrimFunc func(Stmt body) { return PrimFunc::make("f", {A, B}, 1, std::move(body)); }

PrimFunc unroll_with(const PrimFunc& f, int64_t max_step) {
  ir::PassContextGuard guard(
      ir::PassContext::make(ir::PassContextOptions().with_config("tir.max_unroll_step", max_step)));
  return unroll_pass(f);
}

TEST(Unroll, ReplicatesBodyPerIteration) {
  Var i = Var::make("i");
  PrimFunc f = func(loop(i, 4, buffer_store(B, i, load(A, i) * 2.0f), ForKind::kUnrolled));
  PrimFunc out = unroll_pass(f);  // default tir.max_unroll_step is 64
  std::vector<Stmt> copies;
  for (int k = 0; k < 4; ++k) copies.push_back(buffer_store(B, k, load(A, k) * 2.0f));
  expect_same(out->body, seq(copies));
  expect_same_results(f, out);
}

TEST(Unroll, NonZeroMinIsAddedToEachCopy) {
  Var i = Var::make("i");
  Var n = Var::make("n");
  PrimFunc f = func(for_loop(i, n, 2, ForKind::kUnrolled, buffer_store(B, i, 1.0f)));
  expect_same(unroll_pass(f)->body,
              seq({buffer_store(B, n + 0, 1.0f), buffer_store(B, n + 1, 1.0f)}));
}

TEST(Unroll, MaxUnrollStepBoundsTheTotalReplication) {
  Var i = Var::make("i"), j = Var::make("j");
  PrimFunc f = func(
      loop(i, 4, loop(j, 4, buffer_store(B, i * 4 + j, load(A, j * 4 + i)), ForKind::kUnrolled),
           ForKind::kUnrolled));
  // 16 copies fit in 16: both loops disappear.
  PrimFunc all = unroll_with(f, 16);
  EXPECT_EQ(count_stores(all->body), 16);
  EXPECT_EQ(count_loops(all->body, ForKind::kUnrolled), 0);
  expect_same_results(f, all);
  // 16 copies do not fit in 8: the inner loop is unrolled; the outer, whose
  // hint would ask the C compiler for 4 copies of those 4, runs serially.
  PrimFunc inner = unroll_with(f, 8);
  EXPECT_EQ(count_stores(inner->body), 4);
  EXPECT_EQ(count_loops(inner->body, ForKind::kUnrolled), 0);
  EXPECT_EQ(count_loops(inner->body, ForKind::kSerial), 1);
  expect_same_results(f, inner);
  // Too small for either, and for either's hint: both run serially.
  PrimFunc neither = unroll_with(f, 3);
  EXPECT_EQ(count_stores(neither->body), 1);
  EXPECT_EQ(count_loops(neither->body, ForKind::kSerial), 2);
  // 0 disables unrolling: the loops run serially.
  PrimFunc none = unroll_with(f, 0);
  EXPECT_EQ(count_stores(none->body), 1);
  EXPECT_EQ(count_loops(none->body, ForKind::kUnrolled), 0);
  EXPECT_EQ(count_loops(none->body, ForKind::kSerial), 2);
}

TEST(Unroll, ALongLoopKeepsItsHintWhileTheHintedCopiesFit) {
  Var i = Var::make("i"), j = Var::make("j");
  // 64 iterations of one store: too many to replicate under 16, but the
  // hint's 8 copies fit, so it stays an unroll-hinted loop.
  PrimFunc one = func(loop(i, 64, buffer_store(B, i, load(A, i) + 1.0f), ForKind::kUnrolled));
  EXPECT_TRUE(unroll_with(one, 16).same_as(one));
  // Around a body replicated 4 times, 8 hinted copies are 32: past 16, serial.
  PrimFunc wide = func(loop(
      i, 16, loop(j, 4, buffer_store(B, i * 4 + j, load(A, i * 4 + j) + 1.0f), ForKind::kUnrolled),
      ForKind::kUnrolled));
  PrimFunc out = unroll_with(wide, 16);
  EXPECT_EQ(count_stores(out->body), 4);
  EXPECT_EQ(count_loops(out->body, ForKind::kUnrolled), 0);
  EXPECT_EQ(count_loops(out->body, ForKind::kSerial), 1);
  expect_same_results(wide, out);
  // Under 32 they fit, and the outer loop keeps its hint.
  EXPECT_EQ(count_loops(unroll_with(wide, 32)->body, ForKind::kUnrolled), 1);
}

TEST(Unroll, OtherLoopsAreLeftAlone) {
  Var i = Var::make("i"), n = Var::make("n");
  PrimFunc f = func(seq({loop(i, 4, buffer_store(B, i, 1.0f)),
                         for_loop(i, 0, n, ForKind::kUnrolled, buffer_store(B, i, 1.0f))}));
  EXPECT_TRUE(unroll_pass(f).same_as(f));
}

}  // namespace
}  // namespace tensortune::lower
