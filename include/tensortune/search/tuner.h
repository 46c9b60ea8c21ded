/// \file
/// The tuning loop: resume every task from the log, ask a scheduler which
/// task goes next, ask that task's policy for states, measure them in
/// batches through a builder and a runner, and append every record to the
/// log as it arrives, so that no state is measured twice across runs.
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

struct TuneOptions {
  int64_t trials = 64;   ///< new measurements in this run, over all tasks
  int batch_size = 16;   ///< states proposed and measured together
  std::string log_path;  ///< records are appended here and resumed from; "" keeps none
  uint64_t seed = 0;
  /// The context every candidate is built under; null takes the one current
  /// where tune() is called.
  ir::PassContext pass_context;
  /// Resume from records of any pass context, not only pass_context's.
  bool any_pass_context = false;
};

struct TuneReport {
  std::vector<TaskSummary> tasks;
  int64_t trials = 0;  ///< new measurements of this run
  double elapsed_s = 0;
  ir::PassContext pass_context;  ///< the context the run built under
};

/// Called after every measured batch.
using ProgressCallback = std::function<void(const TaskSummary& task, const TuneReport& so_far)>;

/// What a caller may watch or decide during a run.
struct TuneHooks {
  ProgressCallback progress;           ///< after every measured batch
  measure::ResultCallback result;      ///< with every result as it arrives, once it is logged
  TaskScheduler* scheduler = nullptr;  ///< which task goes next; round-robin when null
};

/// Tunes `tasks` until options.trials new measurements were made or every
/// policy is exhausted. Every task is checked with the builder and the runner
/// before the first measurement, so a task they cannot take stops the run at
/// once.
TuneReport tune(const std::vector<te::Task>& tasks, const PolicyFactory& make_policy,
                measure::Builder& builder, measure::Runner& runner, const TuneOptions& options,
                const TuneHooks& hooks = {});

}  // namespace tensortune::search
