/// \file
/// The compute DAG of a workload: its operations in topological order with the
/// analyses schedule rules and lowering need (producers and consumers, whether a
/// stage is injective, reduces, is worth multi-level tiling, can be inlined, is
/// an output), its FLOP count and a canonical printed form.
#pragma once

#include <string>
#include <vector>

#include "tensortune/te/workload.h"

namespace tensortune::schedule {

/// Analysis of one operation of the DAG.
struct StageAnalysis {
  bool is_placeholder = false;
  bool is_output = false;
  /// Every output element depends on a bounded set of input elements by index
  /// arithmetic only: no reduction (elementwise, broadcast, pad, transpose, ...).
  bool is_injective = false;
  bool has_reduction = false;
  /// A reduction that reads two or more tensors, each missing some output axis:
  /// data is reused across output elements, so tiling pays (matmul, conv).
  bool needs_multi_level_tiling = false;
  /// Injective, not an output, not a placeholder: compute_inline is valid.
  bool can_inline = false;
  std::vector<int> producers;  ///< stage indices this stage reads
  std::vector<int> consumers;  ///< stage indices that read this stage
};

/// A workload's tensors as a DAG of stages; a value (cheap to copy).
class ComputeDAG {
 public:
  /// Builds the DAG; rejects a compute whose reduction is not the whole body
  /// (such a stage cannot be given loops) with a message naming the stage.
  explicit ComputeDAG(te::WorkloadTensors tensors);

  /// The stages (placeholders included), producers before consumers.
  const std::vector<te::Tensor>& stages() const { return stages_; }
  const StageAnalysis& analysis(int stage) const { return analysis_.at(stage); }
  const te::WorkloadTensors& tensors() const { return tensors_; }
  int num_stages() const { return static_cast<int>(stages_.size()); }
  /// The index of the stage producing `tensor`, or -1.
  int stage_of(const te::Tensor& tensor) const;
  /// The index of the stage named `name`, or -1.
  int stage_named(std::string_view name) const;
  /// True if stage `stage` is an input the workload marks constant (a weight).
  bool is_constant_input(int stage) const;
  /// Total floating-point operations of one evaluation.
  double flop_count() const { return flops_; }
  /// One line per stage, producers first (te::print_stages).
  std::string str() const;

 private:
  te::WorkloadTensors tensors_;
  std::vector<te::Tensor> stages_;
  std::vector<StageAnalysis> analysis_;
  double flops_ = 0;
};

}  // namespace tensortune::schedule
