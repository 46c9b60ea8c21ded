/// \file
/// A model cut into the kernels it runs. partition_model() is the one place
/// the optimisation pipeline and fusion run for a model: `tasks`, `tune` and
/// `compile` all start from its Partition, so the workloads tuned are the
/// workloads compiled.
#pragma once

#include <string>
#include <vector>

#include "tensortune/graph/fusion.h"

namespace tensortune::graph {

/// One distinct workload of a model: a tuning task, and one kernel of the
/// compiled model's library.
struct PartitionTask {
  te::Task task;
  std::string workload_key;
  std::string description;  ///< the fused operators of its first group
  int64_t occurrences = 0;  ///< the groups of the model that are this workload
  double flops = 0;         ///< per call
};

/// The optimised graph, its fused groups and their tasks.
struct Partition {
  ir::Target target;
  /// What was cut: the optimised model, or the model as given when
  /// optimize() failed.
  Graph graph;
  /// Set when optimize() failed, saying why.
  std::string fallback_reason;
  std::vector<FusedGroup> groups;      ///< producers first (fuse_groups)
  std::vector<int64_t> task_of_group;  ///< index into tasks; -1 for a view
  std::vector<PartitionTask> tasks;    ///< deduplicated by workload key, in first-use order
};

/// Optimises `model` for `target` under the current PassContext, fuses it
/// and makes one task per distinct group workload. When optimize() fails,
/// the model as given is cut instead (it is the caller's, untouched) and
/// fallback_reason says why. Analysis only: nothing is generated or built.
Partition partition_model(const Graph& model, const ir::Target& target);

}  // namespace tensortune::graph
