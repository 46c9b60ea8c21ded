/// \file
/// Which task of a tuning run gets the next round of measurements. The tuner
/// (tuner.h) owns resuming, measuring and accounting; a scheduler only
/// chooses, from where each task stands. Two: round-robin, and Ansor's
/// gradient scheduler (OSDI '20 section 6), which gives the next round to
/// the task whose tuning is expected to cut the weighted total latency of
/// the run's tasks the most.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensortune/measure/record.h"

namespace tensortune::search {

/// Where one task of a run stands.
struct TaskSummary {
  te::Task task;
  /// How often the task occurs (in a model); its latency counts this often.
  double weight = 1;
  int64_t trials = 0;          ///< measured in this run
  int64_t resumed = 0;         ///< taken from the log at the start
  int64_t rounds = 0;          ///< measured batches in this run
  int64_t confirm_trials = 0;  ///< of trials, best schedules measured again (TuneOptions::confirm)
  /// The best successful record, over the log and this run.
  std::optional<measure::Record> best;
  /// Trials of this run since the best improved (or since the start).
  int64_t trials_since_improvement = 0;
  /// This run found a better record than the log held.
  bool improved = false;
  /// Error code name -> count, over this run (NO_ERROR not counted).
  std::map<std::string, int64_t> errors;
  /// A full error message of the commonest error code, for a task where nothing succeeded.
  std::string sample_error;
  double flops = 0;        ///< per call of the workload
  bool exhausted = false;  ///< the policy found no new states
  /// No improvement for TuneOptions::early_stopping trials: no more rounds.
  bool early_stopped = false;
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
  /// True when the task takes no more rounds.
  bool done() const { return exhausted || early_stopped; }
};

/// Chooses the task to measure next.
class TaskScheduler {
 public:
  virtual ~TaskScheduler() = default;
  virtual std::string name() const = 0;
  /// The index in `tasks` of the task whose round comes next, or nullopt
  /// when no task should be measured any more (every one is done).
  virtual std::optional<size_t> next(const std::vector<TaskSummary>& tasks) = 0;
};

/// Each task that is not done in turn.
class RoundRobinScheduler final : public TaskScheduler {
 public:
  std::string name() const override { return "round-robin"; }
  std::optional<size_t> next(const std::vector<TaskSummary>& tasks) override;

 private:
  size_t next_ = 0;
};

/// What a task computes, for the gradient scheduler's "tasks of the same
/// operator": a registered workload's name ("matmul"); for a DAG workload (a
/// model's fused group) the tags of its stages that need multi-level tiling,
/// joined by '+' ("dense", "batch_matmul"), else its output's tag or name.
std::string operator_class(const te::Task& task);

/// Ansor's gradient scheduler for the objective sum_i w_i * latency_i: a
/// round for each task the log has not measured first, then
/// the task with the most negative estimated gradient
///   w_i * (alpha * backward_i + (1 - alpha) * forward_i),
/// where backward_i is the latency change per trial over the task's last
/// rounds, and forward_i the expected change of one more round: the better
/// of a 1/rounds improvement and reaching beta times the throughput of the
/// fastest task of the same operator (operator_class). Ties go to the lower index.
class GradientScheduler final : public TaskScheduler {
 public:
  explicit GradientScheduler(double alpha = 0.2, double beta = 2, int backward_window = 3)
      : alpha_(alpha), beta_(beta), window_(backward_window) {}
  std::string name() const override { return "gradient"; }
  std::optional<size_t> next(const std::vector<TaskSummary>& tasks) override;

 private:
  double alpha_, beta_;
  int window_;
  /// Per task: (trials so far, best latency) after each of its rounds.
  std::vector<std::vector<std::pair<int64_t, double>>> history_;
  /// Per task: operator_class, computed on first use.
  std::vector<std::string> classes_;
};

/// The scheduler named `name` ("gradient" or "round-robin"); a
/// kInvalidArgument error listing them otherwise.
std::unique_ptr<TaskScheduler> make_task_scheduler(std::string_view name);

}  // namespace tensortune::search
