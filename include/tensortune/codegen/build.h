/// \file
/// From schedule states to built, and optionally checked, kernels: replay
/// each state on the DAG, lower it under a PassContext, generate its code
/// with the target kind's back end (once), compile all of them together (and
/// one by one when that fails, so that each compiler error lands on its
/// state), and for verify_states run each kernel against the reference
/// evaluator. The one pipeline behind the build worker, `tensortune verify`
/// and the correctness tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensortune/codegen/kernel_check.h"
#include "tensortune/codegen/module.h"
#include "tensortune/ir/pass_context.h"
#include "tensortune/ir/target.h"
#include "tensortune/schedule/compute_dag.h"
#include "tensortune/schedule/state.h"

namespace tensortune::codegen {

/// A packing function of a layout-rewritten input (lower::Packer), as built.
struct PackerInfo {
  int input = 0;         ///< index among the workload's inputs
  std::string function;  ///< its name in the module; takes (original, packed)
  int64_t elements = 0;  ///< of the packed buffer
};

/// `inputs` with each packed input replaced by its packed form, made by the
/// packers of `module`.
std::vector<te::NDArray> pack_inputs(const Module& module, const std::vector<PackerInfo>& packers,
                                     const std::vector<te::NDArray>& inputs);

/// Where building a state stopped.
enum class BuildStage {
  kBuilt,    ///< it built
  kReplay,   ///< a step does not replay on the DAG
  kLower,    ///< lowering or code generation failed
  kCompile,  ///< the compiler failed on its code
};

/// What became of one state.
struct StateBuild {
  BuildStage stage = BuildStage::kBuilt;
  /// Why it failed (a user error's kind: a bug of tensortune is thrown as
  /// an InternalError instead, never recorded on a state).
  ErrorKind error_kind = ErrorKind::kRuntime;
  std::string error;
  Module module;         ///< holds the kernel, when built
  std::string function;  ///< the kernel's name in module
  /// The packing functions of the state's layout-rewritten inputs (in
  /// module too): run each on its input before calling the kernel.
  std::vector<PackerInfo> packers;
  /// Replaying, lowering and generating this state, plus its share of compiling.
  double seconds = 0;
  /// What the context's instruments saw lowering this state (name -> results).
  nlohmann::json instruments = nlohmann::json::object();

  bool ok() const { return stage == BuildStage::kBuilt; }
};

/// Builds `states` for `target`: each replayed and lowered under its own
/// PassContextGuard of `context` (so its instruments see this state alone),
/// its kernel called `<prefix><i>`; every state that lowered goes into one
/// module with one compiler run, or, when that fails, into a module of its
/// own. Never throws for a bad state, nor for a target kind without a back
/// end (every state then fails at kLower saying so); a bug of tensortune
/// while building any state is thrown as an InternalError naming the stage.
std::vector<StateBuild> build_states(const schedule::ComputeDAG& dag,
                                     const std::vector<schedule::State>& states,
                                     const ir::Target& target, const ir::PassContext& context,
                                     const ModuleOptions& options = {},
                                     const std::string& prefix = "kernel_");

/// A state built and run once against the reference evaluator.
struct StateCheck {
  StateBuild build;
  std::optional<KernelCheck> check;  ///< when it built

  bool ok() const { return build.ok() && check && check->ok(); }
};

/// build_states, then every kernel that built called once on te::random_inputs
/// (seed) and compared with the reference evaluator (check_kernel).
std::vector<StateCheck> verify_states(const te::WorkloadTensors& tensors,
                                      const std::vector<schedule::State>& states,
                                      const ir::Target& target, const ir::PassContext& context,
                                      uint64_t seed, const ModuleOptions& options = {});

/// "built", "replay", "lower", "compile".
std::string_view build_stage_name(BuildStage stage);

}  // namespace tensortune::codegen
