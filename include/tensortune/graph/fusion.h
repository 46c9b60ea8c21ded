/// \file
/// Fusion: a graph cut into groups of calls that run as one kernel (a conv,
/// dense or matmul with the elementwise operations that follow it, a
/// reduction with its elementwise followers, chains of injective
/// operations), and each group's workload: its calls as tensor expressions
/// over placeholders for what it reads, the model's constants marked as
/// constant inputs. partition_model() (partition.h) applies both to a model.
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

}  // namespace tensortune::graph
