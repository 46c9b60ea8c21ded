/// \file
/// Compiling a model for a target.
///
/// compile_model() compiles a model's Partition (partition.h, the very one
/// `tasks` and `tune` start from, so every kernel is one of their tasks):
/// it takes each task's best schedule from the record log under the current
/// PassContext (or the default schedule, saying why), and writes the
/// compiled model's folder (runtime/model_folder.h: the library, the plan
/// with buffers planned so that intermediates never live together share
/// memory, the weights, and a manifest of their hashes). With
/// in_model.candidates > 1 the library holds each task's best few
/// schedules and each task keeps the one fastest inside the model, timed
/// on this machine by a worker. runtime::CompiledModel loads and runs the folder.
#pragma once

#include <string>
#include <vector>

#include "tensortune/codegen/module.h"
#include "tensortune/graph/partition.h"
#include "tensortune/measure/model_timing.h"
#include "tensortune/measure/record.h"
#include "tensortune/runtime/compiled_model.h"

namespace tensortune::graph {

struct CompileOptions {
  ir::Target target;
  /// Measurement records to take schedules from (may be empty).
  std::vector<measure::Record> records;
  /// Records of any PassContext, not only the current one's.
  bool any_pass_context = false;
  /// A task without a tuned schedule is an error instead of the default schedule.
  bool fail_on_default = false;
  codegen::ModuleOptions module_options;
  /// in_model.candidates > 1 has a worker time the model on this machine
  /// with each of a task's best schedules in place and keeps the one fastest
  /// in the model (measure/model_timing.h).
  measure::ModelTimingOptions in_model;
  /// Files the output folder may neither be nor contain (the model, the log).
  std::vector<std::string> protect;
};

/// How one task of the model was scheduled.
struct ApplyEntry {
  std::string workload_key;
  std::string function;     ///< its kernel in the model's library
  std::string description;  ///< its fused operators
  int64_t occurrences = 0;
  bool tuned = false;
  std::string why;             ///< the record's latency, or why there is none
  double tuned_latency_s = 0;  ///< from the record, when tuned
  double flops = 0;            ///< one call's floating-point operations
};

struct CompileReport {
  std::vector<ApplyEntry> tasks;
  int64_t kernels = 0;             ///< kernel calls (and copies) of the model
  int64_t planned_bytes = 0;       ///< the arena holding every intermediate
  int64_t intermediate_bytes = 0;  ///< the intermediates' sizes added up
  int64_t weight_bytes = 0;
  double seconds = 0;
  /// Set when the graph passes failed and the model was compiled as given
  /// (Partition::fallback_reason).
  std::string fallback_reason;
  /// What the user should know: records skipped because they no longer replay.
  std::vector<std::string> warnings;
  /// With in_model.candidates > 1: what timing the candidates in the model
  /// found (tasks compared and changed, evaluations, seconds, per task).
  nlohmann::json in_model;
  nlohmann::json to_json() const;
};

/// Compiles `partition`, made for options.target, into the folder
/// `out_dir`; see the file comment. A compiled model there is replaced;
/// anything else there is refused (runtime::check_model_destination),
/// before any work.
CompileReport compile_model(const Partition& partition, const CompileOptions& options,
                            const std::string& out_dir);

/// compile_model(partition_model(model, options.target), options, out_dir),
/// with out_dir checked first.
CompileReport compile_model(const Graph& model, const CompileOptions& options,
                            const std::string& out_dir);

}  // namespace tensortune::graph
