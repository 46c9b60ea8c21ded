// The lowering pipeline: pass order, instruments, disabled passes, and that
// the whole pipeline keeps what a kernel computes.
#include "tensortune/lower/pipeline.h"

#include <gtest/gtest.h>

#include "lower/pass_test_util.h"
#include "tensortune/ir/pass_context.h"

namespace tensortune::lower {
namespace {

using testing::count_loops;
using testing::count_stores;
using testing::expect_same_results;
using testing::load;
using testing::loop;

Buffer A = Buffer::make("A", DataType::float32(), {100});
Buffer C = Buffer::make("C", DataType::float32(), {100});

// C = A * 2 over 100 elements, split by 16 with a guard, inner loop vectorized,
// plus a partial row through a local buffer with an unrolled loop.
PrimFunc sample() {
  Var io = Var::make("io"), ii = Var::make("ii"), u = Var::make("u");
  Expr idx = io * 16 + ii;
  Buffer t = Buffer::make("T", DataType::float32(), {4}, {}, "local");
  Stmt main = loop(io, 7,
                   loop(ii, 16, if_then_else(idx < 100, buffer_store(C, idx, load(A, idx) * 2.0f)),
                        ForKind::kVectorized));
  Stmt tail =
      loop(io, 2,
           allocate(t, seq({loop(u, 4, buffer_store(t, u, load(A, io * 4 + u)), ForKind::kUnrolled),
                            loop(u, 4, buffer_store(C, io * 4 + u, load(t, u) + 1.0f),
                                 ForKind::kUnrolled)})));
  return PrimFunc::make("sample", {A, C}, 1, seq({main, tail}));
}

TEST(Pipeline, PassOrder) {
  std::vector<std::string> expected = {"simplify",        "remove_redundant_conditions",
                                       "partition_loops", "remove_redundant_conditions",
                                       "vectorize",       "unroll",
                                       "storage_rewrite", "simplify"};
  EXPECT_EQ(pipeline_pass_names(), expected);
}

TEST(Pipeline, InstrumentsSeeEveryPass) {
  ir::PassContextGuard guard(ir::PassContext::make(
      ir::PassContextOptions().with_instrument(ir::InstrumentSpec::make("pass_names"))));
  run_pipeline(sample());
  nlohmann::json expected = pipeline_pass_names();
  EXPECT_EQ(guard.instrument_results()["pass_names"], expected);
}

// The passes that fit a kernel to the target's vectors are the pipeline's
// too: listed, run in order through ir::run_pass, seen by instruments,
// skipped when disabled, and they keep what the kernel computes.
TEST(Pipeline, TargetPassesAreListedSeenAndDisabledLikeTheOthers) {
  EXPECT_EQ(target_pipeline_pass_names(),
            (std::vector<std::string>{"vectorize_reductions", "split_wide_vectors"}));
  PrimFunc lowered = run_pipeline(sample());
  {
    ir::PassContextGuard guard(ir::PassContext::make(
        ir::PassContextOptions().with_instrument(ir::InstrumentSpec::make("pass_names"))));
    PrimFunc out = run_target_pipeline(lowered, 16);
    nlohmann::json expected = target_pipeline_pass_names();
    EXPECT_EQ(guard.instrument_results()["pass_names"], expected);
    expect_same_results(lowered, out);
  }
  ir::PassContextGuard guard(
      ir::PassContext::make(ir::PassContextOptions()
                                .with_disabled("split_wide_vectors")
                                .with_instrument(ir::InstrumentSpec::make("pass_names"))));
  run_target_pipeline(lowered, 16);
  EXPECT_EQ(guard.instrument_results()["pass_names"], nlohmann::json({"vectorize_reductions"}));
}

TEST(Pipeline, KeepsResultsAndDoesNotChangeItsInput) {
  PrimFunc f = sample();
  Ref<PrimFuncNode> copy = deep_copy(f);
  PrimFunc out = run_pipeline(f);
  EXPECT_TRUE(structural_equal(f, copy));
  EXPECT_EQ(count_loops(out->body, ForKind::kUnrolled), 0);
  expect_same_results(f, out);
}

TEST(Pipeline, DisabledPassIsSkipped) {
  PrimFunc f = sample();
  int unrolled_stores = count_stores(run_pipeline(f)->body);
  ir::PassContextGuard guard(
      ir::PassContext::make(ir::PassContextOptions().with_disabled("unroll")));
  PrimFunc out = run_pipeline(f);
  EXPECT_EQ(count_loops(out->body, ForKind::kUnrolled), 2);
  EXPECT_LT(count_stores(out->body), unrolled_stores);
  expect_same_results(f, out);
}

}  // namespace
}  // namespace tensortune::lower
