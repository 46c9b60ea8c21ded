// The schedule a task gets without a log: deterministic, correct on every
// registered workload and on fused DAGs, and using the machine (vectors,
// cores) as the target describes it.
#include "tensortune/search/default_schedule.h"

#include <gtest/gtest.h>

#include "common/schedule_check.h"
#include "tensortune/ir/pass_context.h"
#include "tensortune/lower/lower.h"
#include "tensortune/object/structural.h"
#include "tensortune/schedule/steps.h"
#include "tensortune/te/ops.h"
#include "tensortune/te/workload.h"

namespace tensortune::search {
namespace {

te::Task task_of(const te::Workload& w, const std::string& target) {
  return te::Task::make(w, ir::Target::parse(target));
}

int count_annotations(const schedule::LoopState& loops, schedule::IterAnnotation a) {
  int n = 0;
  for (int s = 0; s < loops.num_stages(); ++s) {
    for (int id : loops.stage(s).leaves) n += loops.stage(s).iters[id].annotation == a;
  }
  return n;
}

TEST(DefaultSchedule, EveryRegisteredWorkloadGetsTheReferenceAnswer) {
  ir::PassContextGuard guard(ir::PassContext::make());
  for (const te::WorkloadDef* def : te::registered_workloads()) {
    SCOPED_TRACE(def->name + "(" + def->example_args + ")");
    te::Workload w = te::make_named_workload_from_text(def->name, def->example_args);
    for (const char* target : {"c -mattr=avx2,fma -num-cores=2", "c -mattr=avx512f -num-cores=8"}) {
      schedule::State state = default_schedule(task_of(w, target));
      EXPECT_TRUE(structural_equal(state, default_schedule(task_of(w, target))))
          << "the same task, the same schedule";
      ASSERT_TRUE(testing::schedule_matches_reference(te::workload_tensors(w), state)) << target;
    }
  }
}

TEST(DefaultSchedule, FusedDagsAreCorrectAndUseVectorsAndCores) {
  ir::PassContextGuard guard(ir::PassContext::make());
  using namespace te;  // NOLINT: tensor builders
  Tensor x = placeholder({1, 16, 14, 14}, DataType::float32(), "x");
  Tensor w = placeholder({32, 16, 3, 3}, DataType::float32(), "w");
  Tensor b = placeholder({32}, DataType::float32(), "b");
  Conv2dAttrsNode conv;
  conv.padding = {1, 1, 1, 1};
  Tensor y = relu(bias_add(conv2d_nchw(x, w, conv), b, 1));
  Tensor a = placeholder({24, 64}, DataType::float32(), "a");
  Tensor d = placeholder({48, 64}, DataType::float32(), "d");
  Tensor z = softmax(dense(a, d), 1);
  for (const Workload& wl :
       {make_dag_workload({x, w, b}, {y}, {1, 2}), make_dag_workload({a, d}, {z}, {1})}) {
    te::Task task = task_of(wl, "c -mattr=avx512f -num-cores=4");
    schedule::State state = default_schedule(task);
    ASSERT_TRUE(testing::schedule_matches_reference(te::workload_tensors(wl), state));
    schedule::LoopState loops =
        schedule::replay(schedule::ComputeDAG(te::workload_tensors(wl)), state);
    EXPECT_GE(count_annotations(loops, schedule::IterAnnotation::kVectorize), 1) << loops.str();
    EXPECT_GE(count_annotations(loops, schedule::IterAnnotation::kParallel), 1) << loops.str();
  }
  // One core: nothing parallel.
  te::Task single =
      task_of(make_dag_workload({x, w, b}, {y}, {1, 2}), "c -mattr=avx2 -num-cores=1");
  schedule::LoopState loops = schedule::replay(
      schedule::ComputeDAG(te::workload_tensors(single->workload)), default_schedule(single));
  EXPECT_EQ(count_annotations(loops, schedule::IterAnnotation::kParallel), 0);
}

// Weights too large for L2 are read once, by outer loops over their blocks
// with the rows inside; weights that fit stay in cache while the outer loops
// run over rows.
TEST(DefaultSchedule, WeightsLargerThanL2AreStreamedOnceSmallOnesForEachRow) {
  ir::PassContextGuard guard(ir::PassContext::make());
  using namespace te;  // NOLINT: tensor builders
  auto conv = [](int64_t channels, int64_t pixels) {
    Tensor x = placeholder({1, pixels, pixels, channels}, DataType::float32(), "x");
    Tensor w = placeholder({3, 3, channels, channels}, DataType::float32(), "w");
    return make_dag_workload({x, w}, {conv2d_nhwc(x, w, Conv2dAttrsNode::uniform(1, 1))}, {1});
  };
  auto target = [](int cores, int64_t l2_bytes) {
    return "c -mattr=avx2,fma -num-cores=" + std::to_string(cores) +
           " -l2-cache=" + std::to_string(l2_bytes);
  };
  // The extent of the outer parallel loop of a 3x3 conv over 7 x 7 pixels
  // (with 8 lanes and 16 registers, a register tile of 7 pixels by 1 vector).
  auto outer_loop = [&](int64_t channels, int64_t l2_bytes) {
    Workload wl = conv(channels, 7);
    schedule::State state = default_schedule(task_of(wl, target(2, l2_bytes)));
    schedule::LoopState loops =
        schedule::replay(schedule::ComputeDAG(te::workload_tensors(wl)), state);
    const auto& out = loops.stage(loops.stage_named("conv2d_nhwc"));
    const auto& loop = out.iters[out.leaves.front()];
    EXPECT_EQ(loop.annotation, schedule::IterAnnotation::kParallel) << loops.str();
    return loop.extent;
  };
  // 147 KB of weights against 16 KB of L2: the 8 blocks of 8 channels outside.
  EXPECT_EQ(outer_loop(64, 16 << 10), 64 / 8);
  // In 512 KB they fit: the 7 rows outside, fused with the blocks.
  EXPECT_EQ(outer_loop(64, 512 << 10), 7 * 64 / 8);
  // Rows inside the weight blocks compute the right answer (on one core,
  // whose 4 blocks are enough; the loops over the blocks' rows of 7 come
  // second, after the batch).
  Workload small = conv(32, 7);
  schedule::State state = default_schedule(task_of(small, target(1, 4 << 10)));
  schedule::LoopState loops =
      schedule::replay(schedule::ComputeDAG(te::workload_tensors(small)), state);
  const auto& out = loops.stage(loops.stage_named("conv2d_nhwc"));
  EXPECT_EQ(out.iters[out.leaves[1]].extent, 1) << loops.str();
  EXPECT_TRUE(testing::schedule_matches_reference(te::workload_tensors(small), state));
}

// The register tile is a power of two of vectors: a dense of 96 columns
// could take 3 vectors of 8, which the vectorize pass leaves a scalar loop.
TEST(DefaultSchedule, VectorizedLoopsArePowersOfTwoLanes) {
  using namespace te;  // NOLINT: tensor builders
  Tensor a = placeholder({16, 64}, DataType::float32(), "a");
  Tensor w = placeholder({96, 64}, DataType::float32(), "w");
  Workload wl = make_dag_workload({a, w}, {dense(a, w)}, {1});
  schedule::State state = default_schedule(task_of(wl, "c -mattr=avx2,fma -num-cores=2"));
  schedule::LoopState loops =
      schedule::replay(schedule::ComputeDAG(te::workload_tensors(wl)), state);
  int vectorized = 0;
  for (int s = 0; s < loops.num_stages(); ++s) {
    for (int id : loops.stage(s).leaves) {
      const auto& it = loops.stage(s).iters[id];
      if (it.annotation != schedule::IterAnnotation::kVectorize) continue;
      ++vectorized;
      EXPECT_EQ(it.extent & (it.extent - 1), 0) << it.extent << "\n" << loops.str();
    }
  }
  EXPECT_GE(vectorized, 1) << loops.str();
}

// Rows of a prime count (an audio net's 61 frames) still make a register
// tile of several rows, the last tile guarded: 8 by one vector with
// AVX-512 (272 columns are 17 vectors), 6 by two with AVX2. A tile
// dividing them would be one row, a chain of dependent multiply-adds (an
// STFT convolution 4.6 times slower).
TEST(DefaultSchedule, RowsOfAPrimeCountStillMakeATileOfSeveralRows) {
  ir::PassContextGuard guard(ir::PassContext::make());
  using namespace te;  // NOLINT: tensor builders
  Tensor a = placeholder({61, 32}, DataType::float32(), "a");
  Tensor w = placeholder({272, 32}, DataType::float32(), "w");
  Workload wl = make_dag_workload({a, w}, {dense(a, w)}, {1});
  // The last: weights larger than L2, whose blocks go outside the rows.
  for (const char* target : {"c -mattr=avx512f -num-cores=2", "c -mattr=avx2,fma -num-cores=2",
                             "c -mattr=avx512f -num-cores=1 -l2-cache=4096"}) {
    schedule::State state = default_schedule(task_of(wl, target));
    ASSERT_TRUE(testing::schedule_matches_reference(te::workload_tensors(wl), state)) << target;
    schedule::LoopState loops =
        schedule::replay(schedule::ComputeDAG(te::workload_tensors(wl)), state);
    int tiles = 0;
    for (int s = 0; s < loops.num_stages(); ++s) {
      const auto& leaves = loops.stage(s).leaves;
      for (size_t k = 1; k < leaves.size(); ++k) {
        if (loops.stage(s).iters[leaves[k]].annotation != schedule::IterAnnotation::kVectorize) {
          continue;
        }
        ++tiles;
        EXPECT_GE(loops.stage(s).iters[leaves[k - 1]].extent, 6) << target << "\n" << loops.str();
        // The tiles cover the 61 rows once: 8 of 8 or 11 of 6, no more.
        int64_t points = 1;
        for (int id : leaves) {
          const auto& it = loops.stage(s).iters[id];
          if (it.kind == ir::IterKind::kSpatial) points *= it.extent;
        }
        EXPECT_LE(points, 66 * 272) << target << "\n" << loops.str();
      }
    }
    EXPECT_GE(tiles, 1) << target << "\n" << loops.str();
  }
}

// A product that is the task's output (a Winograd product, a bare matmul)
// accumulates its register tile in a local stage written out once, not in
// the output buffer: four to five times faster.
TEST(DefaultSchedule, AProductWithoutAConsumerAccumulatesInALocalStage) {
  ir::PassContextGuard guard(ir::PassContext::make());
  using namespace te;  // NOLINT: tensor builders
  Tensor a = placeholder({4, 14, 32}, DataType::float32(), "a");
  Tensor w = placeholder({4, 32, 64}, DataType::float32(), "w");
  for (const Workload& wl : {make_dag_workload({a, w}, {batch_matmul(a, w)}, {1}),
                             make_named_workload_from_text("matmul", "32,64,48")}) {
    schedule::State state = default_schedule(task_of(wl, "c -mattr=avx2,fma -num-cores=2"));
    ASSERT_TRUE(testing::schedule_matches_reference(te::workload_tensors(wl), state));
    schedule::LoopState loops =
        schedule::replay(schedule::ComputeDAG(te::workload_tensors(wl)), state);
    bool local = false;
    for (int s = 0; s < loops.num_stages(); ++s) {
      const std::string& name = loops.stage(s).name();
      local |= name.size() > 6 && name.compare(name.size() - 6, 6, ".local") == 0;
    }
    EXPECT_TRUE(local) << loops.str();
  }
}

/// The default schedule of `wl` on `target`, replayed, after checking that
/// it computes the reference answer (a failure is reported, not fatal).
schedule::LoopState checked_default_schedule(const te::Workload& wl, const char* target) {
  schedule::State state = default_schedule(task_of(wl, target));
  EXPECT_TRUE(testing::schedule_matches_reference(te::workload_tensors(wl), state)) << target;
  return schedule::replay(schedule::ComputeDAG(te::workload_tensors(wl)), state);
}

// An NCHW convolution whose 14 columns are no whole number of vectors: its
// register tile is vectorized over the 32 output channels instead, with
// rows along the columns, and its padded input is stored channels last and
// made once, at the root.
TEST(DefaultSchedule, AnNchwConvolutionIsVectorizedOverItsOutputChannels) {
  ir::PassContextGuard guard(ir::PassContext::make());
  te::Workload wl = te::make_named_workload_from_text("conv2d_nchw", "1,8,14,14,32,3,3,1,1");
  for (const char* target : {"c -mattr=avx2,fma -num-cores=2", "c -mattr=avx512f -num-cores=2"}) {
    SCOPED_TRACE(target);
    schedule::LoopState loops = checked_default_schedule(wl, target);
    const schedule::Stage& local = loops.stage(loops.stage_named("conv2d_nchw.local"));
    EXPECT_EQ(local.innermost_spatial_root(), local.root[1]) << loops.str();
    const auto& lanes = local.iters[local.leaves.back()];
    EXPECT_EQ(lanes.annotation, schedule::IterAnnotation::kVectorize) << loops.str();
    EXPECT_EQ(lanes.extent % 8, 0) << loops.str();
    // Rows along the columns: the register tile (the loops after the last
    // reduction loop) has more than one besides its vectors.
    int64_t rows = 1;
    for (auto id = local.leaves.rbegin() + 1; id != local.leaves.rend(); ++id) {
      if (local.iters[*id].kind == ir::IterKind::kReduce) break;
      rows *= local.iters[*id].extent;
    }
    EXPECT_GT(rows, 1) << loops.str();
    const schedule::Stage& pad = loops.stage(loops.stage_named("pad_data"));
    EXPECT_EQ(pad.storage_order, (std::vector<int>{0, 2, 3, 1}));
    EXPECT_EQ(pad.location, schedule::ComputeLocation::kRoot);
  }
}

// A channels-last pool over a few vectors of channels (work enough for
// threads) sums its rows on every core and its channels in vectors: in a
// model its input lies in the caches of the cores that wrote its rows. So
// does a sum over one axis.
TEST(DefaultSchedule, ReductionsOverFewChannelVectorsShareTheirRowsAmongTheCores) {
  ir::PassContextGuard guard(ir::PassContext::make());
  using namespace te;  // NOLINT: tensor builders
  Tensor image = placeholder({1, 60, 58, 32}, DataType::float32(), "image");
  Tensor rows = placeholder({1, 2048, 48}, DataType::float32(), "rows");
  for (const Workload& wl : {make_dag_workload({image}, {reduce_mean(image, {1, 2}, true)}, {}),
                             make_dag_workload({image}, {reduce_max(image, {1, 2}, true)}, {}),
                             make_dag_workload({rows}, {reduce_sum(rows, {1})}, {})}) {
    for (const char* target : {"c -mattr=avx2,fma -num-cores=2", "c -mattr=avx512f -num-cores=2"}) {
      schedule::LoopState loops = checked_default_schedule(wl, target);
      EXPECT_EQ(loops.num_stages(), schedule::ComputeDAG(workload_tensors(wl)).num_stages() + 1)
          << "factored: " << loops.str();
      EXPECT_GE(count_annotations(loops, schedule::IterAnnotation::kParallel), 1) << loops.str();
      EXPECT_GE(count_annotations(loops, schedule::IterAnnotation::kVectorize), 2) << loops.str();
    }
  }
}

/// Whether a Winograd transform's rows stage is computed inside a loop of
/// its consumer.
bool winograd_rows_attached(const schedule::LoopState& loops) {
  for (int s = 0; s < loops.num_stages(); ++s) {
    const schedule::Stage& st = loops.stage(s);
    if (st.name().ends_with("_rows")) return st.location == schedule::ComputeLocation::kAt;
  }
  return false;
}

// Winograd's input transform computes its rows per row of tiles, inside
// the output's loop over them, and folds the transform's constants: the
// operator's own order re-read the whole rows buffer for every coefficient.
// Also behind a concat along the channels, as a U-Net's decoder has it.
TEST(DefaultSchedule, WinogradInputRowsAreComputedPerRowOfTiles) {
  ir::PassContextGuard guard(ir::PassContext::make());
  using namespace te;  // NOLINT: tensor builders
  Tensor a = placeholder({2, 10, 9, 16}, DataType::float32(), "a");
  Tensor b = placeholder({2, 10, 9, 8}, DataType::float32(), "b");
  for (int64_t tile : {2, 4}) {
    SCOPED_TRACE(tile);
    for (const Workload& wl :
         {make_dag_workload({a}, {winograd_input_transform(a, tile, {1, 1, 1, 1})}, {}),
          make_dag_workload(
              {a, b}, {winograd_input_transform(concat({a, b}, 3), tile, {1, 1, 1, 1})}, {})}) {
      for (const char* target :
           {"c -mattr=avx2,fma -num-cores=2", "c -mattr=avx512f -num-cores=1"}) {
        schedule::LoopState loops = checked_default_schedule(wl, target);
        EXPECT_TRUE(winograd_rows_attached(loops)) << loops.str();
        EXPECT_GE(count_annotations(loops, schedule::IterAnnotation::kUnroll), 2) << loops.str();
      }
    }
  }
}

// The output transform likewise, with and without a bias-and-relu epilogue,
// for outputs the tile divides and ones it does not.
TEST(DefaultSchedule, WinogradOutputRowsAreComputedPerRowOfTiles) {
  ir::PassContextGuard guard(ir::PassContext::make());
  using namespace te;  // NOLINT: tensor builders
  Tensor bias = placeholder({16}, DataType::float32(), "bias");
  for (int64_t tile : {2, 4}) {
    for (auto [h, w] : {std::pair<int64_t, int64_t>{8, 8}, {10, 9}}) {
      SCOPED_TRACE(std::to_string(tile) + ": " + std::to_string(h) + "x" + std::to_string(w));
      const int64_t alpha = tile + 2, th = (h + tile - 1) / tile, tw = (w + tile - 1) / tile;
      Tensor m = placeholder({alpha, alpha, 1, th, tw, 16}, DataType::float32(), "m");
      Tensor out = winograd_output_transform(m, tile, h, w);
      for (const Workload& wl :
           {make_dag_workload({m}, {out}, {}),
            make_dag_workload({m, bias}, {relu(bias_add(out, bias, 3))}, {})}) {
        for (const char* target :
             {"c -mattr=avx2,fma -num-cores=2", "c -mattr=avx512f -num-cores=1"}) {
          schedule::LoopState loops = checked_default_schedule(wl, target);
          EXPECT_TRUE(winograd_rows_attached(loops)) << loops.str();
        }
      }
    }
  }
}

}  // namespace
}  // namespace tensortune::search
