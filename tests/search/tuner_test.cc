// The tuning loop and the random policy, with an in-memory builder and
// runner (the real ones are exercised in tests/measure and tests/cli): how
// trials are counted, how a log is resumed, when a task is reported failed,
// and that a small search space ends the run instead of looping.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <thread>

#include "common/test_util.h"
#include "tensortune/object/structural.h"
#include "tensortune/schedule/compute_dag.h"
#include "tensortune/schedule/steps.h"
#include "tensortune/search/default_schedule.h"
#include "tensortune/search/tuner.h"
#include "tensortune/te/ops.h"
#include "tensortune/te/workload.h"

namespace tensortune::search {
namespace {

using measure::BuildResult;
using measure::ErrorCode;
using measure::RunOutcome;

/// Builds nothing: every candidate "builds".
class FakeBuilder final : public measure::Builder {
 public:
  void check(const te::Task& task, const ir::PassContext&) override {
    checked.push_back(task.workload_key());
    if (refuse) fail(ErrorKind::kRuntime, "the build worker cannot take ", task.workload_key());
  }
  std::vector<BuildResult> build(const te::Task&, const std::vector<schedule::State>& states,
                                 const ir::PassContext& context) override {
    built += states.size();
    std::vector<BuildResult> out(states.size());
    for (auto& b : out) b.pass_context_hash = measure::Hash64(context.hash());
    return out;
  }
  size_t built = 0;
  bool refuse = false;
  std::vector<std::string> checked;
};

/// A cost derived from the state's hash, or `code` for every candidate.
class FakeRunner final : public measure::Runner {
 public:
  explicit FakeRunner(ErrorCode code = ErrorCode::kNoError) : code_(code) {}
  std::vector<RunOutcome> run(const te::Task&, const std::vector<BuildResult>& built,
                              const measure::RunHints& hints) override {
    abandon_above.push_back(hints.abandon_above_s());
    std::vector<RunOutcome> out(built.size());
    for (auto& o : out) {
      o.error_code = code_;
      if (code_ == ErrorCode::kNoError)
        o.costs = {1e-3 * (1 + (next_++ % 7))};
      else
        o.error_message = "planted failure";
    }
    return out;
  }
  std::vector<double> abandon_above;  ///< the hint of each call

 private:
  ErrorCode code_;
  int next_ = 0;
};

PolicyFactory random_policy() {
  return [](const te::Task& task, uint64_t seed) {
    return std::make_unique<RandomSearchPolicy>(task, seed);
  };
}

te::Task matmul(const std::string& args = "16,16,16") {
  return te::Task::make(te::make_named_workload_from_text("matmul", args), ir::Target::parse("c"));
}

class Tuner : public ::testing::Test {
 protected:
  void SetUp() override {
    log_ = (std::filesystem::temp_directory_path() /
            ("tt_tuner_test_" + std::to_string(::getpid()) + ".log"))
               .string();
    std::filesystem::remove(log_);
  }
  void TearDown() override { std::filesystem::remove(log_); }
  std::string log_;
};

TEST_F(Tuner, TheRunnerIsToldTheBestSoFarToAbandonFarSlowerCandidates) {
  FakeBuilder builder;
  FakeRunner runner;
  TuneOptions options;
  options.trials = 8;
  options.batch_size = 4;
  tune({matmul()}, random_policy(), builder, runner, options);
  // The first candidate knows no best; the costs are 1, 2, 3, ... ms, so
  // every later one is abandoned above 4 x 1 ms.
  ASSERT_EQ(runner.abandon_above.size(), 8u);
  EXPECT_EQ(runner.abandon_above[0], 0);
  for (size_t i = 1; i < 8; ++i) EXPECT_DOUBLE_EQ(runner.abandon_above[i], 4e-3) << i;
  options.abandon_factor = 0;
  FakeRunner all;
  tune({matmul()}, random_policy(), builder, all, options);
  for (double a : all.abandon_above) EXPECT_EQ(a, 0);
  // Below 1, a candidate faster than the best would be timed once.
  options.abandon_factor = 0.5;
  EXPECT_TT_ERROR(tune({matmul()}, random_policy(), builder, all, options), kInvalidArgument,
                  "the abandon factor must be 0");
}

TEST_F(Tuner, CountsNewTrialsAndResumesWithoutRepeats) {
  FakeBuilder builder;
  FakeRunner runner;
  TuneOptions options;
  options.trials = 10;
  options.batch_size = 4;
  options.log_path = log_;
  TuneReport first = tune({matmul()}, random_policy(), builder, runner, options);
  EXPECT_EQ(first.trials, 10);
  EXPECT_EQ(builder.built, 10u);  // batches of 4, 4, 2
  ASSERT_EQ(first.tasks.size(), 1u);
  EXPECT_EQ(first.tasks[0].trials, 10);
  ASSERT_TRUE(first.tasks[0].best_latency());
  EXPECT_DOUBLE_EQ(*first.tasks[0].best_latency(), 1e-3);
  EXPECT_GT(*first.tasks[0].best_gflops(), 0);

  options.trials = 5;
  TuneReport second = tune({matmul()}, random_policy(), builder, runner, options);
  EXPECT_EQ(second.tasks[0].resumed, 10);
  EXPECT_EQ(second.tasks[0].trials, 5);
  auto records = measure::load_records(log_).records;
  ASSERT_EQ(records.size(), 15u);
  std::set<uint64_t> states;
  for (const auto& r : records) states.insert(structural_hash(r.input.state));
  EXPECT_EQ(states.size(), 15u) << "a resumed run measured a state again";
}

TEST_F(Tuner, ResumesALongLogWithTheSameSeed) {
  // Regression: a resumed run with the first run's seed replayed its random
  // stream, met only measured states, and gave up after 200 in a row.
  FakeBuilder builder;
  FakeRunner runner;
  TuneOptions options;
  options.trials = 300;
  options.batch_size = 50;
  options.log_path = log_;
  options.confirm = 0;  // every trial a state of the policy's
  EXPECT_EQ(tune({matmul()}, random_policy(), builder, runner, options).trials, 300);
  options.trials = 20;
  TuneReport again = tune({matmul()}, random_policy(), builder, runner, options);
  EXPECT_EQ(again.trials, 20);
  EXPECT_FALSE(again.tasks[0].exhausted);
  EXPECT_EQ(again.tasks[0].resumed, 300);
}

TEST_F(Tuner, LogOfAnotherTargetIsNotResumed) {
  FakeBuilder builder;
  FakeRunner runner;
  TuneOptions options;
  options.trials = 3;
  options.log_path = log_;
  tune({matmul()}, random_policy(), builder, runner, options);
  te::Task other = te::Task::make(matmul()->workload, ir::Target::parse("c -num-cores=2"));
  TuneReport report = tune({other}, random_policy(), builder, runner, options);
  EXPECT_EQ(report.tasks[0].resumed, 0);
}

TEST_F(Tuner, TaskWhoseEveryCandidateFailsIsReportedFailed) {
  FakeBuilder builder;
  FakeRunner runner(ErrorCode::kRuntimeError);
  TuneOptions options;
  options.trials = 6;
  TuneReport report = tune({matmul()}, random_policy(), builder, runner, options);
  const TaskSummary& s = report.tasks[0];
  EXPECT_TRUE(s.failed());
  EXPECT_FALSE(s.best_gflops());
  EXPECT_EQ(s.errors.at("RUNTIME_ERROR"), 6);
  EXPECT_EQ(s.sample_error, "RUNTIME_ERROR: planted failure");
}

TEST_F(Tuner, ResumesOnlyRecordsOfTheRunsPassContextUnlessAnyIsAskedFor) {
  FakeBuilder builder;
  FakeRunner runner;
  TuneOptions options;
  options.trials = 4;
  options.log_path = log_;
  options.pass_context =
      ir::PassContext::make(ir::PassContextOptions().with_config("tir.disable_vectorize", true));
  tune({matmul()}, random_policy(), builder, runner, options);

  options.pass_context = ir::PassContext::make();
  TuneReport other = tune({matmul()}, random_policy(), builder, runner, options);
  EXPECT_EQ(other.tasks[0].resumed, 0);
  EXPECT_EQ(other.tasks[0].other_context_records, 4u);
  ASSERT_EQ(other.tasks[0].other_contexts.size(), 1u);

  options.any_pass_context = true;
  options.trials = 1;
  TuneReport any = tune({matmul()}, random_policy(), builder, runner, options);
  // Both runs drew the same four states (neither resumed anything, so both
  // started the same random stream); any context resumes each state once.
  EXPECT_EQ(any.tasks[0].resumed, 4);
  EXPECT_EQ(any.tasks[0].other_context_records, 0u);
}

TEST_F(Tuner, EveryTaskIsCheckedBeforeAnythingIsMeasured) {
  FakeBuilder builder;
  FakeRunner runner;
  TuneOptions options;
  options.trials = 6;
  options.batch_size = 1;
  TuneReport report = tune({matmul(), matmul("8,8,8")}, random_policy(), builder, runner, options);
  EXPECT_EQ(builder.checked,
            (std::vector<std::string>{"matmul(16,16,16,float32)", "matmul(8,8,8,float32)"}));
  // Round-robin by default: three rounds each.
  EXPECT_EQ(report.tasks[0].trials, 3);
  EXPECT_EQ(report.tasks[1].trials, 3);

  builder.refuse = true;
  builder.built = 0;
  EXPECT_TT_ERROR(tune({matmul()}, random_policy(), builder, runner, options), kRuntime,
                  "cannot take matmul(16,16,16,float32)");
  EXPECT_EQ(builder.built, 0u);
}

/// Always the last task that is not exhausted.
class LastTaskScheduler final : public TaskScheduler {
 public:
  std::string name() const override { return "last"; }
  std::optional<size_t> next(const std::vector<TaskSummary>& tasks) override {
    for (size_t t = tasks.size(); t-- > 0;) {
      if (!tasks[t].exhausted) return t;
    }
    return std::nullopt;
  }
};

TEST_F(Tuner, TheSchedulerChoosesTheTask) {
  FakeBuilder builder;
  FakeRunner runner;
  TuneOptions options;
  options.trials = 4;
  options.batch_size = 2;
  LastTaskScheduler last;
  TuneHooks hooks;
  hooks.scheduler = &last;
  TuneReport report =
      tune({matmul(), matmul("8,8,8")}, random_policy(), builder, runner, options, hooks);
  EXPECT_EQ(report.tasks[0].trials, 0);
  EXPECT_EQ(report.tasks[1].trials, 4);
}

/// Proposes the naive state and two splits, then nothing.
class ThreeStatePolicy final : public SearchPolicy {
 public:
  std::vector<schedule::State> propose(size_t count) override {
    std::vector<schedule::State> out;
    for (; next_ < 3 && out.size() < count; ++next_) {
      out.push_back(next_ == 0 ? schedule::State::make()
                               : schedule::State::make({schedule::split(2, 0, {next_ * 2})}));
    }
    return out;
  }
  void update(const std::vector<schedule::State>&,
              const std::vector<measure::MeasureResult>&) override {}

 private:
  int64_t next_ = 0;
};

TEST_F(Tuner, ExhaustedPolicyEndsTheRun) {
  FakeBuilder builder;
  FakeRunner runner;
  TuneOptions options;
  options.trials = 100000;
  options.batch_size = 2;
  options.confirm = 0;  // the policy's three states, none measured again
  TuneReport report = tune(
      {matmul()}, [](const te::Task&, uint64_t) { return std::make_unique<ThreeStatePolicy>(); },
      builder, runner, options);
  EXPECT_TRUE(report.tasks[0].exhausted);
  EXPECT_EQ(report.trials, 3);
}

TEST(RandomSearchPolicy, NeverProposesAMeasuredState) {
  te::Task task = matmul();
  RandomSearchPolicy a(task, 7), b(task, 7);
  std::vector<schedule::State> first = a.propose(8);
  ASSERT_EQ(first.size(), 8u);
  b.update(first, std::vector<measure::MeasureResult>(first.size()));
  std::set<uint64_t> seen;
  for (const auto& s : first) seen.insert(structural_hash(s));
  for (const auto& s : b.propose(8)) EXPECT_FALSE(seen.count(structural_hash(s)));
}

/// A cost per state that a task's tiling decides: a task of a larger
/// matmul has more to gain, so the gradient scheduler should favour it.
class SizedRunner final : public measure::Runner {
 public:
  std::vector<RunOutcome> run(const te::Task& task, const std::vector<BuildResult>& built,
                              const measure::RunHints&) override {
    std::vector<RunOutcome> out(built.size());
    double flops = schedule::ComputeDAG(te::workload_tensors(task->workload)).flop_count();
    for (auto& o : out) o.costs = {flops * 1e-9 * (1 + (next_++ % 5))};
    return out;
  }

 private:
  int next_ = 0;
};

TEST_F(Tuner, TheGradientSchedulerWarmsUpThenFavoursTheTaskWithMostToGain) {
  FakeBuilder builder;
  SizedRunner runner;
  TuneOptions options;
  options.trials = 40;
  options.batch_size = 4;
  options.weights = {1, 8};  // the small task occurs 8 times: it counts 8 times
  GradientScheduler gradient;
  TuneHooks hooks;
  hooks.scheduler = &gradient;
  TuneReport report =
      tune({matmul("32,32,32"), matmul("8,8,8")}, random_policy(), builder, runner, options, hooks);
  // Trial counts add up, and both tasks had their warm-up round.
  EXPECT_EQ(report.trials, 40);
  EXPECT_EQ(report.tasks[0].trials + report.tasks[1].trials, 40);
  EXPECT_GE(report.tasks[0].rounds, 1);
  EXPECT_GE(report.tasks[1].rounds, 1);
  // The big task's latency dominates the weighted sum (64x the flops, 1/8 the weight).
  EXPECT_GT(report.tasks[0].trials, report.tasks[1].trials);
  EXPECT_NEAR(report.weighted_latency(),
              *report.tasks[0].best_latency() + 8 * *report.tasks[1].best_latency(), 1e-12);
  EXPECT_TT_ERROR(make_task_scheduler("fair"), kInvalidArgument, "gradient, round-robin");
}

/// A model's fused group: a product of `m` x `k` and `n` x `k` plus a bias.
te::Task dense_group(int64_t m, int64_t n, int64_t k) {
  auto a = te::placeholder({m, k}, ir::DataType::float32(), "p0");
  auto w = te::placeholder({n, k}, ir::DataType::float32(), "p1");
  auto b = te::placeholder({n}, ir::DataType::float32(), "p2");
  return te::Task::make(te::make_dag_workload({a, w, b}, {te::add(te::dense(a, w), b)}, {1, 2}),
                        ir::Target::parse("c"));
}

TEST(GradientScheduler, AModelsGroupsOfTheSameOperatorAreSimilarTasks) {
  // A model's tasks are DAGs whose keys are hashes; the operator that
  // makes them similar is what their tiled stages compute.
  EXPECT_EQ(operator_class(dense_group(8, 16, 4)), "dense");
  EXPECT_EQ(operator_class(matmul()), "matmul");
  auto x = te::placeholder({4, 32}, ir::DataType::float32(), "p0");
  te::Task softmax =
      te::Task::make(te::make_dag_workload({x}, {te::softmax(x)}), ir::Target::parse("c"));
  EXPECT_EQ(operator_class(softmax), "softmax");

  // Three tasks measured for many rounds, so that a 1/rounds improvement
  // is small: a fast dense, a dense at a hundredth of its throughput, and
  // a softmax a little slower than the slow dense. Only the slow dense
  // can expect to reach the fast one's speed, so it gets the round.
  auto summary = [](te::Task task, double seconds) {
    TaskSummary s;
    s.task = task;
    s.flops = schedule::ComputeDAG(te::workload_tensors(task->workload)).flop_count();
    s.rounds = 50;
    s.trials = 200;
    measure::Record r;
    r.input.task = task;
    r.result.costs = {seconds};
    s.best = r;
    return s;
  };
  te::Task fast = dense_group(64, 64, 64), slow = dense_group(32, 32, 32);
  double fast_flops = schedule::ComputeDAG(te::workload_tensors(fast->workload)).flop_count();
  double slow_flops = schedule::ComputeDAG(te::workload_tensors(slow->workload)).flop_count();
  double slow_s = slow_flops / (fast_flops / 1e-6 / 100);
  std::vector<TaskSummary> tasks = {summary(fast, 1e-6), summary(softmax, 1.1 * slow_s),
                                    summary(slow, slow_s)};
  GradientScheduler gradient;
  EXPECT_EQ(gradient.next(tasks), 2u);
}

TEST_F(Tuner, FirstRoundsOfManyTasksTakeAQuarterOfTheBudget) {
  FakeBuilder builder;
  SizedRunner runner;
  TuneOptions options;
  options.trials = 128;
  options.batch_size = 32;
  options.confirm = 0;  // the whole budget for the scheduler to share
  GradientScheduler gradient;
  TuneHooks hooks;
  hooks.scheduler = &gradient;
  std::vector<te::Task> tasks = {matmul("8,8,8"), matmul("12,12,12"), matmul("16,16,16"),
                                 matmul("32,32,32")};
  // max(8, 128 / (4 x 4)): 8 each, and the other 96 for the gradient to give.
  TuneReport report = tune(tasks, random_policy(), builder, runner, options, hooks);
  int64_t total = 0, fewest = options.trials, most = 0;
  for (const auto& s : report.tasks) {
    total += s.trials;
    fewest = std::min(fewest, s.trials);
    most = std::max(most, s.trials);
  }
  EXPECT_EQ(total, 128);
  EXPECT_EQ(fewest, 8);
  EXPECT_GE(most, 8 + 32);
  // No tasks: nothing to share, nothing measured.
  EXPECT_EQ(tune({}, random_policy(), builder, runner, options, hooks).trials, 0);
  // Full first rounds when asked for: the whole budget goes to them.
  options.warm_up_batch = 32;
  GradientScheduler again;
  hooks.scheduler = &again;
  report = tune(tasks, random_policy(), builder, runner, options, hooks);
  for (const auto& s : report.tasks) EXPECT_EQ(s.trials, 32);
}

TEST_F(Tuner, AResumedRunWarmsUpOnlyTasksTheLogHasNotMeasured) {
  // Both tasks measured once: a second run goes by the gradient, which
  // gives every round to the big task (64x the flops), and a third task,
  // new to the log, gets its warm-up round.
  FakeBuilder builder;
  SizedRunner runner;
  TuneOptions options;
  options.batch_size = 4;
  options.log_path = log_;
  GradientScheduler first;
  TuneHooks hooks;
  hooks.scheduler = &first;
  options.trials = 8;
  tune({matmul("32,32,32"), matmul("8,8,8")}, random_policy(), builder, runner, options, hooks);
  GradientScheduler second;
  hooks.scheduler = &second;
  options.trials = 12;
  TuneReport again = tune({matmul("32,32,32"), matmul("8,8,8"), matmul("16,16,16")},
                          random_policy(), builder, runner, options, hooks);
  EXPECT_EQ(again.tasks[1].resumed, 4);
  EXPECT_EQ(again.tasks[1].trials, 0);
  EXPECT_EQ(again.tasks[2].trials, 4);
  EXPECT_EQ(again.tasks[0].trials, 8);
}

TEST_F(Tuner, EarlyStoppingEndsATaskThatStopsImproving) {
  FakeBuilder builder;
  FakeRunner runner;  // costs cycle through 7 values: the best is found in the first 7
  TuneOptions options;
  options.trials = 200;
  options.batch_size = 4;
  options.early_stopping = 12;
  TuneReport report = tune({matmul()}, random_policy(), builder, runner, options);
  EXPECT_TRUE(report.tasks[0].early_stopped);
  EXPECT_LT(report.trials, 40);
  EXPECT_EQ(report.stop_reason, "every task done");
}

/// Sleeps a fixed time per run, so that a time budget has something to cut.
class SlowRunner final : public measure::Runner {
 public:
  std::vector<RunOutcome> run(const te::Task&, const std::vector<BuildResult>& built,
                              const measure::RunHints&) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(20) * built.size());
    std::vector<RunOutcome> out(built.size());
    for (auto& o : out) o.costs = {1e-3};
    return out;
  }
};

TEST_F(Tuner, ATimeBudgetEndsTheRunAndTheTrialsStillAddUp) {
  FakeBuilder builder;
  SlowRunner runner;
  TuneOptions options;
  options.trials = 100000;
  options.batch_size = 16;
  options.time_budget_s = 0.5;
  TuneReport report = tune({matmul()}, random_policy(), builder, runner, options);
  EXPECT_EQ(report.stop_reason, "time budget");
  EXPECT_EQ(report.tasks[0].trials, report.trials);
  EXPECT_GT(report.trials, 0);
  EXPECT_LT(report.trials, 100000);
  options.time_budget_s = -1;
  EXPECT_TT_ERROR(tune({matmul()}, random_policy(), builder, runner, options), kInvalidArgument,
                  "time_budget_s is -1; it must be from 0 to");
  options.time_budget_s = 0;
  options.weights = {1, 2};
  EXPECT_TT_ERROR(tune({matmul()}, random_policy(), builder, runner, options), kInvalidArgument,
                  "2 task weights for 1 tasks");
}

TEST_F(Tuner, TheTimeSplitAddsUpToTheWallClock) {
  FakeBuilder builder;
  SlowRunner runner;
  TuneOptions options;
  options.trials = 8;
  options.batch_size = 4;
  TuneReport report = tune({matmul()}, random_policy(), builder, runner, options);
  const TimeSplit& t = report.time;
  EXPECT_GT(t.run_s, 0);
  EXPECT_NEAR(t.search_s + t.training_s + t.build_s + t.run_s + t.other_s, report.elapsed_s, 1e-6);
}

/// Names each candidate by its state's hash (in BuildResult::function).
class NamingBuilder final : public measure::Builder {
 public:
  std::vector<BuildResult> build(const te::Task&, const std::vector<schedule::State>& states,
                                 const ir::PassContext& context) override {
    std::vector<BuildResult> out(states.size());
    for (size_t i = 0; i < states.size(); ++i) {
      out[i].pass_context_hash = measure::Hash64(context.hash());
      out[i].function = std::to_string(structural_hash(states[i]));
    }
    return out;
  }
};

/// A drifting machine: schedules take 2 ms and a bit, `steady` (the
/// default) 1.5 ms, but the 4th and 8th new schedules ran in a fast moment
/// the first time they were measured: 1 ms, and 3 ms ever after.
class LuckyRunner final : public measure::Runner {
 public:
  explicit LuckyRunner(uint64_t steady) : steady_(std::to_string(steady)) {}
  std::vector<RunOutcome> run(const te::Task&, const std::vector<BuildResult>& built,
                              const measure::RunHints&) override {
    std::vector<RunOutcome> out(built.size());
    for (size_t i = 0; i < built.size(); ++i) {
      const std::string& name = built[i].function;
      auto [it, fresh] = first_seen_.emplace(name, static_cast<int>(first_seen_.size()));
      const int n = it->second;
      double cost = 2e-3 + 1e-5 * (n % 5);
      if (name == steady_) {
        cost = 1.5e-3;
      } else if (n == 3 || n == 7) {
        cost = fresh ? 1e-3 : 3e-3;
      }
      out[i].costs = {cost};
    }
    return out;
  }

 private:
  std::string steady_;
  std::map<std::string, int> first_seen_;
};

TEST_F(Tuner, ConfirmMeasuresTheBestAgainWithTheDefaultAndJudgesOnAllCosts) {
  te::Task task = matmul("32,32,32");
  const schedule::State fallback = default_schedule(task);
  NamingBuilder builder;
  TuneOptions options;
  options.trials = 40;
  options.batch_size = 8;
  options.log_path = log_;
  // Without it, a lucky first measurement wins.
  options.confirm = 0;
  LuckyRunner plain(structural_hash(fallback));
  TuneReport lucky = tune({task}, random_policy(), builder, plain, options);
  EXPECT_DOUBLE_EQ(*lucky.tasks[0].best_latency(), 1e-3);
  std::filesystem::remove(log_);
  // With it: the luckiest measured again and the default, never measured
  // by this policy, twice (3 of the 40 trials); the default, steady at 1.5
  // ms, beats 1 ms then 3 ms, and the other lucky one, timed once, no
  // longer counts.
  options.confirm = 3;
  LuckyRunner drifting(structural_hash(fallback));
  TuneReport confirmed = tune({task}, random_policy(), builder, drifting, options);
  EXPECT_EQ(confirmed.trials, 40);
  EXPECT_EQ(confirmed.tasks[0].trials, 40);
  EXPECT_EQ(confirmed.tasks[0].confirm_trials, 3);
  ASSERT_TRUE(confirmed.tasks[0].best);
  EXPECT_TRUE(structural_equal(confirmed.tasks[0].best->input.state, fallback));
  EXPECT_DOUBLE_EQ(*confirmed.tasks[0].best_latency(), 1.5e-3);
  // The log says the same to a compile in another process.
  auto records = measure::load_records(log_).records;
  EXPECT_EQ(records.size(), 40u);
  auto best = measure::best_for(records, task, measure::ContextMatch::any());
  ASSERT_TRUE(best);
  EXPECT_TRUE(structural_equal(best->input.state, fallback));
  options.confirm = -1;
  EXPECT_TT_ERROR(tune({task}, random_policy(), builder, drifting, options), kInvalidArgument,
                  "tune options: confirm is -1; it must be from 0 to 1000");
}

}  // namespace
}  // namespace tensortune::search
