// The runner's handling of the reference outputs: evaluated once per task,
// outside the candidates' timeout, and kept in the cache directory for the
// workers that come after.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/test_util.h"
#include "measure/measure_test_util.h"
#include "tensortune/measure/mpi.h"
#include "tensortune/schedule/steps.h"
#include "tensortune/support/build_info.h"
#include "tensortune/support/files.h"
#include "tensortune/support/host_cpu.h"

namespace tensortune::measure {
namespace {

using namespace testing;

std::vector<std::filesystem::path> reference_files(const std::string& dir) {
  std::vector<std::filesystem::path> found;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("ref-", 0) == 0 && name.size() > 4 && name.substr(name.size() - 4) == ".bin") {
      found.push_back(entry.path());
    }
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
    RunOutcome first = runner.run(task, built, {})[0];
    EXPECT_EQ(error_code_name(first.error_code), "NO_ERROR") << first.error_message;
    ASSERT_TRUE(first.max_error.has_value());
  }
  auto files = reference_files(cache);
  ASSERT_EQ(files.size(), 1u);
  auto written = std::filesystem::last_write_time(files[0]);

  // A new runner (a new worker) reads the kept reference instead of evaluating it again.
  LocalRunner again(options);
  RunOutcome second = again.run(task, built, {})[0];
  EXPECT_EQ(error_code_name(second.error_code), "NO_ERROR") << second.error_message;
  EXPECT_EQ(std::filesystem::last_write_time(files[0]), written);

  // A reference changed on disk (its size kept) is not what --check compares
  // with: it no longer matches its hash, so it is evaluated again.
  std::string bytes = *read_file_if_exists(files[0].string());
  for (char& c : bytes) c = static_cast<char>(0x7f);
  write_file_atomically(files[0].string(), bytes);
  LocalRunner third(options);
  RunOutcome checked = third.run(task, built, {})[0];
  EXPECT_EQ(error_code_name(checked.error_code), "NO_ERROR") << checked.error_message;
  EXPECT_NE(*read_file_if_exists(files[0].string()), bytes);
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
  EXPECT_TT_ERROR(runner.run(task, built, {}), kRuntime,
                  "cannot prepare the reference outputs of matmul(384,384,384,float32)");
}

/// dense 8x48x20 built twice: with its weight (input 1, a constant)
/// pre-packed in the tiles' order, and naive.
std::pair<te::Task, std::vector<BuildResult>> dense_rewritten_and_naive(
    const std::string& target = "c") {
  te::Task task = te::Task::make(te::make_named_workload_from_text("dense", "8,48,20"),
                                 ir::Target::parse(target));
  using namespace schedule;
  State rewritten = State::make({split(2, 1, {16}), split(2, 3, {5}), reorder(2, {0, 1, 3, 4, 2}),
                                 annotate(2, 4, IterAnnotation::kVectorize), layout_rewrite(1)});
  LocalBuilder builder(builder_options(1));
  return {task, builder.build(task, {rewritten, State::make()}, ir::PassContext::make())};
}

/// Runs `built`, checked, three measurements of at least 2 ms each, with
/// each call's inputs prepared as the two flags say; every candidate passes.
void expect_checked_and_timed(const te::Task& task, const std::vector<BuildResult>& built,
                              bool flush_weights, bool fresh_activations) {
  LocalRunnerOptions options = runner_options();  // with check
  options.timing.flush_weights = flush_weights;
  options.timing.fresh_activations = fresh_activations;
  options.timing.repeat = 3;
  options.timing.min_repeat_ms = 2;
  LocalRunner runner(options);
  for (const RunOutcome& r : runner.run(task, built, {})) {
    EXPECT_EQ(error_code_name(r.error_code), "NO_ERROR") << r.error_message;
    EXPECT_EQ(r.costs.size(), 3u);
    EXPECT_GT(r.kernel_seconds, 0);
    EXPECT_LT(r.kernel_seconds, r.run_seconds);
  }
}

TEST(Runner, LayoutRewrittenWeightsArePackedBeforeTheKernelRuns) {
  // The worker packs the weight with the candidate's packer, times the
  // kernel on the packed weight, and checks the output against the
  // reference on the original one.
  auto [task, built] = dense_rewritten_and_naive();
  ASSERT_EQ(built[0].error_code, ErrorCode::kNoError) << built[0].error_message;
  EXPECT_EQ(built[0].packed_inputs, std::vector<int64_t>{1});
  EXPECT_EQ(built[0].packed_elements, std::vector<int64_t>{48 * 20});
  EXPECT_TRUE(built[1].packers.empty());
  LocalRunner runner(runner_options());  // with check
  std::vector<RunOutcome> ran = runner.run(task, built, {});
  for (const auto& r : ran) EXPECT_EQ(error_code_name(r.error_code), "NO_ERROR") << r.error_message;
}

TEST(Runner, WeightsEvictedBeforeEveryCallStillGiveTheReferenceAnswer) {
  // dense's weight is a constant input: with flush_weights the worker
  // evicts it (packed, for the rewritten candidate) before every call of
  // every measurement, however many calls min_repeat_ms asks for.
  auto [task, built] = dense_rewritten_and_naive();
  ASSERT_EQ(te::workload_tensors(task->workload).constant_inputs, std::vector<int>{1});
  expect_checked_and_timed(task, built, /*flush_weights=*/true, /*fresh_activations=*/false);
}

TEST(Runner, ActivationsWrittenBeforeEveryCallStillGiveTheReferenceAnswer) {
  // dense's data is an activation: with fresh_activations the worker writes
  // it again on the kernel's threads before every call, the checked one
  // included, so a write of the wrong bytes fails the check. Two threads
  // write a share each.
  auto [task, built] = dense_rewritten_and_naive("c -num-cores=2");
  ASSERT_EQ(te::workload_tensors(task->workload).constant_inputs, std::vector<int>{1});
  ASSERT_EQ(built[0].packed_inputs, std::vector<int64_t>{1});
  expect_checked_and_timed(task, built, /*flush_weights=*/false, /*fresh_activations=*/true);
  expect_checked_and_timed(task, built, /*flush_weights=*/true, /*fresh_activations=*/true);
}

TEST(Runner, ACandidateSlowerThanTheAbandonTimeIsMeasuredOnce) {
  auto built_naive = [](const std::string& args) {
    te::Task task =
        te::Task::make(te::make_named_workload_from_text("matmul", args), ir::Target::parse("c"));
    LocalBuilder builder(builder_options(1));
    std::vector<BuildResult> built =
        builder.build(task, {schedule::State::make()}, ir::PassContext::make());
    EXPECT_EQ(built[0].error_code, ErrorCode::kNoError) << built[0].error_message;
    return std::pair{task, built};
  };
  LocalRunnerOptions options = runner_options();
  options.timing.repeat = 5;
  options.timing.check = false;
  LocalRunner runner(options);
  {
    // No kernel runs in a nanosecond: one cost. A fast kernel's warm-up
    // (thread start, first touch) says nothing; its first timed measurement
    // decides, so the kernel ran twice.
    auto [task, built] = built_naive("64,64,64");
    RunOutcome abandoned = runner.run(task, built, RunHints{1e-9, 1})[0];
    EXPECT_EQ(error_code_name(abandoned.error_code), "NO_ERROR") << abandoned.error_message;
    ASSERT_EQ(abandoned.costs.size(), 1u);
    EXPECT_GT(abandoned.kernel_seconds, abandoned.costs[0]);
    // Nor in a minute: all five, and the time in the kernel is part of the run's.
    RunOutcome full = runner.run(task, built, RunHints{60, 1})[0];
    EXPECT_EQ(full.costs.size(), 5u);
    EXPECT_GT(full.kernel_seconds, 0);
    EXPECT_LT(full.kernel_seconds, full.run_seconds);
    EXPECT_EQ(runner.run(task, built, {})[0].costs.size(), 5u);
  }
  {
    // A naive 768^3 matmul takes a tenth of a second on a fast machine and
    // seconds on a slow one: its warm-up alone is past twice the abandon
    // time and the 0.05 s floor, and is its one cost.
    auto [task, built] = built_naive("768,768,768");
    RunOutcome abandoned = runner.run(task, built, RunHints{1e-9, 1})[0];
    ASSERT_EQ(abandoned.costs.size(), 1u);
    EXPECT_EQ(abandoned.kernel_seconds, abandoned.costs[0]);
  }
}

TEST(Runner, ACandidateWhoseScratchOutgrowsTheWorkersCapSaysHowMuchItWanted) {
  if (kAddressSanitizer) GTEST_SKIP() << "no address-space cap under AddressSanitizer";
  te::Task task = te::Task::make(te::make_named_workload_from_text("matmul", "1024,1024,1024"),
                                 ir::Target::parse("c"));
  // An rfactor over the 512 outer steps of k: 512 partial outputs, 2 GiB of
  // scratch for 12 MiB of tensors.
  schedule::State state =
      schedule::State::make({schedule::split(2, 2, {2}), schedule::rfactor(2, 2, 0)});
  LocalBuilder builder(builder_options(1));
  std::vector<BuildResult> built = builder.build(task, {state}, ir::PassContext::make());
  ASSERT_EQ(built[0].error_code, ErrorCode::kNoError) << built[0].error_message;
  LocalRunnerOptions options = runner_options();
  options.timing.check = false;
  LocalRunner runner(options);
  RunOutcome r = runner.run(task, built, {})[0];
  EXPECT_EQ(error_code_name(r.error_code), "RUNTIME_ERROR");
  EXPECT_NE(r.error_message.find("out of memory allocating a buffer of 2147483648 bytes"),
            std::string::npos)
      << r.error_message;
}

TEST(Runner, ASimulatedMeasurementCostsWhatItsProgramHashSaysAndNamesItsHost) {
  LocalBuilderOptions build = builder_options(1);
  build.simulate = true;
  LocalBuilder builder(build);
  LocalRunnerOptions run = runner_options();
  run.timing.simulate_ms = 0;
  LocalRunner runner(run);
  te::Task task = small_task();
  schedule::State plain = schedule::State::make({});
  std::vector<schedule::State> states = {vectorized_state(), plain, vectorized_state()};
  std::vector<MeasureResult> results =
      measure_candidates(task, states, ir::PassContext::make(), builder, runner);
  ASSERT_EQ(results.size(), 3u);
  for (const MeasureResult& r : results) {
    ASSERT_TRUE(r.ok()) << r.error_message;
    EXPECT_EQ(r.costs.size(), 2u);
    EXPECT_EQ(r.host, host_name());
    EXPECT_EQ(r.rank, -1);
  }
  // The same program costs the same; another program (almost surely) not.
  EXPECT_EQ(results[0].costs, results[2].costs);
  EXPECT_NE(results[0].costs, results[1].costs);
  std::vector<BuildResult> built = builder.build(task, {plain}, ir::PassContext::make());
  EXPECT_TRUE(built[0].library.empty());  // nothing was compiled
  EXPECT_EQ(results[1].costs[0], simulated_cost(built[0].program_hash));
}

TEST(MpiRounds, ARoundHasOneCandidatePerBuildWorkerWithinBounds) {
  EXPECT_EQ(cluster_batch_size(16, 3), 16);       // never fewer than asked
  EXPECT_EQ(cluster_batch_size(16, 70), 70);      // one per build worker
  EXPECT_EQ(cluster_batch_size(16, 7000), 1024);  // rank 0's search has a limit
  EXPECT_EQ(cluster_batch_size(2000, 10), 2000);
}

}  // namespace
}  // namespace tensortune::measure
