// Hand-written schedules, each checked against the reference evaluator by
// interpreting the lowered kernel (no compiler involved).
#include <gtest/gtest.h>

#include "common/schedule_check.h"
#include "common/test_util.h"
#include "tensortune/lower/lower.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"
#include "tensortune/te/ops.h"
#include "tensortune/te/workload.h"

namespace tensortune::schedule {
namespace {

using testing::schedule_matches_reference;

te::WorkloadTensors matmul_tensors(int64_t m, int64_t n, int64_t k) {
  te::Tensor a = te::placeholder({m, k}, ir::DataType::float32(), "A");
  te::Tensor b = te::placeholder({k, n}, ir::DataType::float32(), "B");
  return {{a, b}, {te::matmul(a, b)}};
}

// Stage indices of the matmul DAG: 0 A, 1 B, 2 matmul.
constexpr int kMatmul = 2;

TEST(Lowering, NaiveSchedule) {
  EXPECT_TRUE(schedule_matches_reference(matmul_tensors(5, 7, 3), State::make()));
}

TEST(Lowering, NonDivisibleSplits) {
  State s = State::make({split(kMatmul, 0, {4}), split(kMatmul, 2, {3, 2}),
                         split(kMatmul, 5, {2}, /*inner_to_outer=*/false)});
  EXPECT_TRUE(schedule_matches_reference(matmul_tensors(10, 13, 7), s));
}

TEST(Lowering, TiledAndReordered) {
  // i.0 i.1 j.0 j.1 k -> i.0 j.0 k i.1 j.1
  State s = State::make({split(kMatmul, 0, {4}), split(kMatmul, 2, {8}),
                         reorder(kMatmul, {0, 2, 4, 1, 3}),
                         annotate(kMatmul, 4, IterAnnotation::kVectorize),
                         annotate(kMatmul, 0, IterAnnotation::kParallel)});
  EXPECT_TRUE(schedule_matches_reference(matmul_tensors(16, 24, 9), s));
}

TEST(Lowering, FusedThenSplit) {
  State s = State::make({fuse(kMatmul, {0, 1}), split(kMatmul, 0, {5})});
  EXPECT_TRUE(schedule_matches_reference(matmul_tensors(6, 7, 4), s));
}

TEST(Lowering, CacheWriteComputeAtTiles) {
  // matmul.local computed at the j.0 tile loop of the copy-out stage.
  State s = State::make({cache_write(kMatmul, "local"),
                         // stage 2: matmul.local, stage 3: matmul (copy)
                         split(3, 0, {4}), split(3, 2, {8}), reorder(3, {0, 2, 1, 3}),
                         compute_at(2, 3, 1), split(2, 2, {2}), reorder(2, {2, 0, 3, 1}),
                         annotate(3, 3, IterAnnotation::kVectorize)});
  EXPECT_TRUE(schedule_matches_reference(matmul_tensors(12, 16, 6), s));
  EXPECT_TRUE(schedule_matches_reference(matmul_tensors(10, 13, 5), s));  // ragged tiles
}

TEST(Lowering, RfactorOfAReduction) {
  State s = State::make({split(kMatmul, 2, {4}), rfactor(kMatmul, 3, 1)});
  EXPECT_TRUE(schedule_matches_reference(matmul_tensors(3, 5, 10), s));
  State outer = State::make({split(kMatmul, 2, {4}), rfactor(kMatmul, 2, 0)});
  EXPECT_TRUE(schedule_matches_reference(matmul_tensors(3, 5, 10), outer));
}

TEST(Lowering, ZeroPaddingConvWithInlineAndComputeAt) {
  te::Tensor data = te::placeholder({1, 3, 7, 7}, ir::DataType::float32(), "data");
  te::Tensor kernel = te::placeholder({4, 3, 3, 3}, ir::DataType::float32(), "kernel");
  te::Tensor out = te::conv2d_nchw(data, kernel, te::Conv2dAttrsNode::uniform(2, 1));
  te::WorkloadTensors t{{data, kernel}, {out}};
  ComputeDAG dag(t);
  int pad = dag.stage_named("pad_data");
  ASSERT_GE(pad, 0) << dag.str();
  int conv = dag.num_stages() - 1;
  EXPECT_TRUE(schedule_matches_reference(t, State::make()));
  EXPECT_TRUE(schedule_matches_reference(t, State::make({compute_inline(pad)})));
  // The padded input computed per output row: a region of the pad stage.
  EXPECT_TRUE(schedule_matches_reference(t, State::make({compute_at(pad, conv, 2)})));
  EXPECT_TRUE(
      schedule_matches_reference(t, State::make({split(conv, 3, {2}), compute_at(pad, conv, 3)})));
}

TEST(Lowering, CacheReadAndStorageAlign) {
  auto t = matmul_tensors(8, 8, 8);
  State s = State::make({cache_read(1, "local", {kMatmul}), storage_align(2, 0, 16, 3),
                         split(3, 0, {4}), compute_at(2, 3, 0)});
  EXPECT_TRUE(schedule_matches_reference(t, s));
}

TEST(Lowering, StorageOrderStoresAStagesDimensionsInThatOrder) {
  // B's copy (stage 2, [4, 8]) stored transposed: at the root; at the
  // reader's outer loop (the whole copy); at its column loop (a [4, 1]
  // region that starts at the column); and with its rows' stride aligned
  // too. The strides follow the order, the answer stays.
  auto t = matmul_tensors(6, 8, 4);
  const int copy = 2, matmul = 3;
  struct Case {
    std::vector<Step> more;
    std::vector<int64_t> strides;
  };
  const Case cases[] = {
      {{}, {1, 4}},
      {{compute_at(copy, matmul, 0)}, {1, 4}},
      {{compute_at(copy, matmul, 1)}, {1, 4}},
      {{storage_align(copy, 1, 8, 3)}, {1, 11}},
  };
  for (const Case& c : cases) {
    std::vector<Step> steps = {cache_read(1, "local", {kMatmul}), storage_order(copy, {1, 0})};
    steps.insert(steps.end(), c.more.begin(), c.more.end());
    State s = State::make(steps);
    SCOPED_TRACE(c.more.empty() ? std::string("at the root") : c.more[0]->str());
    EXPECT_TRUE(schedule_matches_reference(t, s));
    LoopState loops = replay(ComputeDAG(t), s);
    ir::Buffer copied;
    lower::visit_stmts(lower::lower_schedule(loops, "k")->body, [&](const lower::Stmt& st) {
      if (st->kind() == lower::StmtKind::kAllocate)
        copied = static_cast<const lower::AllocateNode&>(*st).buffer;
    });
    ASSERT_TRUE(copied);
    EXPECT_EQ(copied->strides, c.strides);
  }
  // The output's layout is the caller's; an order names each dimension once.
  ComputeDAG dag(t);
  EXPECT_TT_ERROR(replay(dag, State::make({storage_order(kMatmul, {1, 0})})), kInvalidArgument,
                  "its layout is the caller's");
  EXPECT_TT_ERROR(
      replay(dag, State::make({cache_read(1, "local", {kMatmul}), storage_order(copy, {0, 0})})),
      kInvalidArgument, "each of its 2 dimensions 0..1 once, got [0,0]");
}

TEST(Lowering, PragmaUnrollMarksLoops) {
  auto t = matmul_tensors(4, 4, 4);
  State s = State::make({split(kMatmul, 0, {2}), pragma(kMatmul, 0, "auto_unroll_max_step=16")});
  EXPECT_TRUE(schedule_matches_reference(t, s));
  LoopState loops = replay(ComputeDAG(t), s);
  std::string ir = lower::to_string(lower::lower_schedule(loops, "k"));
  EXPECT_NE(ir.find("unrolled for"), std::string::npos) << ir;
}

/// The lowered IR of `t` under `steps` then `pragma` on the matmul's outer
/// loop, after checking the schedule against the reference.
std::string lowered_with_pragma(const te::WorkloadTensors& t, std::vector<Step> steps,
                                const std::string& pragma_text) {
  steps.push_back(pragma(kMatmul, 0, pragma_text));
  State s = State::make(steps);
  EXPECT_TRUE(schedule_matches_reference(t, s));
  return lower::to_string(lower::lower_schedule(replay(ComputeDAG(t), s), "k"));
}

/// The lowered IR of `t` under `steps` with auto_unroll_max_step at `limit`
/// and at `limit - 1`: a loop nest counted as `limit` statements unrolls in
/// the first and stays rolled in the second.
std::pair<std::string, std::string> lowered_at_and_below(const te::WorkloadTensors& t,
                                                         const std::vector<Step>& steps,
                                                         int limit) {
  auto at = [&](int l) {
    return lowered_with_pragma(t, steps, "auto_unroll_max_step=" + std::to_string(l));
  };
  return {at(limit), at(limit - 1)};
}

/// Whether `loop` unrolls in the first of `lowered` (lowered_at_and_below)
/// and stays rolled in the second; with `guarded`, under a guard (an if).
::testing::AssertionResult unrolls_at_the_limit_only(
    const std::pair<std::string, std::string>& lowered, const std::string& loop,
    bool guarded = false) {
  if (guarded && lowered.first.find("if (") == std::string::npos) {
    return ::testing::AssertionFailure() << "no guard:\n" << lowered.first;
  }
  const std::string unrolled = "unrolled for (" + loop;
  if (lowered.first.find(unrolled) == std::string::npos) {
    return ::testing::AssertionFailure() << loop << " stays rolled at the limit:\n"
                                         << lowered.first;
  }
  if (lowered.second.find(unrolled) != std::string::npos) {
    return ::testing::AssertionFailure() << loop << " unrolls below the limit:\n" << lowered.second;
  }
  return ::testing::AssertionSuccess();
}

TEST(Lowering, PragmaUnrollCountsAVectorizedLoopOnce) {
  // i(8) k(2) j(16, vectorized) under auto_unroll_max_step=16: the vector
  // loop is one statement, so the i and k loops (16 copies) unroll, as a
  // register tile's row loop must for its accumulators to stay in registers.
  // One more row is past the limit: the row loop stays rolled.
  auto [at, below] = lowered_at_and_below(
      matmul_tensors(8, 16, 2),
      {reorder(kMatmul, {0, 2, 1}), annotate(kMatmul, 2, IterAnnotation::kVectorize)}, 16);
  EXPECT_NE(at.find("unrolled for (k"), std::string::npos) << at;
  EXPECT_NE(at.find("vectorized for (j"), std::string::npos) << at;
  EXPECT_EQ(below.find("unrolled for (i"), std::string::npos) << below;
}

TEST(Lowering, PragmaUnrollCountsAWideVectorizedLoopByItsWidestVectors) {
  // j(64 floats, vectorized) is at least four 64-byte vectors, so k(2) over
  // it is 8 statements: unrolled under auto_unroll_max_step=8, not under 7.
  EXPECT_TRUE(unrolls_at_the_limit_only(
      lowered_at_and_below(
          matmul_tensors(4, 64, 2),
          {reorder(kMatmul, {0, 2, 1}), annotate(kMatmul, 2, IterAnnotation::kVectorize)}, 8),
      "k"));
}

TEST(Lowering, PragmaUnrollCountsTheLanesOfAGuardedVectorizedLoop) {
  // j split by 48 over 64 columns: the vectorized j.1 is guarded
  // (j.0 * 48 + j.1 < 64), a loop over lanes in C, and counts its 48 lanes.
  EXPECT_TRUE(unrolls_at_the_limit_only(
      lowered_at_and_below(matmul_tensors(2, 64, 2),
                           {split(kMatmul, 1, {48}), reorder(kMatmul, {0, 1, 3, 2}),
                            annotate(kMatmul, 3, IterAnnotation::kVectorize)},
                           96),
      "k", true));
}

TEST(Lowering, PragmaUnrollCountsAVectorizedLoopUnderARowGuardByItsVectors) {
  // i split by 3 over 8 rows: the last row tile is ragged, and the guard
  // (i.0 * 3 + i.1 < 8) inside the vectorized j guards whole vector
  // statements, not lanes. So the 3-row tile counts 3 statements and
  // unrolls, as a dense layer's ragged register tile must for its
  // accumulators to stay in registers.
  EXPECT_TRUE(unrolls_at_the_limit_only(
      lowered_at_and_below(matmul_tensors(8, 16, 2),
                           {split(kMatmul, 0, {3}), reorder(kMatmul, {0, 3, 1, 2}),
                            annotate(kMatmul, 3, IterAnnotation::kVectorize)},
                           3),
      "i", true));
}

TEST(Lowering, TileLevelsTheConsumerCoversShrinkToOneIteration) {
  // matmul.local tiled i -> i0 i1(4) i2(8) i3(2) and computed at the copy's
  // outer i loop, each iteration of which covers 16 rows: i3 keeps 2, i2 8,
  // and i1 (length 4) gets one iteration, not four of which three are
  // guarded off.
  auto t = matmul_tensors(64, 8, 4);
  State s = State::make({cache_write(kMatmul, "local"), split(2, 0, {4, 8, 2}), split(3, 0, {16}),
                         compute_at(2, 3, 0)});
  EXPECT_TRUE(schedule_matches_reference(t, s));
  std::string ir = lower::to_string(lower::lower_schedule(replay(ComputeDAG(t), s), "k"));
  EXPECT_NE(ir.find("for (i_1_1, 0, 1)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("for (i_2, 0, 8)"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("if ("), std::string::npos) << ir;
  // A region that is not a multiple of the tiles keeps its guards.
  EXPECT_TRUE(schedule_matches_reference(
      t, State::make({cache_write(kMatmul, "local"), split(2, 0, {4, 3, 2}), split(3, 0, {10}),
                      compute_at(2, 3, 0)})));
}

TEST(Steps, FusingTheLoopAStageIsComputedAtKeepsItThere) {
  auto t = matmul_tensors(12, 16, 6);
  // The local stage at j.0 (position 1); fusing i.0 and j.0 puts it in the fused loop.
  State s = State::make({cache_write(kMatmul, "local"), split(3, 0, {4}), split(3, 2, {8}),
                         reorder(3, {0, 2, 1, 3}), compute_at(2, 3, 1), fuse(3, {0, 1}),
                         annotate(3, 0, IterAnnotation::kParallel)});
  EXPECT_TRUE(schedule_matches_reference(t, s));
  LoopState loops = replay(ComputeDAG(t), s);
  EXPECT_EQ(loops.stage(3).leaf_position(loops.stage(2).attach_iter), 0);
  // Not when the loop with the stage is not the innermost of the fused ones.
  EXPECT_TT_ERROR(
      replay(ComputeDAG(t), State::make({cache_write(kMatmul, "local"), split(3, 0, {4}),
                                         compute_at(2, 3, 0), fuse(3, {0, 1})})),
      kInvalidArgument, "not the innermost of the fused loops");
}

TEST(Lowering, LayoutRewriteReadsTheWeightInTheTilesOrder) {
  // dense: out[i, j] = sum_k data[i, k] * weight[j, k], its loops ordered
  // i0 j0 k0 i1 k1 j1: the weight is packed as [j0][k0][k1][j1], so that the
  // innermost loop j1 reads it with unit stride.
  auto w = te::workload_tensors(te::make_named_workload_from_text("dense", "6,16,12"));
  ComputeDAG dag(w);
  const int kDense = 2, kWeight = 1;
  State s = State::make({split(kDense, 0, {3}), split(kDense, 2, {4}), split(kDense, 4, {3}),
                         reorder(kDense, {0, 2, 4, 1, 5, 3}), layout_rewrite(kWeight)});
  EXPECT_TRUE(schedule_matches_reference(w, s));
  LoopState loops = replay(dag, s);
  lower::PackedLayout layout = lower::packed_layout(loops, kWeight);
  ASSERT_EQ(layout.parts.size(), 4u);
  EXPECT_EQ(layout.elements(), 16 * 12);
  // j.0 k.0 k.1 j.1: the reader's loop order, fused or not.
  EXPECT_EQ(layout.parts[0].dim, 0);
  EXPECT_EQ(layout.parts[1].dim, 1);
  EXPECT_EQ(layout.parts[2].dim, 1);
  EXPECT_EQ(layout.parts[3].dim, 0);
  EXPECT_EQ(layout.parts[3].extent, 4);
  std::vector<lower::Packer> packers = lower::lower_packers(loops, "kernel");
  ASSERT_EQ(packers.size(), 1u);
  EXPECT_EQ(packers[0].input, 1);
  // Ragged tiles pad the layout; a fused, parallel outer loop is still read in order.
  State ragged =
      State::make({split(kDense, 1, {5}), split(kDense, 3, {5}), reorder(kDense, {0, 1, 3, 2, 4}),
                   fuse(kDense, {0, 1}), annotate(kDense, 0, IterAnnotation::kParallel),
                   layout_rewrite(kWeight)});
  EXPECT_TRUE(schedule_matches_reference(w, ragged));
  EXPECT_EQ(lower::packed_layout(replay(dag, ragged), kWeight).elements(), 20 * 15);
  // Through a cache_write: the local stage reads the weight.
  State local =
      State::make({cache_write(kDense, "local"), split(2, 1, {4}), layout_rewrite(kWeight)});
  EXPECT_TRUE(schedule_matches_reference(w, local));
}

TEST(Steps, LayoutRewriteOfInputsReadAtAxes) {
  auto w = te::workload_tensors(te::make_named_workload_from_text("dense", "8,8,12"));
  ComputeDAG dag(w);
  const int kDense = 2;
  EXPECT_TT_ERROR(replay(dag, State::make({layout_rewrite(1), layout_rewrite(1)})),
                  kInvalidArgument, "rewritten already");
  EXPECT_TT_ERROR(replay(dag, State::make({layout_rewrite(kDense)})), kInvalidArgument,
                  "not an input");
  // The data is no constant: the kernel packs it itself, taking it as it is,
  // and only the weight gets a packer of its own.
  State both =
      State::make({split(kDense, 1, {4}), split(kDense, 3, {3}), reorder(kDense, {0, 1, 3, 2, 4}),
                   fuse(kDense, {0, 1}), annotate(kDense, 0, IterAnnotation::kParallel),
                   layout_rewrite(0), layout_rewrite(1)});
  LoopState loops = replay(dag, both);
  EXPECT_FALSE(lower::packed_outside(loops, 0));
  EXPECT_TRUE(lower::packed_outside(loops, 1));
  std::vector<lower::Packer> packers = lower::lower_packers(loops, "kernel");
  ASSERT_EQ(packers.size(), 1u);
  EXPECT_EQ(packers[0].input, 1);
  lower::PrimFunc f = lower::lower_schedule(loops, "kernel");
  EXPECT_EQ(f->params[0]->shape, (std::vector<int64_t>{8, 12}));
  EXPECT_TRUE(schedule_matches_reference(w, both));
  // A convolution reads its data at computed indices; only the kernel qualifies.
  auto conv =
      te::workload_tensors(te::make_named_workload_from_text("conv2d_nhwc", "1,3,5,5,4,3,3,1,0"));
  ComputeDAG conv_dag(conv);
  EXPECT_TT_ERROR(replay(conv_dag, State::make({layout_rewrite(0)})), kInvalidArgument,
                  "at computed indices");
  State s = State::make({split(2, 3, {2}), layout_rewrite(1)});
  EXPECT_TRUE(schedule_matches_reference(conv, s));
  // A read at one axis twice (a diagonal) has no layout of one part per axis.
  te::Tensor a = te::placeholder({4, 4}, ir::DataType::float32(), "A");
  te::Tensor diag = te::compute({4}, [&](const std::vector<ir::Var>& i) { return a(i[0], i[0]); });
  ComputeDAG diag_dag(te::WorkloadTensors{{a}, {diag}});
  EXPECT_TT_ERROR(replay(diag_dag, State::make({layout_rewrite(0)})), kInvalidArgument,
                  "at one axis twice");
}

/// Conditions guarding a store to the buffer named `name` in `f`.
int guarded_stores(const lower::PrimFunc& f, const std::string& name) {
  int n = 0;
  lower::visit_stmts(f->body, [&](const lower::Stmt& s) {
    if (s->kind() != lower::StmtKind::kIfThenElse) return;
    lower::visit_stmts(static_cast<const lower::IfThenElseNode&>(*s).then_case,
                       [&](const lower::Stmt& x) {
                         n += x->kind() == lower::StmtKind::kBufferStore &&
                              static_cast<const lower::BufferStoreNode&>(*x).buffer->name == name;
                       });
  });
  return n;
}

TEST(Lowering, ARaggedTileOfPackedInputsComputesItsPaddingUnguarded) {
  // Tiles of 4 rows over 10: the last tile overhangs by two. The local stage
  // then computes rows 10 and 11 too, into its own buffer, from the padding
  // of the packed inputs; only the copy-out tests the rows.
  auto t = matmul_tensors(10, 16, 8);
  std::vector<Step> steps = {cache_write(kMatmul, "local"), split(2, 0, {4}), split(3, 0, {4}),
                             compute_at(2, 3, 0)};
  auto lowered = [&](std::vector<Step> extra) {
    std::vector<Step> all = steps;
    all.insert(all.end(), extra.begin(), extra.end());
    EXPECT_TRUE(schedule_matches_reference(t, State::make(all)));
    return lower::lower_schedule(replay(ComputeDAG(t), State::make(all)), "k");
  };
  lower::PrimFunc packed = lowered({layout_rewrite(0), layout_rewrite(1)});
  EXPECT_EQ(guarded_stores(packed, "matmul_local"), 0) << lower::to_string(packed);
  EXPECT_GT(guarded_stores(packed, "matmul"), 0) << lower::to_string(packed);
  // Rows past the edge of an unpacked A would be read out of bounds: guarded.
  lower::PrimFunc plain = lowered({layout_rewrite(1)});
  EXPECT_GT(guarded_stores(plain, "matmul_local"), 0) << lower::to_string(plain);
}

TEST(Steps, InvalidStepsNameTheProblem) {
  ComputeDAG dag(matmul_tensors(8, 8, 8));
  EXPECT_TT_ERROR(replay(dag, State::make({split(kMatmul, 9, {2})})), kInvalidArgument,
                  "step 0, split(");
  EXPECT_TT_ERROR(replay(dag, State::make({split(kMatmul, 0, {0})})), kInvalidArgument,
                  "split length 0 is not positive");
  EXPECT_TT_ERROR(replay(dag, State::make({reorder(kMatmul, {0, 0, 1})})), kInvalidArgument,
                  "exactly once");
  EXPECT_TT_ERROR(replay(dag, State::make({fuse(kMatmul, {1, 2})})), kInvalidArgument,
                  "cannot fuse spatial and reduction loops");
  EXPECT_TT_ERROR(replay(dag, State::make({annotate(kMatmul, 2, IterAnnotation::kParallel)})),
                  kInvalidArgument, "reduction loop");
  EXPECT_TT_ERROR(replay(dag, State::make({compute_inline(kMatmul)})), kInvalidArgument,
                  "is an output");
  EXPECT_TT_ERROR(replay(dag, State::make({split(0, 0, {2})})), kInvalidArgument, "placeholder");
  EXPECT_TT_ERROR(replay(dag, State::make({split(7, 0, {2})})), kInvalidArgument,
                  "stage 7 does not exist");
  EXPECT_TT_ERROR(replay(dag, State::make({pragma(kMatmul, 0, "bogus")})), kInvalidArgument,
                  "known pragmas: auto_unroll_max_step");
}

TEST(Steps, ReplayAfterSaveLoadGivesAnEqualState) {
  auto t = matmul_tensors(12, 16, 6);
  State s = State::make({cache_write(kMatmul, "local"), split(3, 0, {4}), split(3, 2, {8}),
                         reorder(3, {0, 2, 1, 3}), compute_at(2, 3, 1),
                         annotate(3, 0, IterAnnotation::kParallel)});
  State loaded = load_json_as<State>(parse_json_text(save_string(s)));
  EXPECT_TRUE(structural_equal(s, loaded));
  ComputeDAG dag(t);
  LoopState a = replay(dag, s), b = replay(dag, loaded);
  EXPECT_TRUE(a == b);
  EXPECT_EQ(a.str(), b.str());
  EXPECT_TRUE(structural_equal(lower::lower_schedule(a, "k"), lower::lower_schedule(b, "k")));
}

}  // namespace
}  // namespace tensortune::schedule
