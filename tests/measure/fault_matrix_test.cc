// Every kind of bad candidate, through the real builder and runner pools:
// each gets its error code, the pools keep serving, the next good candidate
// measures fine, and no process is left behind.
#include <gtest/gtest.h>
#include <signal.h>

#include <thread>

#include "measure/measure_test_util.h"
#include "tensortune/measure/measurer.h"
#include "tensortune/support/build_info.h"

namespace tensortune::measure {
namespace {

using namespace testing;

struct FaultCase {
  const char* fault;
  ErrorCode expected;
  const char* message;  ///< a piece the error message must contain
};

TEST(FaultMatrix, EachFaultGetsItsCodeAndThePoolsKeepServing) {
  const FaultCase cases[] = {
      {"segv", ErrorCode::kRuntimeError, "signal 11"},
      {"abort", ErrorCode::kRuntimeError, "signal 6"},
      {"fpe", ErrorCode::kRuntimeError, "signal 8"},
      {"hang", ErrorCode::kRunTimeout, "no reply within"},
      {"oom", ErrorCode::kRuntimeError, "out of memory"},
      {"compile_error", ErrorCode::kCompileError, "injected fault: compile_error"},
      {"wrong_answer", ErrorCode::kWrongAnswer, "max error"},
  };
  te::Task task = small_task();
  LocalBuilder builder(builder_options(1));
  LocalRunnerOptions run_options = runner_options();
  run_options.timeout =
      std::chrono::seconds(3);  // the hang costs this; shorter is flaky under ctest -j2
  LocalRunner runner(run_options);
  std::set<pid_t> seen;  // every worker ever started: their groups must end with them
  auto note_workers = [&] {
    for (pid_t pid : builder.pool().worker_pids()) seen.insert(pid);
    for (pid_t pid : runner.pool().worker_pids()) seen.insert(pid);
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.fault);
    // A candidate that allocates without end is stopped by the worker's
    // address-space cap, which AddressSanitizer's shadow memory rules out.
    if (kAddressSanitizer && std::string(c.fault) == "oom") continue;
    MeasureResult bad = measure_candidates(task, {schedule::State::make()}, fault_context(c.fault),
                                           builder, runner)[0];
    note_workers();
    EXPECT_EQ(error_code_name(bad.error_code), error_code_name(c.expected)) << bad.error_message;
    EXPECT_NE(bad.error_message.find(c.message), std::string::npos) << bad.error_message;
    EXPECT_TRUE(bad.costs.empty());

    MeasureResult good =
        measure_candidates(task, {schedule::State::make()}, fault_context(""), builder, runner)[0];
    note_workers();
    EXPECT_TRUE(good.ok()) << error_code_name(good.error_code) << ": " << good.error_message;
    EXPECT_EQ(good.costs.size(), 2u);
    ASSERT_TRUE(good.max_error.has_value());
    EXPECT_LT(*good.max_error, 1e-3);

    // Nothing but the live workers: no zombie, no orphaned compiler.
    std::set<pid_t> live;
    for (pid_t pid : builder.pool().worker_pids()) live.insert(pid);
    for (pid_t pid : runner.pool().worker_pids()) live.insert(pid);
    EXPECT_EQ(settled_processes({seen.begin(), seen.end()}, live), live);
  }
  // A bug of tensortune's own is never recorded as the candidate's failure:
  // measuring stops with an InternalError naming the stage, and the pools
  // go on serving.
  try {
    measure_candidates(task, {schedule::State::make()}, fault_context("internal_error"), builder,
                       runner);
    ADD_FAILURE() << "an internal error in a worker was not raised";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("internal error of tensortune (a bug, not a fault of "
                                         "this candidate) at lower"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(
      measure_candidates(task, {schedule::State::make()}, fault_context(""), builder, runner)[0]
          .ok());
}

TEST(WorkerPool, WorkerKilledFromOutsideIsReportedAndReplaced) {
  te::Task task = small_task();
  LocalBuilder builder(builder_options(1));
  std::vector<BuildResult> hang =
      builder.build(task, {schedule::State::make()}, fault_context("hang"));
  ASSERT_EQ(hang[0].error_code, ErrorCode::kNoError) << hang[0].error_message;
  LocalRunnerOptions options = runner_options();
  options.timeout = std::chrono::seconds(60);
  LocalRunner runner(options);
  std::thread killer([&] {
    for (int i = 0; i < 500 && runner.pool().worker_pids().empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    for (pid_t pid : runner.pool().worker_pids()) ::kill(pid, SIGKILL);
  });
  RunOutcome lost = runner.run(task, hang, {})[0];
  killer.join();
  EXPECT_EQ(error_code_name(lost.error_code), "DEVICE_LOST") << lost.error_message;
  EXPECT_NE(lost.error_message.find("killed"), std::string::npos) << lost.error_message;

  std::vector<BuildResult> good = builder.build(task, {schedule::State::make()}, fault_context(""));
  RunOutcome after = runner.run(task, good, {})[0];
  EXPECT_EQ(after.error_code, ErrorCode::kNoError) << after.error_message;
  EXPECT_EQ(runner.pool().workers_started(), 2);
}

TEST(WorkerPool, BuildTimeoutKillsTheWorkerAndItsCompiler) {
  // A "compiler" that sleeps: the build times out, and the sleeping process,
  // a child of the worker, dies with the worker's group.
  std::string slow_cc = test_cache_dir() + "-slow-cc.sh";
  {
    std::ofstream script(slow_cc);
    script << "#!/bin/sh\nsleep 60\n";
  }
  std::filesystem::permissions(slow_cc, std::filesystem::perms::owner_all);
  te::Task task = te::Task::make(te::make_named_workload_from_text("matmul", "8,8,8"),
                                 ir::Target::parse("c -compiler=" + slow_cc));
  LocalBuilderOptions options = builder_options(1);
  options.timeout = std::chrono::milliseconds(1000);
  LocalBuilder builder(options);
  std::set<pid_t> seen;
  std::thread watcher([&] {
    for (int i = 0; i < 100; ++i) {
      for (pid_t pid : builder.pool().worker_pids()) seen.insert(pid);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  BuildResult result = builder.build(task, {schedule::State::make()}, ir::PassContext::make())[0];
  watcher.join();
  EXPECT_EQ(error_code_name(result.error_code), "BUILD_TIMEOUT") << result.error_message;
  ASSERT_FALSE(seen.empty());
  std::set<pid_t> live;
  for (pid_t pid : builder.pool().worker_pids()) live.insert(pid);
  EXPECT_EQ(settled_processes({seen.begin(), seen.end()}, live), live);
  std::filesystem::remove(slow_cc);
}

}  // namespace
}  // namespace tensortune::measure
