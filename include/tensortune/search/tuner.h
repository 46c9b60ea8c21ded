/// \file
/// The tuning loop: resume every task from the log, ask a scheduler which
/// task goes next, ask that task's policy for states, measure them in
/// batches through a builder and a runner, and append every record to the
/// log as it arrives, so that no state is measured twice across runs. The
/// run ends when its trials are done, its time budget is spent, or every
/// task is done (its policy exhausted, or stopped early for not improving).
///
/// The run owns its PassContext (TuneOptions::pass_context): every candidate
/// is built under it, and only records built under it are resumed, unless
/// any context is asked for explicitly.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensortune/measure/measurer.h"
#include "tensortune/measure/record.h"
#include "tensortune/search/search_policy.h"
#include "tensortune/search/task_scheduler.h"

namespace tensortune::search {

/// A tuning run's options: a reflected node, so that the command line's
/// flags, defaults and range checks come from this one declaration.
struct TuneOptions : Object {
  int64_t trials = 64;  ///< new measurements in this run, over all tasks
  int batch_size = 16;  ///< states proposed and measured together
  /// States in the first round of each task when several tasks share the
  /// budget; 0: max(8, trials / (4 x tasks)). Every task gets a round before
  /// any gets a second: with full batches, ResNet-18's 28 tasks spent 900 of
  /// 1,000 trials there, and its heaviest task got 68 like the lightest.
  int warm_up_batch = 0;
  std::string log_path;  ///< records are appended here and resumed from; "" keeps none
  uint64_t seed = 0;
  /// The context every candidate is built under; null takes the one current
  /// where tune() is called.
  ir::PassContext pass_context;
  /// Resume from records of any pass context, not only pass_context's.
  bool any_pass_context = false;
  /// Wall-clock seconds the run may take (0: no limit). Batches shrink as the
  /// end nears, so that the run ends within a few percent of it.
  double time_budget_s = 0;
  /// A task whose best has not improved for this many of its trials of this
  /// run gets no more rounds (0: never stops early).
  int64_t early_stopping = 0;
  /// How often each task occurs, in the order of the tasks (empty: 1 each).
  std::vector<double> weights;
  /// A candidate whose first measurement is this many times slower than
  /// its task's best so far is timed no further (measure::RunHints): a
  /// search's early batches are mostly such candidates, and timing each
  /// `repeat` times took most of a run. 0 times every candidate fully.
  double abandon_factor = 4;
  /// At the end, each task's `confirm` best schedules, its default schedule
  /// among them, are measured again back to back, most weighted tasks
  /// first, and a task's best is judged on all its costs (measure::best_for
  /// pools a schedule's records): where the machine's speed drifts, the
  /// fastest single measurement is often a lucky one. The re-measurements
  /// are trials of this run and take at most a tenth of them. 0: none.
  int confirm = 3;
  TT_NODE(TuneOptions, "search.TuneOptions")
  static void declare(FieldList<TuneOptions>& f);
};

/// Where the run's wall-clock time went.
struct TimeSplit {
  double search_s = 0;    ///< the policies proposing states
  double training_s = 0;  ///< the policies learning from results (cost-model training)
  double build_s = 0;     ///< waiting for the builder
  double run_s = 0;       ///< waiting for the runner
  /// Of run_s, the candidates' kernels running (warm-up and timed calls);
  /// the rest of a run is starting workers, preparing inputs, packing.
  double kernel_s = 0;
  double other_s = 0;  ///< everything else: resuming, logging, accounting
};

struct TuneReport {
  std::vector<TaskSummary> tasks;
  int64_t trials = 0;  ///< new measurements of this run
  double elapsed_s = 0;
  TimeSplit time;
  ir::PassContext pass_context;  ///< the context the run built under
  /// Why the run ended: "trials", "time budget" or "every task done".
  std::string stop_reason;
  /// The weighted sum of the tasks' best latencies (seconds), over the tasks
  /// that have one.
  double weighted_latency() const;
};

/// Called after every measured batch.
using ProgressCallback = std::function<void(const TaskSummary& task, const TuneReport& so_far)>;

/// What a caller may watch or decide during a run.
struct TuneHooks {
  ProgressCallback progress;           ///< after every measured batch
  measure::ResultCallback result;      ///< with every result as it arrives, once it is logged
  TaskScheduler* scheduler = nullptr;  ///< which task goes next; round-robin when null
};

/// Tunes `tasks` until options.trials new measurements were made, the time
/// budget is spent, or every task is done. Every task is checked with the
/// builder and the runner before the first measurement, so a task they
/// cannot take stops the run at once.
TuneReport tune(const std::vector<te::Task>& tasks, const PolicyFactory& make_policy,
                measure::Builder& builder, measure::Runner& runner, const TuneOptions& options,
                const TuneHooks& hooks = {});

}  // namespace tensortune::search
