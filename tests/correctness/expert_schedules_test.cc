// The expert schedules shipped in examples/ compute the reference answer: the
// same steps replayed on smaller shapes of their workloads, compiled and run.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/module_cache.h"
#include "tensortune/codegen/build.h"
#include "tensortune/object/serialize.h"
#include "tensortune/schedule/state.h"
#include "tensortune/te/workload.h"

namespace tensortune::schedule {
namespace {

State load_example(const std::string& file) {
  std::ifstream in(std::string(TT_SOURCE_DIR) + "/examples/" + file);
  std::ostringstream text;
  text << in.rdbuf();
  return load_json_as<State>(parse_json_text(text.str(), file));
}

void expect_matches_reference(const std::string& workload, const std::string& args,
                              const State& state) {
  te::WorkloadTensors tensors =
      te::workload_tensors(te::make_named_workload_from_text(workload, args));
  std::vector<codegen::StateCheck> checks =
      codegen::verify_states(tensors, {state}, ir::Target::parse("c -num-cores=2"),
                             ir::PassContext::make(), 11, testing::shared_cache_options());
  EXPECT_TRUE(checks[0].ok()) << workload << "(" << args << "): "
                              << (checks[0].build.ok() ? checks[0].check->mismatch
                                                       : checks[0].build.error);
}

TEST(ExpertSchedules, MatmulSchedulesAreCorrectOnOtherShapes) {
  // The AVX-512 one and the one for narrower vectors (16 registers).
  for (const char* file : {"matmul_1024_expert.json", "matmul_1024_expert_avx2.json"}) {
    SCOPED_TRACE(file);
    State s = load_example(file);
    expect_matches_reference("matmul", "64,128,256", s);
    expect_matches_reference("matmul", "37,70,300", s);  // ragged tiles everywhere
  }
}

TEST(ExpertSchedules, ConvScheduleIsCorrectOnOtherShapes) {
  State s = load_example("conv2d_resnet_3x3_expert.json");
  expect_matches_reference("conv2d_nchw", "1,8,12,16,8,3,3,1,1", s);
  expect_matches_reference("conv2d_nchw", "1,5,9,13,6,3,3,1,1", s);
}

}  // namespace
}  // namespace tensortune::schedule
