// Every registered workload, under many random valid schedules, computes the
// reference evaluator's answer (lowered kernels run in the IR interpreter).
#include <gtest/gtest.h>

#include "common/schedule_check.h"
#include "tensortune/object/serialize.h"
#include "tensortune/schedule/random_schedule.h"
#include "tensortune/te/workload.h"

namespace tensortune::schedule {
namespace {

struct Case {
  std::string workload;
  std::string args;
};

// Every registered workload at its example arguments (small and odd on
// purpose), plus edge cases of the convolutions: stride, padding, dilation
// and groups that the examples do not all cover.
std::vector<Case> cases() {
  std::vector<Case> c;
  for (const te::WorkloadDef* def : te::registered_workloads()) {
    c.push_back({def->name, def->example_args});
  }
  c.push_back({"conv2d_nchw", "1,3,6,6,4,3,3,1,1"});
  c.push_back({"conv2d_nchw", "1,4,7,7,4,3,3,2,1,1,2"});
  c.push_back({"conv2d_nhwc", "1,3,5,5,2,3,3,1,0"});
  c.push_back({"depthwise_conv2d_nchw", "1,3,6,6,3,3,2,1"});
  return c;
}

TEST(RandomSchedules, EveryWorkloadMatchesTheReference) {
  const int kStatesPerCase = 40;
  std::vector<Case> all = cases();
  // Not a hand-kept list: a newly registered workload is covered at once.
  ASSERT_GE(all.size(), te::registered_workloads().size());
  for (const auto& c : all) {
    te::Workload w = te::make_named_workload_from_text(c.workload, c.args);
    te::WorkloadTensors tensors = te::workload_tensors(w);
    ComputeDAG dag(tensors);
    std::mt19937_64 rng(std::hash<std::string>{}(c.workload + c.args) % 1000);
    int nontrivial = 0;
    for (int i = 0; i < kStatesPerCase; ++i) {
      State s = random_state(dag, rng);
      nontrivial += !s.steps().empty();
      ASSERT_TRUE(testing::schedule_matches_reference(tensors, s, /*seed=*/i))
          << te::workload_key(w) << ", random state " << i;
    }
    EXPECT_GT(nontrivial, kStatesPerCase / 2) << c.workload;
  }
}

TEST(RandomSchedules, GeneratorIsDeterministic) {
  te::WorkloadTensors tensors =
      te::workload_tensors(te::make_named_workload_from_text("matmul", "8,8,8"));
  ComputeDAG dag(tensors);
  std::mt19937_64 a(7), b(7);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(save_string(random_state(dag, a)), save_string(random_state(dag, b)));
  }
}

}  // namespace
}  // namespace tensortune::schedule
