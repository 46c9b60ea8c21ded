/// \file
/// A compiled model, loaded and run: the library loaded from the bytes that
/// were checked, the weights read and packed once, then run() calls the
/// kernels on the plan's buffers.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tensortune/codegen/module.h"
#include "tensortune/runtime/model_folder.h"
#include "tensortune/te/ndarray.h"

namespace tensortune::runtime {

/// A tensor of a compiled model's interface.
struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;
  ir::DataType dtype;
};

/// How a compiled model is loaded.
struct LoadOptions {
  /// Check each file's SHA-256 against the manifest (sizes are always checked).
  bool verify = true;
};

/// A compiled model, loaded.
class CompiledModel {
 public:
  /// Loads a folder compile wrote (read_model_folder checks it first);
  /// errors name the folder and the file.
  static CompiledModel load(const std::string& dir, const LoadOptions& options = {});
  /// A model from its contents in memory (the plan is checked again).
  static CompiledModel from_files(const ModelFiles& files);

  const std::vector<TensorInfo>& inputs() const { return inputs_; }
  const std::vector<TensorInfo>& outputs() const { return outputs_; }
  const ModelPlan& plan() const { return plan_; }
  /// Makes kernel step `i` call `function` of the model's library on the
  /// buffers `args` (how compile times candidate schedules in place),
  /// checked as the plan's own steps are.
  void set_step(size_t i, const std::string& function, const std::vector<int64_t>& args);
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
  /// step of the plan, in order.
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
    std::vector<int64_t> args;  ///< buffer ids
    int64_t copy_from = -1, copy_to = -1;
  };
  void run_steps(const std::vector<te::NDArray>& inputs, std::vector<te::NDArray>& outputs,
                 std::vector<double>* step_seconds);

  codegen::Module module_;
  ModelPlan plan_;
  std::vector<TensorInfo> inputs_, outputs_;
  std::vector<int64_t> input_buffers_, output_buffers_;
  std::vector<te::NDArray> constants_;  ///< by buffer id (weights and packed weights)
  te::NDArray arena_;
  std::vector<int64_t> arena_offset_;                 ///< by buffer id, -1 when not in the arena
  std::vector<std::pair<int64_t, int64_t>> view_of_;  ///< by buffer id: (source, offset), or -1
  std::vector<size_t> buffer_bytes_;
  std::vector<Step> steps_;
};

}  // namespace tensortune::runtime
