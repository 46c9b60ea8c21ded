/// \file
/// A model compiled for a target, and the runtime that runs it.
///
/// compile_model() runs the optimisation pipeline and the fusion that task
/// extraction runs (so every kernel is one of the extracted tasks), takes
/// each group's best schedule from the record log under the current
/// PassContext (or the default schedule, saying why), and writes a folder:
///   model.so     every kernel and weight-packing function, one compile
///   plan.json    inputs, outputs, buffers (arena offsets planned so that
///                intermediates that are never live together share memory),
///                the kernel calls in order, and the apply report
///   weights.bin  the constants, 64-byte aligned
/// With in_model_candidates > 1 the library holds each task's best few
/// schedules and each task keeps the one fastest inside the model, timed
/// on this machine. The folder appears whole or not at all. CompiledModel::load() maps it
/// back: weights are read and packed once, then run() calls the kernels.
#pragma once

#include <string>
#include <vector>

#include "tensortune/codegen/module.h"
#include "tensortune/graph/graph.h"
#include "tensortune/measure/record.h"

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
  /// Schedules per task taken from the log, best first: with more than one,
  /// the model is timed on this machine with each in place and each task
  /// keeps the one fastest in the model (see choose_in_model in compile.cc).
  int in_model_candidates = 1;
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
  /// (as extraction then extracts it).
  std::string fallback_reason;
  /// With in_model_candidates > 1: what timing the candidates in the model
  /// found (tasks compared and changed, evaluations, seconds, per task).
  nlohmann::json in_model;
  nlohmann::json to_json() const;
};

/// Compiles `model` into the folder `out_dir` (replacing one that is there);
/// see the file comment.
CompileReport compile_model(const Graph& model, const CompileOptions& options,
                            const std::string& out_dir);

/// A tensor of a compiled model's interface.
struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;
  ir::DataType dtype;
};

/// A compiled model, loaded.
class CompiledModel {
 public:
  /// Loads a folder compile_model wrote; errors name the folder and the file.
  static CompiledModel load(const std::string& dir);
  const std::vector<TensorInfo>& inputs() const { return inputs_; }
  const std::vector<TensorInfo>& outputs() const { return outputs_; }
  const nlohmann::json& plan() const { return plan_; }
  /// Makes kernel step `i` call `function` of the model's library on the
  /// buffers `args` (how compile_model times candidate schedules in place).
  void set_step(size_t i, const std::string& function, const std::vector<int>& args);
  /// Threads of the parallel loops (0: the target's cores).
  void set_threads(int threads);
  /// The outputs for `inputs` (one per input, in order, of the input's shape
  /// and dtype; otherwise a kInvalidArgument error naming it).
  std::vector<te::NDArray> run(const std::vector<te::NDArray>& inputs);
  /// run() into `outputs` (one per output, in order, of its shape and dtype;
  /// otherwise a kInvalidArgument error naming it): no allocation, so that
  /// repeated calls reuse warm pages.
  void run_into(const std::vector<te::NDArray>& inputs, std::vector<te::NDArray>& outputs);
  /// run_into(), timing each kernel call: `step_seconds` gets one entry per
  /// step of the plan (steps()), in order.
  void run_timed(const std::vector<te::NDArray>& inputs, std::vector<te::NDArray>& outputs,
                 std::vector<double>& step_seconds);
  /// Empty outputs of the model's shapes and dtypes, for run_into().
  std::vector<te::NDArray> make_outputs() const;
  /// What each step of the plan does: its kernel's operators, or "copy".
  std::vector<std::string> step_names() const;
  /// Each step's task in the apply report (function, description, flops,
  /// tuned_latency_s, ...), or null for a copy.
  std::vector<nlohmann::json> step_tasks() const;

 private:
  struct Step {
    codegen::KernelFn fn = nullptr;
    std::vector<int> args;  ///< buffer ids
    int copy_from = -1, copy_to = -1;
  };
  codegen::Module module_;
  nlohmann::json plan_;
  std::vector<TensorInfo> inputs_, outputs_;
  std::vector<int> input_buffers_, output_buffers_;
  void run_steps(const std::vector<te::NDArray>& inputs, std::vector<te::NDArray>& outputs,
                 std::vector<double>* step_seconds);
  std::vector<te::NDArray> constants_;  ///< by buffer id (weights and packed weights)
  te::NDArray arena_;
  std::vector<int64_t> arena_offset_;  ///< by buffer id, -1 when not in the arena
  std::vector<size_t> buffer_bytes_;
  std::vector<Step> steps_;
};

}  // namespace tensortune::graph
