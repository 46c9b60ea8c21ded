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
  Conv2dAttrs conv;
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

}  // namespace
}  // namespace tensortune::search
