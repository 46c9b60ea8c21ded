/// \file
/// The tuning loop: ask a policy for states, measure them in batches through
/// a builder and a runner, append every record to the log as it arrives,
/// and resume from an existing log without measuring a state twice.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tensortune/measure/measurer.h"
#include "tensortune/measure/record.h"
#include "tensortune/search/search_policy.h"

namespace tensortune::search {

struct TuneOptions {
  int64_t trials = 64;    ///< new measurements in this run, over all tasks
  int batch_size = 16;    ///< states proposed and measured together
  std::string log_path;   ///< records are appended here and resumed from; "" keeps none
  uint64_t seed = 0;
};

/// Where one task stands.
struct TaskSummary {
  te::Task task;
  int64_t trials = 0;   ///< measured in this run
  int64_t resumed = 0;  ///< found in the log at the start
  /// The best successful record, over the log and this run.
  std::optional<measure::Record> best;
  /// Error code name -> count, over this run (NO_ERROR not counted).
  std::map<std::string, int64_t> errors;
  /// A full error message of the commonest error code, for a task where nothing succeeded.
  std::string sample_error;
  double flops = 0;        ///< per call of the workload
  bool exhausted = false;  ///< the policy found no new states

  /// Seconds per call of the best record; nullopt when nothing succeeded.
  std::optional<double> best_latency() const;
  /// GFLOP/s of the best record; nullopt when nothing succeeded.
  std::optional<double> best_gflops() const;
  /// True when candidates were measured (here or in the log) and none succeeded.
  bool failed() const { return !best && trials + resumed > 0; }
};

struct TuneReport {
  std::vector<TaskSummary> tasks;
  int64_t trials = 0;  ///< new measurements of this run
  double elapsed_s = 0;
};

/// Called after every measured batch.
using ProgressCallback = std::function<void(const TaskSummary& task, const TuneReport& so_far)>;

/// Tunes `tasks` round-robin until options.trials new measurements were
/// made or every policy is exhausted.
TuneReport tune(const std::vector<te::Task>& tasks, const PolicyFactory& make_policy,
                measure::Builder& builder, measure::Runner& runner, const TuneOptions& options,
                const ProgressCallback& progress = {});

}  // namespace tensortune::search
