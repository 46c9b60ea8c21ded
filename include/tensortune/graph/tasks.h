/// \file
/// From a model to tuning tasks. The optimised graph (optimize(), the very
/// passes the compile path runs) is cut into fused groups: a conv, dense or
/// matmul with the elementwise operations that follow it, a reduction with
/// its elementwise followers, and chains of injective operations. Each
/// group is a workload (its calls as tensor expressions over placeholders
/// for what it reads, the model's constants marked as constant inputs);
/// identical groups are one task, weighted by how often they occur.
/// Extraction is analysis only: nothing is generated or compiled, and the
/// model it is given is not changed (nothing can change it).
#pragma once

#include <string>
#include <vector>

#include "tensortune/graph/graph.h"
#include "tensortune/te/task.h"

namespace tensortune::graph {

/// Calls of the graph fused into one kernel.
struct FusedGroup {
  std::vector<Ref<CallNode>> calls;  ///< producers first; the last is the group's output
  std::vector<Value> inputs;         ///< what it reads from outside, in first-use order
  /// The operators, e.g. "nn.conv2d+nn.bias_add+relu".
  std::string description() const;
  /// A reshape alone: the same memory as its input, seen in another shape;
  /// no kernel and no task.
  bool is_view() const;
};

/// The groups of `graph` in an order that runs producers first. A reshape
/// is a group of its own (a view, see is_view()). Another call joins
/// the group of the call it reads when that call has no other reader, is no
/// output of the graph, ends its group, and the two fit: elementwise
/// operations join any group, injective ones only groups without a
/// convolution, dense, matmul or reduction; groups stay under `max_calls`.
/// Elementwise calls that read a value on several branches join it when the
/// branches meet again in one call (GELU, SiLU).
std::vector<FusedGroup> fuse_groups(const Graph& graph, size_t max_calls = 16);

/// The workload of a group: placeholders "p0", "p1", ... for its inputs,
/// those that are constants of the model marked constant.
te::Workload group_workload(const FusedGroup& group);

/// One tuning task of a model.
struct ExtractedTask {
  te::Task task;
  int64_t weight = 1;       ///< occurrences in the model
  std::string description;  ///< the fused operators of (the first of) its groups
  double flops = 0;         ///< per call of the workload
};

/// What extraction found, and whether it had to fall back.
struct Extraction {
  std::vector<ExtractedTask> tasks;
  /// Set when optimize() failed: the tasks are then those of the graph as
  /// given, and this says why.
  std::string fallback_reason;
};

/// The tuning tasks of `model` for `target`, in the order they first occur,
/// deduplicated by workload key. When optimize() fails, extraction falls
/// back to fusing the graph as given (still the caller's, untouched) and
/// says so.
Extraction extract_tasks(const Graph& model, const ir::Target& target);

}  // namespace tensortune::graph
