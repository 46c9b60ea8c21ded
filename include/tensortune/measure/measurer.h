/// \file
/// Builders, runners and the measure loop a search policy calls: build a
/// batch of candidates in workers, run the ones that built in another
/// worker, and turn every outcome into a MeasureResult with one error code.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensortune/ir/pass_context.h"
#include "tensortune/measure/measure_result.h"
#include "tensortune/measure/protocol.h"
#include "tensortune/measure/record.h"
#include "tensortune/measure/worker_pool.h"

namespace tensortune::measure {

/// Builds candidates of a task.
class Builder {
 public:
  virtual ~Builder() = default;
  /// One result per state, in order; never throws for a bad candidate.
  virtual std::vector<BuildResult> build(const te::Task& task,
                                         const std::vector<schedule::State>& states) = 0;
};

/// Runs built candidates of a task.
class Runner {
 public:
  virtual ~Runner() = default;
  /// One outcome per build result; results that did not build are passed over.
  virtual std::vector<RunOutcome> run(const te::Task& task, const std::vector<BuildResult>& built) = 0;
};

struct LocalBuilderOptions {
  int parallelism = 0;  ///< build workers; 0 uses every core
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};  ///< per candidate
  /// Candidates compiled together in one C module by one compiler run.
  int candidates_per_request = 8;  ///< measure_bench: 30 candidates/s at 8, 21 at 1
  std::string cache_dir;  ///< module cache; "" for codegen::default_cache_dir()
  WorkerPoolOptions pool;  ///< num_workers is set from parallelism
};

/// Builds in a pool of local workers, lowering under the PassContext given
/// at construction (by default the one current then), whatever is current
/// when build() is called. A group of candidates whose request fails as a
/// whole (a timeout, a crashed worker) is built again one by one, so one bad
/// candidate cannot fail the others. A worker program that cannot be
/// started is a kRuntime error, not a result.
class LocalBuilder final : public Builder {
 public:
  explicit LocalBuilder(LocalBuilderOptions options = {},
                        ir::PassContext context = ir::PassContext::current());
  std::vector<BuildResult> build(const te::Task& task,
                                 const std::vector<schedule::State>& states) override;
  const ir::PassContext& pass_context() const { return context_; }
  /// Lowers later builds under `context` instead.
  void set_pass_context(ir::PassContext context) { context_ = std::move(context); }
  WorkerPool& pool() { return pool_; }

 private:
  /// Builds each range of states in one request; ranges of several states
  /// whose request failed as a whole go to `retry` (when given).
  void build_ranges(const te::Task& task, const std::vector<schedule::State>& states,
                    const std::vector<std::pair<size_t, size_t>>& ranges, std::vector<BuildResult>& results,
                    std::vector<std::pair<size_t, size_t>>* retry);

  LocalBuilderOptions options_;
  ir::PassContext context_;
  WorkerPool pool_;
};

struct LocalRunnerOptions {
  RunnerOptions timing;
  std::chrono::milliseconds timeout{std::chrono::seconds(10)};  ///< per candidate, whole run request
  /// For drawing inputs and evaluating the reference of a task (with
  /// timing.check), once per task before its first candidate.
  std::chrono::milliseconds prepare_timeout{std::chrono::minutes(30)};
  /// Bind OpenMP threads to cores (OMP_PROC_BIND=close, OMP_PLACES=cores).
  bool pin_threads = false;
  WorkerPoolOptions pool;  ///< num_workers is 1: candidates are timed one at a time
};

/// Runs candidates one at a time in a local worker. With timing.check, the
/// reference outputs are prepared before the first candidate of a task and
/// again after the worker was replaced (see make_prepare_request); a
/// preparation that fails, or a worker program that cannot be started, is a
/// kRuntime error, not a result. The constructor rejects timing options
/// that cannot fit in the run timeout.
class LocalRunner final : public Runner {
 public:
  explicit LocalRunner(LocalRunnerOptions options = {});
  std::vector<RunOutcome> run(const te::Task& task, const std::vector<BuildResult>& built) override;
  WorkerPool& pool() { return pool_; }
  const LocalRunnerOptions& options() const { return options_; }

 private:
  /// Has the worker draw the inputs and get the reference of `task` (for
  /// check) under prepare_timeout; a kRuntime error when that fails.
  void prepare(const te::Task& task);

  LocalRunnerOptions options_;
  WorkerPool pool_;
  std::string prepared_key_;       ///< the workload last prepared
  int64_t prepared_workers_ = -1;  ///< pool_.workers_started() then
};

/// The result of a candidate from its build result and run outcome, stamped now.
MeasureResult make_result(const BuildResult& built, const RunOutcome& ran);

/// Called with each result as soon as it is known (e.g. to append a record).
using ResultCallback = std::function<void(const MeasureInput&, const MeasureResult&)>;

/// Builds and runs `states` of `task`; one result per state, in order.
/// Results reach `on_result` as they are known: failed builds first, then
/// each run as it ends.
std::vector<MeasureResult> measure_candidates(const te::Task& task,
                                              const std::vector<schedule::State>& states,
                                              Builder& builder, Runner& runner,
                                              const ResultCallback& on_result = {});

/// measure_candidates that appends one record per result to `log` as it arrives.
std::vector<MeasureResult> measure_candidates(const te::Task& task,
                                              const std::vector<schedule::State>& states,
                                              Builder& builder, Runner& runner, RecordWriter& log);

}  // namespace tensortune::measure
