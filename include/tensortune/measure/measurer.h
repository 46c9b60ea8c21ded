/// \file
/// Builders, runners and the measure loop a search policy calls: build a
/// batch of candidates in workers, run the ones that built in another
/// worker, and turn every outcome into a MeasureResult with one error code.
///
/// The PassContext is not a builder's: it is an argument of every build, so
/// the one who runs the measurement (a tuning run, `tensortune measure`)
/// decides it in one place, and it reaches every build worker whatever
/// context is current in the thread that happens to call.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <set>
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
  /// Makes sure candidates of `task` can be built under `context` at all,
  /// before any is: a kRuntime error naming what is missing otherwise (a
  /// workload, instrument, config option or target kind the build workers do
  /// not have, a workload they define differently, a target kind without a
  /// back end). A tuner calls it for every task before its run starts.
  virtual void check(const te::Task& task, const ir::PassContext& context) {}
  /// One result per state, in order, lowered under `context`; never throws
  /// for a bad candidate.
  virtual std::vector<BuildResult> build(const te::Task& task,
                                         const std::vector<schedule::State>& states,
                                         const ir::PassContext& context) = 0;
};

/// What the caller of a run knows that can save time.
struct RunHints {
  /// A candidate whose first measurement is slower than abandon_factor times
  /// this (the task's best so far) is timed no further
  /// (RunRequest::abandon_above_s). 0 for either times every one fully.
  double best_s = 0;
  double abandon_factor = 0;
  double abandon_above_s() const { return best_s * abandon_factor; }
};

/// Runs built candidates of a task.
class Runner {
 public:
  virtual ~Runner() = default;
  /// Makes sure candidates of `task` can be run at all (see Builder::check).
  virtual void check(const te::Task& task) {}
  /// One outcome per build result; results that did not build are passed over.
  virtual std::vector<RunOutcome> run(const te::Task& task, const std::vector<BuildResult>& built,
                                      const RunHints& hints) = 0;
  /// Runs `built` (candidates that built) and passes each outcome to
  /// `on_outcome` with its index, in index order, as soon as it and those
  /// before it are known. `hints` is read before each run: the caller may
  /// improve it from the outcomes it was given. The default runs them one
  /// at a time; a runner with several machines runs them side by side.
  virtual void run_each(const te::Task& task, const std::vector<BuildResult>& built,
                        const RunHints& hints,
                        const std::function<void(size_t, const RunOutcome&)>& on_outcome) {
    for (size_t i = 0; i < built.size(); ++i) on_outcome(i, run(task, {built[i]}, hints)[0]);
  }
};

/// The handshake that makes every new worker prove, before it is given work,
/// that it speaks this protocol version and was built from the same sources
/// as this program (HelloRequest); a stale or foreign worker is refused with
/// one error naming it and what differs.
Handshake hello_handshake();

/// How candidates are built; its option fields are flags of measure and tune.
struct LocalBuilderOptions : Object {
  int64_t parallelism = 0;  ///< build workers; 0 uses every core
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};  ///< per candidate
  /// Candidates compiled together in one C module by one compiler run, which
  /// amortises its start-up (bench/measure_bench.cc measures the trade).
  int64_t candidates_per_request = 8;
  std::string cache_dir;   ///< module cache; "" for codegen::default_cache_dir()
  WorkerPoolOptions pool;  ///< num_workers is set from parallelism
  /// Lower the candidates but compile none (BuildRequest::simulate), for a
  /// runner with RunnerOptions::simulate_ms.
  bool simulate = false;

  TT_NODE(LocalBuilderOptions, "measure.LocalBuilderOptions")
  static void declare(FieldList<LocalBuilderOptions>& f);
};

/// Builds in a pool of local workers. A group of candidates whose request
/// fails as a whole (a timeout, a crashed worker) is built again one by one,
/// so one bad candidate cannot fail the others. A worker program that cannot
/// be started or is refused is a kRuntime error, not a result; so is a task
/// the workers cannot take (check). A result the worker marks as its own
/// internal error is UNKNOWN_ERROR, and printed as a warning.
class LocalBuilder final : public Builder {
 public:
  explicit LocalBuilder(LocalBuilderOptions options = {});
  void check(const te::Task& task, const ir::PassContext& context) override;
  std::vector<BuildResult> build(const te::Task& task, const std::vector<schedule::State>& states,
                                 const ir::PassContext& context) override;
  WorkerPool& pool() { return pool_; }

 private:
  /// Builds each range of states in one request; ranges of several states
  /// whose request failed as a whole go to `retry` (when given).
  void build_ranges(const te::Task& task, const std::vector<schedule::State>& states,
                    const ir::PassContext& context,
                    const std::vector<std::pair<size_t, size_t>>& ranges,
                    std::vector<BuildResult>& results,
                    std::vector<std::pair<size_t, size_t>>* retry);

  LocalBuilderOptions options_;
  WorkerPool pool_;
  std::set<std::string> checked_;  ///< task and context pairs check() accepted
};

/// How candidates are run; its option fields are flags of measure and tune.
struct LocalRunnerOptions : Object {
  RunnerOptions timing;
  std::chrono::milliseconds timeout{std::chrono::seconds(10)};  ///< per candidate, whole run
  /// For drawing inputs and evaluating the reference of a task (with
  /// timing.check), once per task before its first candidate.
  std::chrono::milliseconds prepare_timeout{std::chrono::minutes(30)};
  /// Bind the kernels' worker threads to CPUs (TT_PIN_THREADS=1).
  bool pin_threads = false;
  /// num_workers is 1: candidates are timed one at a time. The worker's
  /// memory limit is an upper bound: during each run its address space is
  /// capped at what the candidate can legitimately need.
  WorkerPoolOptions pool;

  TT_NODE(LocalRunnerOptions, "measure.LocalRunnerOptions")
  static void declare(FieldList<LocalRunnerOptions>& f);
};

/// Runs candidates one at a time in a local worker. With timing.check, the
/// reference outputs are prepared before the first candidate of a task and
/// again after the worker was replaced (see PrepareRequest); a preparation
/// that fails, a worker program that cannot be started or is refused, or a
/// task the worker cannot take is a kRuntime error, not a result. The
/// constructor rejects timing options that cannot fit in the run timeout.
class LocalRunner final : public Runner {
 public:
  explicit LocalRunner(LocalRunnerOptions options = {});
  void check(const te::Task& task) override;
  std::vector<RunOutcome> run(const te::Task& task, const std::vector<BuildResult>& built,
                              const RunHints& hints) override;
  WorkerPool& pool() { return pool_; }
  const LocalRunnerOptions& options() const { return options_; }

 private:
  /// Has the worker draw the inputs and get the reference of `task` (for
  /// check) under prepare_timeout; a kRuntime error when that fails.
  void prepare(const te::Task& task);

  LocalRunnerOptions options_;
  Ref<RunnerOptions> timing_;  ///< options_.timing, as requests hold it
  WorkerPool pool_;
  std::set<std::string> checked_;  ///< workload keys check() accepted
  std::string prepared_key_;       ///< the workload last prepared
  int64_t prepared_workers_ = -1;  ///< pool_.workers_started() then
};

/// The outcome of a candidate that did not build, so was not run: its build
/// error, and the machine (and rank) that built it.
RunOutcome not_run(const BuildResult& built);

/// The result of a candidate from its build result and run outcome, stamped now.
MeasureResult make_result(const BuildResult& built, const RunOutcome& ran);

/// Called with each result as soon as it is known (e.g. to append a record).
using ResultCallback = std::function<void(const MeasureInput&, const MeasureResult&)>;

/// Builds `states` of `task` under `context` and runs them; one result per
/// state, in order, each with what the context's instruments saw building it.
/// Results reach `on_result` as they are known: failed builds first, then
/// each run as it ends.
std::vector<MeasureResult> measure_candidates(const te::Task& task,
                                              const std::vector<schedule::State>& states,
                                              const ir::PassContext& context, Builder& builder,
                                              Runner& runner, const ResultCallback& on_result = {},
                                              const RunHints& hints = {});

}  // namespace tensortune::measure
