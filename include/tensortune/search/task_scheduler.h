/// \file
/// Which task of a tuning run gets the next round of measurements. The tuner
/// (tuner.h) owns resuming, measuring and accounting; a scheduler only
/// chooses, from where each task stands, so that a smarter allocation (by
/// the estimated gain in weighted latency) replaces round-robin without
/// touching the rest.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tensortune/measure/record.h"

namespace tensortune::search {

/// Where one task of a run stands.
struct TaskSummary {
  te::Task task;
  int64_t trials = 0;   ///< measured in this run
  int64_t resumed = 0;  ///< taken from the log at the start
  /// The best successful record, over the log and this run.
  std::optional<measure::Record> best;
  /// Error code name -> count, over this run (NO_ERROR not counted).
  std::map<std::string, int64_t> errors;
  /// A full error message of the commonest error code, for a task where nothing succeeded.
  std::string sample_error;
  double flops = 0;        ///< per call of the workload
  bool exhausted = false;  ///< the policy found no new states
  /// Records of this task in the log that were not resumed because they were
  /// built under another pass context, and those contexts.
  size_t other_context_records = 0;
  std::vector<measure::Hash64> other_contexts;

  /// Seconds per call of the best record; nullopt when nothing succeeded.
  std::optional<double> best_latency() const;
  /// GFLOP/s of the best record; nullopt when nothing succeeded.
  std::optional<double> best_gflops() const;
  /// True when candidates were measured (here or in the log) and none succeeded.
  bool failed() const { return !best && trials + resumed > 0; }
};

/// Chooses the task to measure next.
class TaskScheduler {
 public:
  virtual ~TaskScheduler() = default;
  /// The index in `tasks` of the task whose round comes next, or nullopt
  /// when no task should be measured any more (every one is exhausted).
  virtual std::optional<size_t> next(const std::vector<TaskSummary>& tasks) = 0;
};

/// Each task that is not exhausted in turn.
class RoundRobinScheduler final : public TaskScheduler {
 public:
  std::optional<size_t> next(const std::vector<TaskSummary>& tasks) override;

 private:
  size_t next_ = 0;
};

}  // namespace tensortune::search
