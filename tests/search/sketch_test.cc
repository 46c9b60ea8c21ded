// Sketch generation rule by rule, and the schedules annotation samples from
// sketches: each replays, lowers and (on a sample) computes the reference
// answer, for every registered workload.
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "common/module_cache.h"
#include "common/schedule_check.h"
#include "common/test_util.h"
#include "tensortune/codegen/build.h"
#include "tensortune/ir/pass_context.h"
#include "tensortune/lower/lower.h"
#include "tensortune/schedule/steps.h"
#include "tensortune/search/annotate.h"
#include "tensortune/search/mutate.h"
#include "tensortune/search/sketch.h"
#include "tensortune/support/build_info.h"
#include "tensortune/te/ops.h"
#include "tensortune/te/workload.h"

namespace tensortune::search {
namespace {

using schedule::ComputeDAG;
using schedule::LoopState;

ComputeDAG named_dag(const std::string& name, const std::string& args) {
  return ComputeDAG(te::workload_tensors(te::make_named_workload_from_text(name, args)));
}

SketchState at_stage(const ComputeDAG& dag, const std::string& name) {
  LoopState loops(dag);
  return SketchState{loops, loops.stage_named(name), {}, {}};
}

std::vector<std::string> loop_names(const LoopState& state, int stage) {
  std::vector<std::string> names;
  const auto& st = state.stage(stage);
  for (int id : st.leaves) names.push_back(st.iters[id].name);
  return names;
}

std::vector<std::string> descriptions(const std::vector<Sketch>& sketches) {
  std::vector<std::string> out;
  for (const auto& s : sketches) out.push_back(s.description);
  return out;
}

/// Two schedules sampled from each sketch compute the reference's answer.
void expect_samples_match_reference(const te::WorkloadTensors& tensors, const ComputeDAG& dag,
                                    const std::vector<Sketch>& sketches, uint64_t seed) {
  std::mt19937_64 rng(seed);
  ir::HardwareParamsNode machine;
  machine.num_cores = 2;
  for (size_t i = 0; i < 2 * sketches.size(); ++i) {
    const Sketch& sketch = sketches[i % sketches.size()];
    schedule::State state = sample_state(sketch, dag, machine, {}, rng);
    EXPECT_TRUE(testing::schedule_matches_reference(tensors, state, i)) << sketch.description;
  }
}

TEST(SketchRules, AlwaysInlineTakesCheapElementwiseStagesOnly) {
  const SketchRule& rule = sketch_rule("always_inline");
  ComputeDAG dag = named_dag("conv2d_bias_relu_nchw", "1,3,6,6,4,3,3,1,1");
  // The bias add is cheap and elementwise; the padding branches; the output stays.
  SketchState bias = at_stage(dag, "bias_add");
  ASSERT_GE(bias.stage, 0) << dag.str();
  EXPECT_EQ(rule.condition(bias, {}), SketchRule::Condition::kApplyAndSkipRest);
  std::vector<SketchState> out = rule.apply(bias, {});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].loops.stage(bias.stage).location, schedule::ComputeLocation::kInline);
  EXPECT_EQ(out[0].stage, bias.stage - 1);
  EXPECT_EQ(rule.condition(at_stage(dag, "pad_data"), {}), SketchRule::Condition::kPass);
  EXPECT_EQ(rule.condition(at_stage(dag, "relu"), {}), SketchRule::Condition::kPass);
  // exp is no longer cheap to recompute.
  ComputeDAG softmax = named_dag("softmax", "4,8");
  for (int s = 0; s < softmax.num_stages(); ++s) {
    SketchState st{LoopState(softmax), s, {}, {}};
    if (softmax.stages()[s].name().find("exp") != std::string::npos) {
      EXPECT_EQ(rule.condition(st, {}), SketchRule::Condition::kPass);
    }
  }
}

TEST(SketchRules, MultiLevelTilingOrdersTheLevelsSSRSRS) {
  const SketchRule& rule = sketch_rule("multi_level_tiling");
  ComputeDAG dag = named_dag("matmul", "64,32,16");
  SketchState s = at_stage(dag, "matmul");
  EXPECT_EQ(rule.condition(s, {}), SketchRule::Condition::kApplyAndSkipRest);
  SketchState out = rule.apply(s, {})[0];
  EXPECT_EQ(loop_names(out.loops, s.stage),
            (std::vector<std::string>{"i.0", "j.0", "i.1", "j.1", "k.0", "i.2", "j.2", "k.1", "i.3",
                                      "j.3"}));
  // Lengths 1: the sketch still has the naive loops' extents.
  EXPECT_EQ(out.loops.stage(s.stage).iters[out.loops.stage(s.stage).leaves[0]].extent, 64);
  SketchOptions three_level;
  three_level.structure = "SRS";
  EXPECT_EQ(loop_names(rule.apply(s, three_level)[0].loops, s.stage),
            (std::vector<std::string>{"i.0", "j.0", "k", "i.1", "j.1"}));
  // No reuse, no tiling: an elementwise add and a plain reduction.
  EXPECT_EQ(rule.condition(at_stage(named_dag("add", "4,4"), "add"), {}),
            SketchRule::Condition::kPass);
  EXPECT_FALSE(needs_multi_level_tiling(LoopState(named_dag("softmax", "4,8")), 1));
}

TEST(SketchRules, CacheWriteOnlyWithoutAnElementwiseConsumer) {
  const SketchRule& rule = sketch_rule("add_cache_write");
  ComputeDAG mm = named_dag("matmul", "8,8,8");
  SketchState s = at_stage(mm, "matmul");
  EXPECT_EQ(rule.condition(s, {}), SketchRule::Condition::kApply);
  SketchState out = rule.apply(s, {})[0];
  EXPECT_EQ(out.loops.num_stages(), mm.num_stages() + 1);
  EXPECT_EQ(out.loops.stage(out.stage).name(), "matmul.local");
  EXPECT_EQ(elementwise_consumer(out.loops, out.stage), out.stage + 1);
  // The conv of conv+bias+relu has one once the bias add is inlined.
  ComputeDAG fused = named_dag("conv2d_bias_relu_nchw", "1,3,6,6,4,3,3,1,1");
  LoopState loops(fused);
  loops.apply(schedule::compute_inline(loops.stage_named("bias_add")));
  int conv = loops.stage_named("conv2d_nchw");
  ASSERT_GE(conv, 0) << fused.str();
  EXPECT_EQ(elementwise_consumer(loops, conv), loops.stage_named("relu"));
  EXPECT_EQ(rule.condition(SketchState{loops, conv, {}, {}}, {}), SketchRule::Condition::kPass);
}

// A model's residual add broadcasts: it reads a batch of one at index 0, not
// at its batch axis. That is still an elementwise read, so the convolution is
// fused into the relu instead of writing a whole intermediate for it.
TEST(SketchRules, AResidualAddOverABatchOfOneIsAnElementwiseConsumer) {
  te::Tensor data = te::placeholder({1, 5, 5, 4}, ir::DataType::float32(), "data");
  te::Tensor kernel = te::placeholder({3, 3, 4, 8}, ir::DataType::float32(), "kernel");
  te::Tensor bias = te::placeholder({8}, ir::DataType::float32(), "bias");
  te::Tensor residual = te::placeholder({1, 5, 5, 8}, ir::DataType::float32(), "residual");
  te::Tensor conv = te::conv2d_nhwc(data, kernel, te::Conv2dAttrsNode::uniform(1, 1));
  te::Tensor out = te::relu(te::add(te::bias_add(conv, bias, 3), residual));
  te::WorkloadTensors tensors{{data, kernel, bias, residual}, {out}, {1, 2}};
  ComputeDAG dag(tensors);
  std::vector<Sketch> sketches = generate_sketches(dag, SketchOptions{"SSRSRS", {1, 2}, 2});
  std::vector<std::string> d = descriptions(sketches);
  ASSERT_FALSE(d.empty());
  EXPECT_NE(d[0].find("tile_with_fusion(conv2d_nhwc, level 1)"), std::string::npos) << d[0];
  for (const auto& s : d) EXPECT_EQ(s.find("add_cache_write"), std::string::npos) << s;
  expect_samples_match_reference(tensors, dag, sketches, 7);
}

TEST(SketchRules, AGeluEpilogueInlinesItsErfAndFusesIntoTheProduct) {
  // x * (erf(x * c) + 1) * 0.5 after a dense: the erf is read once and
  // inlines; the product is read twice, through the inlined stages, by the
  // output alone, so it is tiled with the output fused in.
  te::Tensor data = te::placeholder({8, 16}, ir::DataType::float32(), "data");
  te::Tensor weight = te::placeholder({24, 16}, ir::DataType::float32(), "weight");
  te::Tensor c = te::placeholder({1}, ir::DataType::float32(), "c");
  te::Tensor half = te::placeholder({1}, ir::DataType::float32(), "half");
  te::Tensor one = te::placeholder({1}, ir::DataType::float32(), "one");
  te::Tensor x = te::dense(data, weight);
  te::Tensor out = te::multiply(te::multiply(x, te::add(te::erf(te::multiply(x, c)), one)), half);
  te::WorkloadTensors tensors{{data, weight, c, half, one}, {out}, {1, 2, 3, 4}};
  ComputeDAG dag(tensors);
  std::vector<Sketch> sketches = generate_sketches(dag, SketchOptions{"SSRSRS", {1}, 2});
  std::vector<std::string> d = descriptions(sketches);
  ASSERT_FALSE(d.empty());
  EXPECT_NE(d[0].find("always_inline(erf)"), std::string::npos) << d[0];
  EXPECT_NE(d[0].find("tile_with_fusion(dense, level 1)"), std::string::npos) << d[0];
  expect_samples_match_reference(tensors, dag, sketches, 3);
  // Read twice by an output, erf would be computed twice: it keeps a stage.
  te::Tensor e = te::erf(x);
  te::Tensor twice = te::multiply(e, e);
  ComputeDAG again(te::WorkloadTensors{{data, weight}, {twice}, {1}});
  SketchState erf_stage = at_stage(again, "erf");
  ASSERT_GE(erf_stage.stage, 0) << again.str();
  EXPECT_EQ(sketch_rule("always_inline").condition(erf_stage, {}), SketchRule::Condition::kPass);
  // Nor when a stage inlined into the output reads it twice.
  ComputeDAG through(
      te::WorkloadTensors{{data, weight, one}, {te::add(te::multiply(e, e), one)}, {1, 2}});
  SketchState square = at_stage(through, "multiply");
  ASSERT_GE(square.stage, 0) << through.str();
  ASSERT_EQ(sketch_rule("always_inline").condition(square, {}),
            SketchRule::Condition::kApplyAndSkipRest);
  LoopState squared_inlined = sketch_rule("always_inline").apply(square, {})[0].loops;
  EXPECT_EQ(
      sketch_rule("always_inline")
          .condition(SketchState{squared_inlined, squared_inlined.stage_named("erf"), {}, {}}, {}),
      SketchRule::Condition::kPass);
  // Nor where its one reader broadcasts it (each row's sqrt read by the
  // whole row), or where it has no vector form (pow would make the output
  // loop a library call per lane).
  te::Tensor rows = te::placeholder({8, 16}, ir::DataType::float32(), "rows");
  te::Tensor two = te::placeholder({1}, ir::DataType::float32(), "two");
  te::Tensor norm = te::divide(rows, te::sqrt(te::reduce_mean(rows, {1}, true)));
  ComputeDAG broadcast(te::WorkloadTensors{{rows}, {norm}, {}});
  ASSERT_GE(at_stage(broadcast, "sqrt").stage, 0) << broadcast.str();
  EXPECT_EQ(sketch_rule("always_inline").condition(at_stage(broadcast, "sqrt"), {}),
            SketchRule::Condition::kPass);
  te::Tensor cube = te::multiply(te::power(rows, two), half);
  ComputeDAG pow_dag(te::WorkloadTensors{{rows, two, half}, {cube}, {1, 2}});
  ASSERT_GE(at_stage(pow_dag, "power").stage, 0) << pow_dag.str();
  EXPECT_EQ(sketch_rule("always_inline").condition(at_stage(pow_dag, "power"), {}),
            SketchRule::Condition::kPass);
}

TEST(SketchRules, TileWithFusionComputesTheStageAtEachFusionLevel) {
  const SketchRule& rule = sketch_rule("tile_with_fusion");
  ComputeDAG mm = named_dag("matmul", "8,8,8");
  SketchState s = sketch_rule("add_cache_write").apply(at_stage(mm, "matmul"), {})[0];
  // A local accumulator exists to be fused: nothing else is tried on it.
  EXPECT_EQ(rule.condition(s, {}), SketchRule::Condition::kApplyAndSkipRest);
  std::vector<SketchState> out = rule.apply(s, {});
  ASSERT_EQ(out.size(), 2u);
  for (int level : {1, 2}) {
    const LoopState& loops = out[level - 1].loops;
    const auto& local = loops.stage(s.stage);
    const auto& consumer = loops.stage(s.stage + 1);
    EXPECT_EQ(local.location, schedule::ComputeLocation::kAt);
    EXPECT_EQ(local.attach_stage, s.stage + 1);
    // Attached after `level` levels of both spatial axes.
    EXPECT_EQ(consumer.leaf_position(local.attach_iter), 2 * level - 1);
    EXPECT_EQ(consumer.leaves.size(), static_cast<size_t>(2 * (level + 1)));
  }
}

TEST(SketchRules, RfactorForReductionsWithoutEnoughParallelism) {
  const SketchRule& rule = sketch_rule("add_rfactor");
  te::Tensor x = te::placeholder({1, 4096}, ir::DataType::float32(), "x");
  ir::IterVar k = te::reduce_axis(4096, "k");
  te::Tensor total = te::compute(
      {1}, [&](const std::vector<ir::Var>& i) { return te::sum(x(i[0], k.expr()), {k}); }, "total");
  ComputeDAG dag(te::WorkloadTensors{{x}, {total}});
  SketchOptions options;
  options.num_cores = 2;
  SketchState s = at_stage(dag, "total");
  EXPECT_EQ(rule.condition(s, options), SketchRule::Condition::kApply);
  std::vector<SketchState> out = rule.apply(s, options);
  ASSERT_EQ(out.size(), 2u);
  for (const auto& o : out) {
    EXPECT_EQ(o.loops.num_stages(), dag.num_stages() + 1);
    EXPECT_EQ(o.loops.stage(s.stage).name(), "total.rf");
  }
  // Rows enough to keep the cores busy: no rfactor.
  EXPECT_EQ(rule.condition(at_stage(named_dag("softmax", "256,64"), "softmax_max"), options),
            SketchRule::Condition::kPass);
}

// A channels-last global pool over a few vectors of channels has no work
// for the cores but its rows: it is factored, and the factored stage runs
// its channels innermost, where they vectorize.
TEST(SketchRules, RfactorCountsAChannelsLastPoolsChannelsInVectors) {
  const SketchRule& rule = sketch_rule("add_rfactor");
  SketchOptions options;
  options.num_cores = 2;
  options.vector_bytes = 64;
  for (int64_t channels : {32, 1024}) {
    SCOPED_TRACE(channels);
    te::Tensor x = te::placeholder({1, 56, 56, channels}, ir::DataType::float32(), "x");
    ComputeDAG dag(te::WorkloadTensors{{x}, {te::reduce_mean(x, {1, 2}, true, "pool")}});
    SketchState s = at_stage(dag, "pool_sum");
    if (channels == 1024) {  // 64 vectors: the channels keep the cores busy
      EXPECT_EQ(rule.condition(s, options), SketchRule::Condition::kPass);
      continue;
    }
    ASSERT_EQ(rule.condition(s, options), SketchRule::Condition::kApply);
    for (const SketchState& o : rule.apply(s, options)) {
      // The factored stage: a vector of channels innermost, the rest of
      // them before the reductions, beside the loops the cores share.
      const schedule::Stage& rf = o.loops.stage(s.stage);
      EXPECT_EQ(rf.iters[rf.leaves.back()].kind, ir::IterKind::kSpatial) << o.loops.str();
      EXPECT_EQ(rf.iters[rf.leaves.back()].extent, 16) << o.loops.str();
      const size_t first_reduction = static_cast<size_t>(
          std::find_if(rf.leaves.begin(), rf.leaves.end(),
                       [&](int id) { return rf.iters[id].kind == ir::IterKind::kReduce; }) -
          rf.leaves.begin());
      ASSERT_GT(first_reduction, 0u) << o.loops.str();
      EXPECT_EQ(rf.iters[rf.leaves[first_reduction - 1]].extent, channels / 16) << o.loops.str();
      // The stage summing its parts: the channels innermost, whole.
      const schedule::Stage& sum = o.loops.stage(s.stage + 1);
      EXPECT_EQ(sum.iters[sum.leaves.back()].kind, ir::IterKind::kSpatial) << o.loops.str();
      EXPECT_EQ(sum.iters[sum.leaves.back()].extent, channels) << o.loops.str();
    }
  }
  // Schedules sampled from the pool's sketches (the factored ones first)
  // compute the reference's answer, a max as well as a sum.
  te::Tensor x = te::placeholder({1, 56, 56, 32}, ir::DataType::float32(), "x");
  for (const te::WorkloadTensors& tensors :
       {te::WorkloadTensors{{x}, {te::reduce_mean(x, {1, 2}, true, "pool")}},
        te::WorkloadTensors{{x}, {te::reduce_max(x, {1, 2}, true, "pool")}}}) {
    ComputeDAG dag(tensors);
    std::vector<Sketch> sketches = generate_sketches(dag, options);
    ASSERT_NE(sketches.front().description.find("add_rfactor"), std::string::npos)
        << join(descriptions(sketches), "; ");
    expect_samples_match_reference(tensors, dag, sketches, 11);
  }
  // Too small a pool for threads: not factored.
  te::Tensor small = te::placeholder({1, 7, 7, 32}, ir::DataType::float32(), "small");
  ComputeDAG dag(te::WorkloadTensors{{small}, {te::reduce_mean(small, {1, 2}, true, "pool")}});
  EXPECT_EQ(rule.condition(at_stage(dag, "pool_sum"), options), SketchRule::Condition::kPass);
}

TEST(SketchRules, WindowReductionsOverChannelsLastRunTheWindowOutsideTheChannels) {
  const SketchRule& rule = sketch_rule("tile_window_reduction");
  te::Pool2dAttrsNode pool = te::Pool2dAttrsNode::uniform(3, 2, 1);
  te::Tensor nhwc = te::placeholder({1, 8, 8, 64}, ir::DataType::float32(), "data");
  ComputeDAG dag(te::WorkloadTensors{{nhwc}, {te::max_pool2d_nhwc(nhwc, pool, "pool")}});
  SketchState s = at_stage(dag, "pool");
  ASSERT_EQ(rule.condition(s, {}), SketchRule::Condition::kApply);
  std::vector<SketchState> out = rule.apply(s, {});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(loop_names(out[0].loops, s.stage),
            (std::vector<std::string>{"i.0", "j.0", "k.0", "l.0", "ry", "rx", "i.1", "j.1", "k.1",
                                      "l.1"}));
  // Untiled, the pool still reads its padding inlined: it reads the padding
  // along its channels, so one bounds check serves a vector of them.
  EXPECT_EQ(descriptions(generate_sketches(dag)),
            (std::vector<std::string>{"tile_window_reduction(pool)", "always_inline(pad_data)"}));
  // The window runs along the innermost data axis in NCHW, and a softmax
  // reduces along it: neither has contiguous elements to vectorize across.
  te::Tensor nchw = te::placeholder({1, 64, 8, 8}, ir::DataType::float32(), "data");
  ComputeDAG nchw_dag(te::WorkloadTensors{{nchw}, {te::max_pool2d_nchw(nchw, pool, "pool")}});
  EXPECT_EQ(rule.condition(at_stage(nchw_dag, "pool"), {}), SketchRule::Condition::kPass);
  EXPECT_EQ(rule.condition(at_stage(named_dag("softmax", "256,64"), "softmax_max"), {}),
            SketchRule::Condition::kPass);
  // A convolution has reuse: multi-level tiling's, not this rule's.
  EXPECT_EQ(
      rule.condition(at_stage(named_dag("conv2d_nchw", "1,3,6,6,4,3,3,1,1"), "conv2d_nchw"), {}),
      SketchRule::Condition::kPass);
}

TEST(SketchRules, APaddingReadAlongTheChannelsInlinesAndAChannelConcatDoesNot) {
  auto inlined = [](const ComputeDAG& dag, const std::string& stage) {
    for (const Sketch& sketch : generate_sketches(dag)) {
      if (sketch.description.find("always_inline(" + stage + ")") == std::string::npos) {
        return false;
      }
    }
    return true;
  };
  // A depthwise convolution over channels-last data: its padding inlines
  // (a bounds check per window position, not per channel).
  te::Tensor data = te::placeholder({1, 8, 8, 64}, ir::DataType::float32(), "data");
  te::Tensor kernel = te::placeholder({3, 3, 1, 64}, ir::DataType::float32(), "kernel");
  te::Tensor depthwise =
      te::conv2d_nhwc(data, kernel, te::Conv2dAttrsNode::uniform(1, 1, 1, 64), "depthwise");
  EXPECT_TRUE(inlined(ComputeDAG(te::WorkloadTensors{{data, kernel}, {depthwise}}), "pad_data"));
  // A dense convolution sums over the channels: its padding stays a stage.
  te::Tensor dense_kernel = te::placeholder({3, 3, 64, 16}, ir::DataType::float32(), "w");
  te::Tensor dense =
      te::conv2d_nhwc(data, dense_kernel, te::Conv2dAttrsNode::uniform(1, 1), "conv");
  EXPECT_FALSE(inlined(ComputeDAG(te::WorkloadTensors{{data, dense_kernel}, {dense}}), "pad_data"));
  // Joining channels chooses per channel: the concatenation stays a stage
  // before the depthwise convolution.
  te::Tensor joined = te::concat({data, data}, 3, "joined");
  te::Tensor wide_kernel = te::placeholder({3, 3, 1, 128}, ir::DataType::float32(), "kernel2");
  te::Tensor after =
      te::conv2d_nhwc(joined, wide_kernel, te::Conv2dAttrsNode::uniform(1, 1, 1, 128), "dw");
  EXPECT_FALSE(inlined(ComputeDAG(te::WorkloadTensors{{data, wide_kernel}, {after}}), "joined"));
}

TEST(SketchRules, UnknownRuleNamesTheRules) {
  EXPECT_TT_ERROR(sketch_rule("tile_everything"), kNotFound,
                  "always_inline, add_rfactor, add_cache_write, tile_with_fusion, "
                  "multi_level_tiling, tile_window_reduction, skip_stage");
}

TEST(Sketches, MatmulHasPlainTilingAndTwoFusedLocalAccumulators) {
  std::vector<Sketch> sketches = generate_sketches(named_dag("matmul", "64,64,64"));
  // Each also with both operands packed by the kernel (neither is a weight).
  const std::string packed = " layout_rewrite(A) layout_rewrite(B)";
  EXPECT_EQ(descriptions(sketches),
            (std::vector<std::string>{
                "multi_level_tiling(matmul)", "multi_level_tiling(matmul)" + packed,
                "add_cache_write(matmul) tile_with_fusion(matmul.local, level 1)",
                "add_cache_write(matmul) tile_with_fusion(matmul.local, level 1)" + packed,
                "add_cache_write(matmul) tile_with_fusion(matmul.local, level 2)",
                "add_cache_write(matmul) tile_with_fusion(matmul.local, level 2)" + packed}));
  // An elementwise DAG has just its naive schedule.
  EXPECT_EQ(descriptions(generate_sketches(named_dag("relu", "16"))),
            std::vector<std::string>{"naive"});
}

TEST(Sketches, FusedConvolutionInlinesTheBiasAndFusesIntoTheRelu) {
  std::vector<std::string> d =
      descriptions(generate_sketches(named_dag("conv2d_bias_relu_nchw", "1,3,6,6,4,3,3,1,1")));
  // Each with the kernel as it is and pre-packed in the tiles' order; the
  // bias is read by an inlined stage and stays.
  ASSERT_EQ(d.size(), 6u);
  for (const auto& s : d) EXPECT_NE(s.find("always_inline(bias_add)"), std::string::npos) << s;
  EXPECT_NE(d[0].find("tile_with_fusion(conv2d_nchw, level 1)"), std::string::npos) << d[0];
  EXPECT_EQ(d[1], d[0] + " layout_rewrite(kernel)");
  EXPECT_NE(d[4].find("multi_level_tiling(conv2d_nchw)"), std::string::npos) << d[4];
  EXPECT_EQ(d[5], d[4] + " layout_rewrite(kernel)");
  // Without rewrites, and for a matmul, whose inputs are not constants.
  SketchOptions plain;
  plain.layout_rewrite = false;
  EXPECT_EQ(
      generate_sketches(named_dag("conv2d_bias_relu_nchw", "1,3,6,6,4,3,3,1,1"), plain).size(), 3u);
}

TEST(Sketches, AnNchwConvolutionsAccumulatorsAreAlsoVectorizedOverItsOutputChannels) {
  // 14 columns are no whole number of 16- or 8-lane vectors; 32 output
  // channels are, and only the kernel (a constant, packed) is indexed by them.
  const std::string args = "1,8,14,14,32,3,3,1,1";
  ComputeDAG dag = named_dag("conv2d_nchw", args);
  SketchOptions options;
  options.vector_bytes = 64;
  std::vector<Sketch> sketches = generate_sketches(dag, options);
  std::vector<const Sketch*> over_channels;
  for (const auto& s : sketches) {
    if (s.description.find("vectorized over") == std::string::npos) continue;
    over_channels.push_back(&s);
    // Only with the kernel packed: unpacked, the tile would read it across rows.
    EXPECT_NE(s.description.find("layout_rewrite(kernel)"), std::string::npos) << s.description;
  }
  ASSERT_EQ(over_channels.size(), 2u) << ::testing::PrintToString(descriptions(sketches));
  // Its padded input is stored channels last: the tile's inner loops walk
  // the input channels, one plane apart in NCHW.
  EXPECT_EQ(over_channels[0]->description,
            "add_cache_write(conv2d_nchw) tile_with_fusion(conv2d_nchw.local, level 1, "
            "vectorized over j) storage_order(pad_data, channels last) layout_rewrite(kernel)");
  // The default options (no vector width), a width that divides the
  // columns, and a convolution in NHWC have no such sketch.
  auto count = [](const std::vector<Sketch>& all) {
    return std::count_if(all.begin(), all.end(), [](const Sketch& s) {
      return s.description.find("vectorized over") != std::string::npos;
    });
  };
  EXPECT_EQ(count(generate_sketches(dag)), 0);
  options.vector_bytes = 64;
  EXPECT_EQ(count(generate_sketches(named_dag("conv2d_nchw", "1,8,16,16,32,3,3,1,1"), options)), 0);
  EXPECT_EQ(count(generate_sketches(named_dag("conv2d_nhwc", args), options)), 0);

  // Samples: the channels' inner tile is innermost and a whole number of
  // vectors, the accumulators and the padded input are stored
  // channels-innermost, the padded input is computed once (at the root),
  // and the answer is the reference's.
  ir::HardwareParamsNode machine;
  machine.num_cores = 2;
  machine.vector_bytes = 64;
  std::mt19937_64 rng(5);
  for (const Sketch* sketch : over_channels) {
    for (int i = 0; i < 2; ++i) {
      schedule::State state = sample_state(*sketch, dag, machine, {}, rng);
      LoopState loops = schedule::replay(dag, state);
      const auto& local = loops.stage(loops.stage_named("conv2d_nchw.local"));
      EXPECT_EQ(vector_axis_iter(local), local.root[1]);
      EXPECT_EQ(local.iters[local.leaves.back()].extent % 16, 0) << sketch->description;
      EXPECT_EQ(loops.stage(loops.stage_named("pad_data")).location,
                schedule::ComputeLocation::kRoot);
      ir::Buffer local_buffer, pad_buffer;
      lower::visit_stmts(lower::lower_schedule(loops, "conv")->body, [&](const lower::Stmt& s) {
        if (s->kind() != lower::StmtKind::kAllocate) return;
        const auto& buffer = static_cast<const lower::AllocateNode&>(*s).buffer;
        if (buffer->name.find("local") != std::string::npos) local_buffer = buffer;
        if (buffer->name.find("pad_data") != std::string::npos) pad_buffer = buffer;
      });
      ASSERT_TRUE(local_buffer);
      ASSERT_EQ(local_buffer->strides.size(), 4u);
      EXPECT_EQ(local_buffer->strides[1], 1);
      EXPECT_EQ(local_buffer->strides[3], local_buffer->shape[1]);
      ASSERT_TRUE(pad_buffer);
      EXPECT_EQ(pad_buffer->strides, (std::vector<int64_t>{16 * 16 * 8, 1, 16 * 8, 8}));
      EXPECT_TRUE(testing::schedule_matches_reference(
          te::workload_tensors(te::make_named_workload_from_text("conv2d_nchw", args)), state, i));
    }
  }

  // Mutated tile sizes keep the channels' tile a power of two (of vectors,
  // or lanes where it shrinks below one): of 96 channels never 48, three
  // vectors, which the vectorize pass would leave a scalar loop.
  ComputeDAG wide = named_dag("conv2d_nchw", "1,8,14,14,96,3,3,1,1");
  int mutated = 0;
  for (const Sketch& sketch : generate_sketches(wide, options)) {
    if (sketch.description.find("vectorized over") == std::string::npos) continue;
    for (int i = 0; i < 10; ++i) {
      schedule::State state = sample_state(sketch, wide, machine, {}, rng);
      for (int generation = 0; generation < 30; ++generation) {
        std::optional<schedule::State> m = mutate_tile_size(wide, state, {}, rng);
        if (!m) continue;
        ++mutated;
        state = *m;
        LoopState loops = schedule::replay(wide, state);
        const auto& local = loops.stage(loops.stage_named("conv2d_nchw.local"));
        int64_t lanes = local.iters[local.leaves.back()].extent;
        ASSERT_EQ(lanes & (lanes - 1), 0) << lanes << "\n" << loops.str();
      }
    }
  }
  EXPECT_GT(mutated, 200);
}

/// Two cores with vectors of `bytes`.
ir::HardwareParamsNode two_cores(int64_t bytes) {
  ir::HardwareParamsNode m;
  m.num_cores = 2;
  m.vector_bytes = bytes;
  return m;
}
ir::HardwareParamsNode avx2() { return two_cores(32); }
ir::HardwareParamsNode avx512() { return two_cores(64); }

TEST(Annotate, RandomFactorsMultiplyToADivisorAndRespectTheInnermostBound) {
  std::mt19937_64 rng(3);
  std::set<std::vector<int64_t>> seen;
  for (int i = 0; i < 500; ++i) {
    std::vector<int64_t> f = random_factors(96, 3, 16, rng);
    ASSERT_EQ(f.size(), 3u);
    EXPECT_EQ(96 % (f[0] * f[1] * f[2]), 0);
    EXPECT_LE(f[2], 16);
    seen.insert(f);
  }
  EXPECT_GT(seen.size(), 40u);  // uniform over many factorisations, not a few
  EXPECT_EQ(random_factors(7, 2, 64, rng).size(), 2u);
  // A power of two of vectors innermost where the extent has one: 96 has
  // 16, 32 (and 48, 3 vectors, which would not be vector code).
  std::set<int64_t> innermost;
  for (int i = 0; i < 100; ++i) {
    innermost.insert(random_factors(96, 2, 64, rng, 16).back());
    EXPECT_EQ(random_factors(56, 2, 64, rng, 16).size(), 2u);
  }
  EXPECT_EQ(innermost, (std::set<int64_t>{16, 32}));
}

TEST(Annotate, RaggedFactorsCoverTheExtentWithLessThanOneInnermostTileToSpare) {
  std::mt19937_64 rng(5);
  std::set<int64_t> innermost;
  for (int i = 0; i < 300; ++i) {
    std::vector<int64_t> f = random_ragged_factors(1024, 3, 12, rng);
    ASSERT_EQ(f.size(), 3u);
    int64_t tiles = (1024 + f[2] - 1) / f[2];
    EXPECT_EQ(tiles % (f[0] * f[1]), 0);  // the outer parts factor the tiles
    EXPECT_LE(f[2], 12);
    innermost.insert(f[2]);
    EXPECT_EQ(random_ragged_factors(1000, 2, 32, rng, 8).back() % 8, 0);
  }
  EXPECT_EQ(innermost.size(), 12u);  // 6 rows over 1024 among them
}

TEST(Annotate, OnlyStagesReadingPackedInputsGetRaggedTiles) {
  // The sketch with both operands packed (sketch 1) may tile 1000 rows by
  // 6; the unpacked one (sketch 0) only by divisors.
  ComputeDAG dag = named_dag("matmul", "1000,256,256");
  std::vector<Sketch> sketches = generate_sketches(dag);
  ASSERT_NE(sketches[1].description.find("layout_rewrite"), std::string::npos);
  std::mt19937_64 rng(2);
  auto ragged = [&](const Sketch& sketch) {
    int n = 0;
    for (int i = 0; i < 100; ++i) {
      schedule::State s = fill_tile_sizes(sketch.state, dag, avx2(), {}, rng);
      auto split = s.steps()[2].as<schedule::SplitStepNode>();  // the rows
      EXPECT_EQ(split->iter, 0);
      int64_t product = 1;
      for (int64_t l : split->lengths) product *= l;
      n += 1000 % product != 0;
    }
    return n;
  };
  EXPECT_EQ(ragged(sketches[0]), 0);
  EXPECT_GT(ragged(sketches[1]), 5);
}

TEST(Annotate, TileSizesFitTheRegisterFileAndTheVectorWidth) {
  ComputeDAG dag = named_dag("matmul", "512,512,512");
  Sketch sketch = generate_sketches(dag)[0];
  std::mt19937_64 rng(11);
  int fits = 0;
  for (int i = 0; i < 200; ++i) {
    LoopState state = schedule::replay(dag, fill_tile_sizes(sketch.state, dag, avx512(), {}, rng));
    RegisterTile tile = register_tile(state, 2, avx512());
    fits += tile.vectors <= 24 && tile.whole_vectors;
  }
  // A draw that does not fit is drawn again up to 8 times: nearly all fit.
  EXPECT_GT(fits, 190);
}

TEST(Annotate, AReductionsInnerTileMayRunLongerThanTheSpatialBound) {
  // matmul's k (1024) splits once; its inner length may pass the spatial
  // bound of 64, up to the reduction bound, and the spatial ones may not.
  ComputeDAG dag = named_dag("matmul", "64,64,1024");
  Sketch sketch = generate_sketches(dag)[0];
  AnnotateOptions options;
  options.max_innermost_reduction_split = 256;
  std::mt19937_64 rng(3);
  int long_reductions = 0;
  for (int i = 0; i < 200; ++i) {
    LoopState state =
        schedule::replay(dag, fill_tile_sizes(sketch.state, dag, avx2(), options, rng));
    for (const auto& step : state.history()) {
      auto split = step.as<schedule::SplitStepNode>();
      if (!split) continue;
      const int64_t inner = split->lengths.back();
      // i and j have 64 points, so lengths multiplying past 64 split k.
      int64_t product = 1;
      for (int64_t l : split->lengths) product *= l;
      if (product > 64) {
        EXPECT_LE(inner, 256);
        long_reductions += inner > 64;
      } else {
        EXPECT_LE(inner, 64);
      }
    }
  }
  EXPECT_GT(long_reductions, 10);
  EXPECT_EQ(innermost_bound(ir::IterKind::kReduce, options), 256);
  EXPECT_EQ(innermost_bound(ir::IterKind::kSpatial, options), 64);
}

TEST(Annotate, SamplesUseTheMachine) {
  ComputeDAG dag = named_dag("matmul", "256,256,256");
  std::vector<Sketch> sketches = generate_sketches(dag);
  std::mt19937_64 rng(5);
  int parallel = 0, vectorized = 0;
  ir::HardwareParamsNode one_core = avx512();
  one_core.num_cores = 1;
  for (int i = 0; i < 60; ++i) {
    const Sketch& sketch = sketches[static_cast<size_t>(i) % sketches.size()];
    schedule::State on_two = sample_state(sketch, dag, avx512(), {}, rng);
    schedule::State on_one = sample_state(sketch, dag, one_core, {}, rng);
    for (const auto& step : on_two.steps()) {
      if (auto a = step.as<schedule::AnnotationStepNode>()) {
        parallel += a->annotation == schedule::IterAnnotation::kParallel;
        vectorized += a->annotation == schedule::IterAnnotation::kVectorize;
      }
    }
    for (const auto& step : on_one.steps()) {
      auto a = step.as<schedule::AnnotationStepNode>();
      EXPECT_FALSE(a && a->annotation == schedule::IterAnnotation::kParallel);
    }
  }
  EXPECT_GE(parallel, 50);  // not where the tiles leave no outer loop longer than 1
  EXPECT_GT(vectorized, 40);
}

TEST(Annotate, AnUntiledRowTooLongForOneLoopOfVectorsIsSplitAndItsInnerPartVectorized) {
  // relu over 256 floats: 32 AVX2 vectors, more than max_vectors_per_loop.
  ComputeDAG dag = named_dag("relu", "256");
  std::mt19937_64 rng(9);
  int vectorized = 0;
  for (int i = 0; i < 50; ++i) {
    LoopState state(dag);
    vectorize_innermost(state, avx2(), {}, rng);
    const schedule::Stage& st = state.stage(state.num_stages() - 1);
    if (st.leaves.size() != 2) continue;  // left to the compiler this time
    const auto& inner = st.iters[st.leaves[1]];
    EXPECT_EQ(inner.annotation, schedule::IterAnnotation::kVectorize);
    EXPECT_EQ(inner.extent % 8, 0);
    EXPECT_LE(inner.extent, 32);
    ++vectorized;
  }
  EXPECT_GT(vectorized, 35);  // nine in ten, the rest left to the C compiler
}

TEST(Annotate, AReductionIsComputedOnlyWhereItIsNotComputedAgain) {
  // softmax: the row maximum feeds exp[i, j]; inside exp's j loop it would
  // be computed again for every column, so only exp's i loop takes it.
  ComputeDAG dag = named_dag("softmax", "64,128");
  LoopState naive(dag);
  const int max = naive.stage_named("softmax_max"), exp = naive.stage_named("softmax_exp");
  EXPECT_EQ(compute_at_loops_without_recomputation(naive, max, exp), std::vector<int>{0});
  // Split apart, the row loop's parts both change the row read; the column's do not.
  LoopState split = naive;
  split.apply(schedule::split(exp, 0, {8}));
  EXPECT_EQ(compute_at_loops_without_recomputation(split, max, exp), (std::vector<int>{0, 1}));
  // A convolution's padding is read the same for every output channel (its
  // second loop); the batch loop before it has one iteration. (Padding is no
  // reduction: the sampler still places it anywhere, where a tile of it is
  // cheap to compute again and stays in cache.)
  ComputeDAG conv = named_dag("conv2d_nchw", "1,4,8,8,4,3,3,1,1");
  LoopState conv_state(conv);
  int pad = conv_state.stage_named("pad_data"), out = conv_state.num_stages() - 1;
  ASSERT_GE(pad, 0);
  EXPECT_EQ(compute_at_loops_without_recomputation(conv_state, pad, out), std::vector<int>{0});

  // Sampled states and mutated ones place the reductions only there.
  std::vector<Sketch> sketches = generate_sketches(dag);
  std::mt19937_64 rng(5);
  int at_a_loop = 0;
  auto check = [&](const schedule::State& state) {
    LoopState loops = schedule::replay(dag, state);
    for (int s = 0; s < loops.num_stages(); ++s) {
      const schedule::Stage& st = loops.stage(s);
      if (st.location != schedule::ComputeLocation::kAt) continue;
      ++at_a_loop;
      int position = loops.stage(st.attach_stage).leaf_position(st.attach_iter);
      auto allowed = compute_at_loops_without_recomputation(loops, s, st.attach_stage);
      EXPECT_NE(std::find(allowed.begin(), allowed.end(), position), allowed.end())
          << st.name() << " at loop " << position << "\n"
          << loops.str();
    }
  };
  for (int i = 0; i < 200; ++i) check(sample_state(sketches[0], dag, avx2(), {}, rng));
  EXPECT_GT(at_a_loop, 50);
  // At the outer part of a split row loop, the maximum moves to the inner
  // part only, never into the column loop.
  schedule::State outer =
      schedule::State::make({schedule::split(exp, 0, {8}), schedule::compute_at(max, exp, 0)});
  for (int i = 0; i < 10; ++i) {
    auto moved = mutate_compute_location(dag, outer, rng);
    ASSERT_TRUE(moved);
    EXPECT_EQ(moved->steps().back().as<schedule::ComputeAtStepNode>()->target_iter, 1);
  }
  // At the only loop it may take, it does not move.
  schedule::State row = schedule::State::make({schedule::compute_at(max, exp, 0)});
  EXPECT_FALSE(mutate_compute_location(dag, row, rng));
}

/// Workloads at their example arguments and a few larger shapes whose
/// extents have more factors.
TEST(Annotate, AnInnerLoopMovedOutermostIsSplitBetweenTheThreadsAndComputesTheSame) {
  // A Winograd input transform, [alpha, alpha, N, TH, TW, C]: its tile rows
  // are the loop to split between threads (parallelize_inner_loop says why).
  // 36 x 11 x 11 tiles x 16 channels: enough work to be worth two threads.
  te::Tensor data = te::placeholder({1, 42, 42, 16}, ir::DataType::float32(), "data");
  te::WorkloadTensors tensors{{data}, {te::winograd_input_transform(data, 4, {1, 1, 1, 1})}};
  ComputeDAG dag(tensors);
  std::vector<Sketch> sketches = generate_sketches(dag);
  AnnotateOptions options;
  options.parallel_reorder_prob = 1;
  std::mt19937_64 rng(21);
  std::vector<schedule::State> states;
  int inner_parallel = 0;
  for (int i = 0; i < 24; ++i) {
    schedule::State state = sample_state(sketches[0], dag, avx512(), options, rng);
    LoopState loops = schedule::replay(dag, state);
    const schedule::Stage& out = loops.stage(loops.num_stages() - 1);
    const auto& outer = out.iters[out.leaves[0]];
    ASSERT_EQ(outer.annotation, schedule::IterAnnotation::kParallel) << loops.str();
    inner_parallel += outer.name.rfind("i0", 0) != 0;  // not the first axis, nor fused from it
    states.push_back(state);
  }
  EXPECT_EQ(inner_parallel, 24);
  // Compiled: a row of the transform chosen per tile row mixes a padding
  // blend and plain loads in one vector select (the C generator's test).
  std::vector<codegen::StateCheck> checks = codegen::verify_states(
      tensors, states, ir::Target::parse("c -num-cores=2"), ir::PassContext::make(), 3,
      tensortune::testing::shared_cache_options());
  for (size_t i = 0; i < checks.size(); ++i) {
    EXPECT_TRUE(checks[i].ok()) << "state " << i << ": "
                                << (checks[i].build.ok() ? checks[i].check->mismatch
                                                         : checks[i].build.error);
  }
}

std::vector<std::pair<std::string, std::string>> sampled_workloads() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const te::WorkloadDef* def : te::registered_workloads()) {
    out.emplace_back(def->name, def->example_args);
  }
  out.emplace_back("matmul", "64,48,32");
  out.emplace_back("conv2d_nchw", "1,8,14,14,16,3,3,1,1");
  out.emplace_back("conv2d_bias_relu_nchw", "1,8,14,14,16,3,3,1,1");  // its tile fused
  out.emplace_back("dense", "1,64,128");
  return out;
}

TEST(Annotate, ThousandsOfSamplesOfEveryWorkloadReplayAndLower) {
  // Fewer under AddressSanitizer, whose allocator makes lowering ~100x slower.
  const int kPerWorkload = kAddressSanitizer ? 20 : 1000;
  const int kChecked = 12;  // per workload, through the interpreter
  ir::HardwareParamsNode machines[] = {avx512(), avx2()};
  ir::PassContextGuard guard(ir::PassContext::make());
  for (const auto& [name, args] : sampled_workloads()) {
    SCOPED_TRACE(name + "(" + args + ")");
    te::WorkloadTensors tensors =
        te::workload_tensors(te::make_named_workload_from_text(name, args));
    ComputeDAG dag(tensors);
    // 64-byte vectors: NCHW convolutions' tiles come vectorized over channels too.
    std::vector<Sketch> sketches = generate_sketches(dag, SketchOptions{"SSRSRS", {1, 2}, 2, 64});
    ASSERT_FALSE(sketches.empty());
    std::mt19937_64 rng(std::hash<std::string>{}(name + args));
    for (int i = 0; i < kPerWorkload; ++i) {
      const Sketch& sketch = sketches[static_cast<size_t>(i) % sketches.size()];
      const ir::HardwareParamsNode& machine = machines[i % 2];
      schedule::State state = sample_state(sketch, dag, machine, {}, rng);
      LoopState loops = schedule::replay(dag, state);
      lower::PrimFunc f = lower::lower(loops, "kernel");
      ASSERT_TRUE(f) << sketch.description;
      if (i < kChecked * static_cast<int>(sketches.size()) && i % 4 == 0) {
        ASSERT_TRUE(testing::schedule_matches_reference(tensors, state, i))
            << sketch.description << "\n"
            << loops.str();
      }
    }
  }
}

}  // namespace
}  // namespace tensortune::search
