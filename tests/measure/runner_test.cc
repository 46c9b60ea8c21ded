// The runner's handling of the reference outputs: evaluated once per task,
// outside the candidates' timeout, and kept in the cache directory for the
// workers that come after.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/test_util.h"
#include "measure/measure_test_util.h"

namespace tensortune::measure {
namespace {

using namespace testing;

std::vector<std::filesystem::path> reference_files(const std::string& dir) {
  std::vector<std::filesystem::path> found;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("ref-", 0) == 0) found.push_back(entry.path());
  }
  return found;
}

TEST(Runner, ReferenceIsPreparedOutsideTheCandidateTimeoutAndKept) {
  // Interpreting a 512³ matmul takes seconds; the compiled naive kernel, a
  // tenth of one. With the reference inside the run request the first
  // candidate would time out.
  te::Task task = te::Task::make(te::make_named_workload_from_text("matmul", "512,512,512"),
                                 ir::Target::parse("c"));
  std::string cache = test_cache_dir() + "/references";
  std::filesystem::create_directories(cache);
  LocalBuilder builder(builder_options(1));
  std::vector<BuildResult> built =
      builder.build(task, {schedule::State::make()}, ir::PassContext::make());
  ASSERT_EQ(built[0].error_code, ErrorCode::kNoError) << built[0].error_message;

  LocalRunnerOptions options = runner_options();
  options.timing.repeat = 1;
  options.timing.check = true;
  options.timing.cache_dir = cache;
  options.timeout = std::chrono::milliseconds(1000);
  {
    // The reference takes seconds in the evaluator, far more than the
    // candidate's timeout allows, and the candidate still measures.
    LocalRunner runner(options);
    RunOutcome first = runner.run(task, built)[0];
    EXPECT_EQ(error_code_name(first.error_code), "NO_ERROR") << first.error_message;
    ASSERT_TRUE(first.max_error.has_value());
  }
  auto files = reference_files(cache);
  ASSERT_EQ(files.size(), 1u);
  auto written = std::filesystem::last_write_time(files[0]);

  // A new runner (a new worker) reads the kept reference instead of evaluating it again.
  LocalRunner again(options);
  RunOutcome second = again.run(task, built)[0];
  EXPECT_EQ(error_code_name(second.error_code), "NO_ERROR") << second.error_message;
  EXPECT_EQ(std::filesystem::last_write_time(files[0]), written);
}

TEST(Runner, PreparationThatTimesOutStopsTheRunWithItsReason) {
  te::Task task = te::Task::make(te::make_named_workload_from_text("matmul", "384,384,384"),
                                 ir::Target::parse("c"));
  LocalBuilder builder(builder_options(1));
  std::vector<BuildResult> built = builder.build(
      task, {schedule::State::make(), schedule::State::make()}, ir::PassContext::make());
  LocalRunnerOptions options = runner_options();
  options.timing.check = true;
  options.timing.cache_dir = test_cache_dir() + "/references-unused";
  options.prepare_timeout = std::chrono::milliseconds(50);
  LocalRunner runner(options);
  EXPECT_TT_ERROR(runner.run(task, built), kRuntime,
                  "cannot prepare the reference outputs of matmul(384,384,384,float32)");
}

}  // namespace
}  // namespace tensortune::measure
